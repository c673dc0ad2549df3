//! Faulty provider: a deliberately misbehaving Seam subagent provider for containment tests.
//!
//! Its config `mode` picks one failure: trapping or panicking in `describe`, trapping or
//! panicking around readiness, spinning forever without touching the host, or sleeping forever
//! while ignoring cancellation. The host must contain each of these without hanging or
//! crashing. Mode `ok` behaves, so the same component can also serve as a well-formed baseline.
//!
//! Modes: `ok`, `trap-describe`, `panic-describe`, `trap-before-ready`, `trap-after-ready`,
//! `panic-after-ready`, `spin-after-ready`, `spin-before-ready`, `ignore-cancel`, and
//! `stderr-then-trap` (after ready, writes 50 numbered lines to stderr, `faulty provider: stderr
//! line N of 50`, then traps), for the stderr tail a fault report shows.

wit_bindgen::generate!({ path: "../../wit/v0.3.0", world: "provider-plugin", generate_all });

use exports::seam::plugin::provider::Guest;
use seam::plugin::run_context;
use seam::plugin::types::{
    Capabilities, ContentBlock, ProviderDescriptor, RuntimeFeatures, StartRequest, StopReason,
    SubagentResult,
};
use seam_plugin::config::{self, Section};

/// Every key the config may contain.
const KEYS: &[&str] = &["name", "mode", "reply", "capabilities"];

struct FaultyProvider;

export!(FaultyProvider);

/// The misbehaviour the config asks for.
#[derive(Clone, Copy)]
enum Mode {
    Ok,
    TrapDescribe,
    PanicDescribe,
    TrapBeforeReady,
    TrapAfterReady,
    PanicAfterReady,
    SpinAfterReady,
    SpinBeforeReady,
    IgnoreCancel,
    StderrThenTrap,
}

/// Config names of the modes, for parsing and for the error listing them.
const MODES: &[(&str, Mode)] = &[
    ("ok", Mode::Ok),
    ("trap-describe", Mode::TrapDescribe),
    ("panic-describe", Mode::PanicDescribe),
    ("trap-before-ready", Mode::TrapBeforeReady),
    ("trap-after-ready", Mode::TrapAfterReady),
    ("panic-after-ready", Mode::PanicAfterReady),
    ("spin-after-ready", Mode::SpinAfterReady),
    ("spin-before-ready", Mode::SpinBeforeReady),
    ("ignore-cancel", Mode::IgnoreCancel),
    ("stderr-then-trap", Mode::StderrThenTrap),
];

/// The validated plugin config.
struct Settings {
    /// Deliberately not checked for emptiness, so the host's own check can be tested.
    name: String,
    mode: Mode,
    reply: String,
    capabilities: Capabilities,
}

impl Settings {
    fn parse(text: &str) -> Result<Self, String> {
        let fields = config::parse(text)?;
        let root = Section::root(&fields, KEYS)?;
        let mode_name = root.required_string("mode")?;
        let mode = MODES
            .iter()
            .find(|(name, _)| *name == mode_name)
            .map(|&(_, mode)| mode)
            .ok_or_else(|| {
                let names: Vec<String> =
                    MODES.iter().map(|(name, _)| format!("`{name}`")).collect();
                root.invalid("mode", &format!("one of {}", names.join(", ")))
            })?;
        Ok(Settings {
            name: root.string("name")?.unwrap_or_else(|| "faulty".to_owned()),
            mode,
            reply: root.string("reply")?.unwrap_or_else(|| "ok".to_owned()),
            capabilities: parse_capabilities(&root)?,
        })
    }
}

/// Reads the optional `capabilities` object; a missing object or key means "not supported".
fn parse_capabilities(root: &Section) -> Result<Capabilities, String> {
    let [output_schema, depth_limit, tool_filter, persona] = config::capability_flags(root)?;
    Ok(Capabilities {
        output_schema,
        depth_limit,
        tool_filter,
        persona,
    })
}

/// Executes the Wasm `unreachable` instruction: a trap, with no panic machinery involved.
fn trap() -> ! {
    core::arch::wasm32::unreachable()
}

/// Burns CPU forever without calling any host import, so only the host's own preemption (epoch
/// or fuel) can stop it. `black_box` keeps the optimiser from proving the loop does nothing.
fn spin() -> ! {
    let mut state: u64 = 1;
    loop {
        state = std::hint::black_box(
            state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407),
        );
    }
}

impl Guest for FaultyProvider {
    fn describe(config: String) -> Result<ProviderDescriptor, String> {
        let settings = Settings::parse(&config)?;
        match settings.mode {
            Mode::TrapDescribe => trap(),
            Mode::PanicDescribe => panic!("faulty provider: panicking in describe as configured"),
            _ => Ok(ProviderDescriptor {
                name: settings.name,
                capabilities: settings.capabilities,
                features: RuntimeFeatures {
                    steering: false,
                    resume: false,
                },
                inherits_parent_context: false,
            }),
        }
    }

    fn run(
        config: String,
        _run_id: String,
        _request: StartRequest,
    ) -> Result<SubagentResult, String> {
        let settings = Settings::parse(&config)?;
        match settings.mode {
            Mode::TrapBeforeReady => trap(),
            Mode::SpinBeforeReady => spin(),
            Mode::TrapAfterReady => {
                run_context::ready();
                // Give the host time to observe the start before the instance dies.
                let _ = run_context::sleep(20);
                trap()
            }
            Mode::PanicAfterReady => {
                run_context::ready();
                panic!("faulty provider: panicking after ready as configured")
            }
            Mode::SpinAfterReady => {
                run_context::ready();
                spin()
            }
            Mode::StderrThenTrap => {
                run_context::ready();
                for n in 1..=50 {
                    eprintln!("faulty provider: stderr line {n} of 50");
                }
                trap()
            }
            Mode::IgnoreCancel => {
                run_context::ready();
                // Keeps calling into the host but never looks at cancellation.
                loop {
                    let _ = run_context::sleep(10);
                }
            }
            // The describe-time faults never get a run, so they behave like `ok` here.
            Mode::Ok | Mode::TrapDescribe | Mode::PanicDescribe => {
                run_context::ready();
                Ok(SubagentResult {
                    output: vec![ContentBlock::Text(settings.reply)],
                    structured: None,
                    stop_reason: StopReason::Completed,
                    diagnostic: None,
                })
            }
        }
    }
}
