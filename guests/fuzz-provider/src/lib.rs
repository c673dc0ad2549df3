//! Fuzz provider: a Seam provider component that calls the host's imports in the order, and
//! with the arguments, its run's prompt spells, for the fuzz target `provider_imports`.
//!
//! The prompt is a program in hex: one opcode byte, then the bytes of its arguments (missing
//! bytes read as zero). Opcodes (modulo 16): ready, is-cancelled, cancel-reason, sleep (up to
//! 7 ms), log (a level and up to 255 bytes of text, any bytes), create-child (options from
//! the next bytes: persona, a tool filter, an output schema that may be any text, a seed), send
//! and steer (a message of up to 64 KiB), wait-idle, child id, child dispose, child drop, and an
//! early answer. After the program it answers with a stop reason and a `structured` text taken
//! from the program too (so invalid JSON and odd reasons cross the boundary). Nothing here is
//! checked by the guest: every outcome is the host's to handle.

wit_bindgen::generate!({ path: "../../wit/v0.3.0", world: "provider-plugin", generate_all });

use exports::seam::plugin::provider::Guest;
use seam::plugin::agents::{self, ChildOptions, Seed};
use seam::plugin::host::{log, LogLevel};
use seam::plugin::run_context;
use seam::plugin::types::{
    AgentOptions, Capabilities, ContentBlock, ProviderDescriptor, RuntimeFeatures, StartRequest,
    StopReason, SubagentResult, ToolFilter,
};

struct FuzzProvider;

export!(FuzzProvider);

/// Reads a program; past the end, every read is zero.
struct Program {
    bytes: Vec<u8>,
    at: usize,
}

impl Program {
    fn parse(hex: &str) -> Self {
        let digits: Vec<u8> = hex
            .bytes()
            .filter_map(|c| (c as char).to_digit(16).map(|d| d as u8))
            .collect();
        let bytes = digits
            .chunks(2)
            .map(|p| p[0] << 4 | p.get(1).copied().unwrap_or(0))
            .collect();
        Self { bytes, at: 0 }
    }

    fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }

    fn byte(&mut self) -> u8 {
        let b = self.bytes.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    fn text(&mut self, max: usize) -> String {
        let len = (self.byte() as usize).min(max);
        let raw: Vec<u8> = (0..len).map(|_| self.byte()).collect();
        String::from_utf8_lossy(&raw).into_owned()
    }

    fn maybe_text(&mut self) -> Option<String> {
        (self.byte() % 2 == 1).then(|| self.text(255))
    }

    fn names(&mut self) -> Option<Vec<String>> {
        (self.byte() % 2 == 1).then(|| (0..self.byte() % 4).map(|_| self.text(16)).collect())
    }
}

fn options(p: &mut Program) -> ChildOptions {
    ChildOptions {
        agent_options: (p.byte() % 2 == 1).then(|| AgentOptions {
            model: p.maybe_text(),
            system_prompt: p.maybe_text(),
        }),
        persona: p.maybe_text(),
        tool_filter: (p.byte() % 2 == 1).then(|| ToolFilter {
            allow: p.names(),
            deny: p.names(),
        }),
        output_schema: p.maybe_text().map(|s| {
            if s.len() % 2 == 0 {
                format!(
                    "{{\"type\":\"object\",\"properties\":{{\"{s}\":{{\"type\":\"string\"}}}}}}"
                )
            } else {
                s
            }
        }),
        seed: if p.byte().is_multiple_of(2) {
            Seed::None
        } else {
            Seed::ParentCompletedTurns
        },
    }
}

fn message(p: &mut Program) -> Vec<ContentBlock> {
    let len = (p.byte() as usize) << 8;
    let text = p.text(255);
    vec![ContentBlock::Text(text.repeat(1 + len / text.len().max(1)))]
}

fn stop_reason(b: u8, name: String) -> StopReason {
    match b % 7 {
        0 => StopReason::Completed,
        1 => StopReason::Aborted,
        2 => StopReason::Error,
        3 => StopReason::MaxTokens,
        4 => StopReason::Refusal,
        _ => StopReason::Other(name),
    }
}

fn run_program(p: &mut Program) -> Result<SubagentResult, String> {
    let mut child: Option<agents::Child> = None;
    while !p.done() {
        match p.byte() % 16 {
            0 => run_context::ready(),
            1 => {
                let _ = run_context::is_cancelled();
            }
            2 => {
                let _ = run_context::cancel_reason();
            }
            3 => {
                let _ = run_context::sleep(u64::from(p.byte() % 8));
            }
            4 => {
                let level = match p.byte() % 5 {
                    0 => LogLevel::Trace,
                    1 => LogLevel::Debug,
                    2 => LogLevel::Info,
                    3 => LogLevel::Warn,
                    _ => LogLevel::Error,
                };
                log(level, &p.text(255));
            }
            5 => {
                let opts = options(p);
                if let Ok(c) = agents::create_child(&opts) {
                    child = Some(c);
                }
            }
            6 => {
                let m = message(p);
                if let Some(c) = &child {
                    let _ = c.send(&m);
                }
            }
            7 => {
                let m = message(p);
                if let Some(c) = &child {
                    c.steer(&m);
                }
            }
            8 => {
                if let Some(c) = &child {
                    let _ = c.wait_idle();
                }
            }
            9 => {
                if let Some(c) = &child {
                    let _ = c.id();
                }
            }
            10 => {
                if let Some(c) = &child {
                    c.dispose();
                }
            }
            11 => child = None,
            12 => return Err(p.text(255)),
            _ => {}
        }
    }
    let reason = p.byte();
    let name = p.text(32);
    Ok(SubagentResult {
        output: vec![ContentBlock::Text(p.text(255))],
        structured: p.maybe_text(),
        stop_reason: stop_reason(reason, name),
        diagnostic: p.maybe_text(),
    })
}

impl Guest for FuzzProvider {
    fn describe(_config: String) -> Result<ProviderDescriptor, String> {
        Ok(ProviderDescriptor {
            name: "fuzz".into(),
            capabilities: Capabilities {
                output_schema: true,
                depth_limit: true,
                tool_filter: true,
                persona: true,
            },
            features: RuntimeFeatures {
                steering: true,
                resume: true,
            },
            inherits_parent_context: false,
        })
    }

    fn run(
        _config: String,
        _run_id: String,
        request: StartRequest,
    ) -> Result<SubagentResult, String> {
        let hex: String = request
            .prompt
            .iter()
            .map(|b| match b {
                ContentBlock::Text(t) | ContentBlock::Json(t) => t.as_str(),
            })
            .collect();
        run_program(&mut Program::parse(&hex))
    }
}
