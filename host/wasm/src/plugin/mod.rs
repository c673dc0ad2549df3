//! Components as plugins.
//!
//! - [`context`]: what a store serves (a run, a tool call), as data.
//! - [`state`]: the data of every plugin store, and how a store is made from a sandbox.
//! - One module per host-implemented WIT interface, each with its own `add_to_linker`: [`log`]
//!   (`host` and `types`), [`run_context`], [`agents`], [`subagents`]; [`filesystem`] shadows
//!   wasmtime-wasi's `wasi:filesystem/types` functions that grow what a plugin keeps on disk,
//!   to count them against its disk quota; [`http`] gates `wasi:http` requests by origin grant;
//!   [`io_error`] keeps host backtraces out of what a guest reads of a host error.
//! - [`v0_1_0`]: the host imports of `seam:plugin@0.1.0`, delegating to the modules above.
//! - [`guest`]: a component's exports, whatever its version, called in `seam-core`'s types.
//! - One module per plugin kind: [`wasm_provider`] behind `seam_core::Provider`, [`wasm_tool`] behind
//!   `seam_core::ToolSource`, [`wasm_observer`] as an event listener.
//!
//! [`Linkers`] assembles each world's linker from the interface modules, and [`link`] is the one
//! path from a compiled component to a linked plugin that has declared itself: loading and
//! `inspect` both go through it.

pub(crate) mod agents;
pub(crate) mod context;
pub(crate) mod filesystem;
pub(crate) mod guest;
pub(crate) mod http;
pub(crate) mod io_error;
pub(crate) mod log;
pub(crate) mod run_context;
pub(crate) mod sockets;
pub(crate) mod state;
pub(crate) mod subagents;
pub(crate) mod v0_1_0;
pub(crate) mod wasm_observer;
pub(crate) mod wasm_provider;
pub(crate) mod wasm_tool;

use std::sync::Arc;
use std::time::Duration;

use seam_core::agent::AgentRegistry;
use seam_core::live::LiveCounts;
use seam_core::subagent::SubagentService;
use seam_core::tool::ToolBinding;
use seam_core::types::{PluginKind, ProviderDescriptor};
use thiserror::Error;
use wasmtime::component::{Component, Linker};
use wasmtime::Engine;

use crate::sandbox::{LimitHit, Sandbox};
pub use state::StoreData;

/// What went wrong inside a guest: a limit it hit, a trap, or another engine error. Kept typed
/// until it is rendered.
///
/// A trap or other fault names its cause (`wasm trap: wasm `unreachable` instruction
/// executed`), the guest function it happened in when the error carries a wasm backtrace (the
/// innermost frame outside Rust's standard library and panic runtime, so a panic names the
/// function that panicked), and, through [`GuestFault::from_store_error`], the last lines the
/// guest wrote to stderr (a Rust guest's panic message): ``wasm trap: wasm `unreachable`
/// instruction executed in `faulty_provider::run` (stderr: thread '<unnamed>' panicked at
/// src/lib.rs:10:5: boom)``. It is one line and never empty.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GuestFault {
    /// The guest hit one of its plugin's limits.
    #[error(transparent)]
    Limit(LimitHit),
    /// The guest trapped.
    #[error("{0}")]
    Trap(String),
    /// Any other failure while running guest code.
    #[error("{0}")]
    Other(String),
}

impl GuestFault {
    /// Classifies a wasmtime error (often a trap wrapped in a backtrace).
    pub fn from_error(e: &wasmtime::Error) -> Self {
        Self::classify(e, None)
    }

    /// Like [`GuestFault::from_error`], for an error of a call into `store`'s guest: a trap or
    /// other fault also shows the last lines the guest wrote to stderr.
    pub(crate) fn from_store_error(e: &wasmtime::Error, store: &StoreData) -> Self {
        Self::classify(e, store.log_budget.stderr_tail())
    }

    fn classify(e: &wasmtime::Error, stderr: Option<String>) -> Self {
        if let Some(hit) = LimitHit::find(e) {
            return Self::Limit(hit.clone());
        }
        let backtrace = e.downcast_ref::<wasmtime::WasmBacktrace>();
        let trap = e.downcast_ref::<wasmtime::Trap>();
        // A trap's own text begins `wasm trap: `; context the host added comes before it.
        let mut text = fault_message(e, backtrace);
        if e.chain()
            .any(|cause| cause.is::<wasmtime::PoolConcurrencyLimitError>())
        {
            // Not the guest's doing: every plugin's live instances share the host's pool.
            text.push_str(
                " (the host's instance pool is full: the live runs, tool calls and deliveries \
                 of all plugins share it; start fewer at once or raise SEAM_POOL_INSTANCES)",
            );
        }
        if trap == Some(&wasmtime::Trap::StackOverflow) {
            text.push_str(" (the guest exceeded the wasm stack limit)");
        }
        if let Some(function) = backtrace.and_then(faulting_function) {
            text.push_str(&format!(" in `{function}`"));
        }
        if let Some(stderr) = stderr {
            text.push_str(&format!(" (stderr: {stderr})"));
        }
        if trap.is_some() {
            Self::Trap(text)
        } else {
            Self::Other(text)
        }
    }
}

/// The causes of a fault, outermost first (the host's context, then the trap or the error), each
/// by its first line, without the backtrace wasmtime attaches as context (whose first line says
/// nothing).
fn fault_message(e: &wasmtime::Error, backtrace: Option<&wasmtime::WasmBacktrace>) -> String {
    let backtrace = backtrace.map(ToString::to_string);
    let causes: Vec<String> = e
        .chain()
        .map(|cause| cause.to_string())
        .filter(|cause| Some(cause) != backtrace.as_ref())
        .filter_map(|cause| {
            let line = cause.lines().map(str::trim).find(|l| !l.is_empty())?;
            Some(line.to_string())
        })
        .collect();
    if causes.is_empty() {
        "the guest failed without saying why".to_string()
    } else {
        causes.join(": ")
    }
}

/// Frames of Rust's standard library and panic machinery: a panic's first frames are these, and
/// the function that panicked is the first frame after them.
fn is_runtime_frame(raw: &str, demangled: &str) -> bool {
    const CRATES: &[&str] = &["std", "core", "alloc", "panic_abort", "panic_unwind"];
    let path = demangled.trim_start_matches(['<', '&', '*']);
    let in_runtime_crate = CRATES.iter().any(|c| {
        path.strip_prefix(c)
            .is_some_and(|rest| rest.starts_with("::"))
            // Rust's v0 mangling (the prebuilt standard library) is left mangled; its crate
            // names are there as `_<length><name>`.
            || (raw.starts_with("_R") && raw.contains(&format!("_{}{c}", c.len())))
    });
    in_runtime_crate || raw.contains("__rust") || raw == "abort"
}

/// The guest function a fault happened in, from the innermost frame that is not Rust's runtime
/// (the innermost frame if all are); `None` without frames.
fn faulting_function(backtrace: &wasmtime::WasmBacktrace) -> Option<String> {
    let named: Vec<(&wasmtime::FrameInfo, Option<String>)> = backtrace
        .frames()
        .iter()
        .map(|frame| (frame, frame.func_name().map(demangle)))
        .collect();
    let (frame, name) = named
        .iter()
        .find(|(frame, name)| match (frame.func_name(), name) {
            (Some(raw), Some(name)) => !is_runtime_frame(raw, name),
            _ => true,
        })
        .or_else(|| named.first())?;
    let name = match name {
        Some(name) => name.clone(),
        None => match frame.module().name() {
            Some(module) => format!("function {} of `{module}`", frame.func_index()),
            None => format!("function {}", frame.func_index()),
        },
    };
    // The names come from the guest's own name section: keep them short and on one line.
    let mut shown: String = name
        .chars()
        .take(MAX_FUNCTION_NAME)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if name.chars().nth(MAX_FUNCTION_NAME).is_some() {
        shown.push('…');
    }
    Some(shown)
}

/// Characters of a function's name a fault shows at most.
const MAX_FUNCTION_NAME: usize = 200;

/// Demangles a Rust symbol in the legacy scheme (`_ZN...E`, what Rust uses for a crate unless
/// told otherwise), without its hash; any other name is returned as it is.
fn demangle(raw: &str) -> String {
    demangle_legacy(raw).unwrap_or_else(|| raw.to_string())
}

fn demangle_legacy(raw: &str) -> Option<String> {
    let raw = raw.split(".llvm.").next()?;
    let mut rest = raw
        .strip_prefix("_ZN")
        .or_else(|| raw.strip_prefix("__ZN"))?
        .strip_suffix('E')?;
    let mut segments = Vec::new();
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let len: usize = rest[..digits].parse().ok()?;
        let end = digits.checked_add(len)?;
        segments.push(rest.get(digits..end)?);
        rest = rest.get(end..)?;
    }
    if let Some(last) = segments.last() {
        let hash = last.strip_prefix('h');
        if segments.len() > 1
            && hash.is_some_and(|h| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            segments.pop();
        }
    }
    if segments.is_empty() {
        return None;
    }
    let parts: Option<Vec<String>> = segments.iter().map(|s| unescape_segment(s)).collect();
    Some(parts?.join("::"))
}

/// Undoes the legacy scheme's escapes in one path segment: `$LT$` is `<`, `$u7b$` is `{`, `..`
/// is `::`, a leading `_$` is `$`.
fn unescape_segment(segment: &str) -> Option<String> {
    let mut rest = if segment.starts_with("_$") {
        &segment[1..]
    } else {
        segment
    };
    let mut out = String::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('$') {
            let end = after.find('$')?;
            let code = &after[..end];
            out.push(match code {
                "SP" => '@',
                "BP" => '*',
                "RF" => '&',
                "LT" => '<',
                "GT" => '>',
                "LP" => '(',
                "RP" => ')',
                "C" => ',',
                _ => {
                    let hex = code.strip_prefix('u')?;
                    char::from_u32(u32::from_str_radix(hex, 16).ok()?)?
                }
            });
            rest = &after[end + 1..];
        } else if let Some(after) = rest.strip_prefix("..") {
            out.push_str("::");
            rest = after;
        } else {
            let c = rest.chars().next()?;
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    Some(out)
}

/// Why a component could not become a plugin, or a call into it failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PluginError {
    /// The component imports something its world's linker does not provide.
    #[error("cannot link the {kind} component: {reason}")]
    Link {
        /// The component's kind.
        kind: PluginKind,
        /// The linker's explanation.
        reason: String,
    },
    /// A fresh instance could not be made.
    #[error("cannot instantiate: {0}")]
    Instantiate(GuestFault),
    /// The guest answered a call with an error of its own.
    #[error("{call} refused the config: {message}")]
    Refused {
        /// The export called (`describe`, `bind`).
        call: &'static str,
        /// The guest's message.
        message: String,
    },
    /// The guest faulted during a call.
    #[error("{call} failed: {fault}")]
    Fault {
        /// The export called.
        call: &'static str,
        /// What happened.
        fault: GuestFault,
    },
    /// The guest's answer breaks the contract (too large, empty, not JSON).
    #[error("{call} returned {problem}")]
    Malformed {
        /// The export called.
        call: &'static str,
        /// What is wrong with it.
        problem: String,
    },
}

/// A linker's refusal in words a plugin author can act on: which import the host does not
/// provide, or which function of it has another type than the host's.
fn explain_link(e: &wasmtime::Error) -> String {
    let text = crate::engine::one_line(&format!("{e:#}"));
    let between = |s: &str, start: &str, end: &str| {
        let from = s.find(start)? + start.len();
        let to = from + s[from..].find(end)?;
        Some(s[from..to].to_string())
    };
    let Some(instance) = between(&text, "component imports instance `", "`") else {
        return text;
    };
    let function = between(&text, "instance export `", "`");
    if text.contains("implementation is missing")
        || (text.contains("was not found") && function.is_none())
    {
        return match function {
            Some(f) => {
                format!("needs `{instance}` (its function `{f}`), which this host does not provide")
            }
            None => format!("needs `{instance}`, which this host does not provide"),
        };
    }
    let detail = text
        .rsplit_once("has the wrong type: ")
        .map_or(text.as_str(), |(_, d)| d);
    match function {
        Some(f) => format!(
            "imports `{instance}` with function `{f}` of another type than this host's: {detail}"
        ),
        None => format!("imports `{instance}` in a form this host does not provide: {detail}"),
    }
}

/// One linker per world and supported version, each assembled from the interface modules its
/// world imports (a 0.1.0 world from the 0.1.0 adapters, which delegate to the same modules).
pub(crate) struct Linkers {
    /// 0.1.0's, by kind: provider, tool, observer.
    v0_1: [Linker<StoreData>; 3],
    /// The latest version's, by kind.
    latest: [Linker<StoreData>; 3],
}

fn kind_index(kind: PluginKind) -> usize {
    match kind {
        PluginKind::Provider => 0,
        PluginKind::Tool => 1,
        PluginKind::Observer => 2,
    }
}

impl Linkers {
    /// The linkers of every world of every supported version, on `engine`.
    pub(crate) fn new(engine: &Engine) -> wasmtime::Result<Self> {
        let base = || -> wasmtime::Result<Linker<StoreData>> {
            let mut linker = Linker::new(engine);
            wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
            // Linked for every plugin: without an `http` grant, every request is denied.
            wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
            filesystem::add_to_linker(&mut linker)?;
            sockets::add_to_linker(&mut linker)?;
            io_error::add_to_linker(&mut linker)?;
            Ok(linker)
        };
        let latest = |kind: PluginKind| -> wasmtime::Result<Linker<StoreData>> {
            let mut linker = base()?;
            log::add_to_linker(&mut linker)?;
            match kind {
                PluginKind::Provider => {
                    run_context::add_to_linker(&mut linker)?;
                    agents::add_to_linker(&mut linker)?;
                    subagents::add_to_linker(&mut linker)?;
                }
                PluginKind::Tool => subagents::add_to_linker(&mut linker)?,
                PluginKind::Observer => {}
            }
            Ok(linker)
        };
        let v0_1 = |kind: PluginKind| -> wasmtime::Result<Linker<StoreData>> {
            let mut linker = base()?;
            v0_1_0::add_to_linker(&mut linker, kind)?;
            Ok(linker)
        };
        const KINDS: [PluginKind; 3] =
            [PluginKind::Provider, PluginKind::Tool, PluginKind::Observer];
        let [p, t, o] = KINDS;
        Ok(Self {
            v0_1: [v0_1(p)?, v0_1(t)?, v0_1(o)?],
            latest: [latest(p)?, latest(t)?, latest(o)?],
        })
    }

    /// The linker of `kind`'s world in `version` (the latest for any other version).
    pub(crate) fn of(&self, kind: PluginKind, version: &str) -> &Linker<StoreData> {
        let linkers = if version == crate::wit::v0_1_0::VERSION {
            &self.v0_1
        } else {
            &self.latest
        };
        &linkers[kind_index(kind)]
    }
}

/// What plugins are made with, owned by the host. Each kind copies what it needs: a provider
/// keeps the agent registry only weakly, since the registry reaches providers back through its
/// tools and a strong reference would keep the whole host alive.
pub(crate) struct Runtime {
    pub(crate) engine: Engine,
    pub(crate) linkers: Linkers,
    pub(crate) live: Arc<LiveCounts>,
    pub(crate) subagents: Arc<SubagentService>,
    /// The agent runtime in-process providers create their children on.
    pub(crate) agents: Arc<AgentRegistry>,
    /// How long a cancelled tool call may wind down before the host drops it.
    pub(crate) cancel_grace: Duration,
}

/// A linked plugin, with what it declared.
pub(crate) enum Linked {
    /// A provider (a component's, or an ACP agent's) and its frozen descriptor.
    Provider(ProviderDescriptor, Arc<dyn seam_core::subagent::Provider>),
    /// A tool and its binding.
    Tool(ToolBinding, wasm_tool::WasmTool),
    /// An observer (it declares nothing).
    Observer(wasm_observer::WasmObserver),
}

/// Links `component` as a plugin of `kind` named `plugin`, and asks it what it declares with
/// `config` (a provider's descriptor, a tool's binding), in a throwaway instance.
pub(crate) async fn link(
    runtime: &Runtime,
    plugin: Arc<str>,
    (kind, version): (PluginKind, &str),
    component: &Component,
    config: Arc<str>,
    sandbox: Sandbox,
) -> Result<Linked, PluginError> {
    let pre = runtime
        .linkers
        .of(kind, version)
        .instantiate_pre(component)
        .map_err(|e| PluginError::Link {
            kind,
            reason: explain_link(&e),
        })?;
    let link_err = |e: wasmtime::Error| PluginError::Link {
        kind,
        reason: crate::engine::one_line(&format!("{e:#}")),
    };
    Ok(match kind {
        PluginKind::Provider => {
            let provider =
                wasm_provider::WasmProvider::new(runtime, plugin, version, pre, config, sandbox)
                    .map_err(link_err)?;
            let descriptor = provider.describe().await?;
            Linked::Provider(descriptor, Arc::new(provider))
        }
        PluginKind::Tool => {
            let tool = wasm_tool::WasmTool::new(runtime, plugin, version, pre, config, sandbox)
                .map_err(link_err)?;
            let binding = tool.bind().await?;
            Linked::Tool(binding, tool)
        }
        PluginKind::Observer => Linked::Observer(
            wasm_observer::WasmObserver::new(runtime, plugin, version, pre, config, sandbox)
                .map_err(link_err)?,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unsigned LEB128.
    fn leb(mut n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    /// A core module section: id, size, payload.
    fn section(id: u8, payload: &[u8]) -> Vec<u8> {
        [&[id][..], &leb(payload.len()), payload].concat()
    }

    fn name(text: &str) -> Vec<u8> {
        [&leb(text.len())[..], text.as_bytes()].concat()
    }

    /// A module whose export `run` (named by `outer`) calls a function (named by `inner`) that
    /// executes `unreachable`.
    fn trapping_module(inner: &str, outer: &str) -> Vec<u8> {
        let names = [
            &name("name")[..],
            &section(1, &[&[2, 0][..], &name(inner), &[1], &name(outer)].concat()),
        ]
        .concat();
        [
            &b"\0asm\x01\0\0\0"[..],
            &section(1, &[1, 0x60, 0, 0]),
            &section(3, &[2, 0, 0]),
            &section(7, &[&[1][..], &name("run"), &[0, 1]].concat()),
            &section(10, &[2, 3, 0, 0x00, 0x0b, 4, 0, 0x10, 0, 0x0b]),
            &section(0, &names),
        ]
        .concat()
    }

    fn trap_of(inner: &str, outer: &str) -> wasmtime::Error {
        let engine = Engine::default();
        let module = wasmtime::Module::new(&engine, trapping_module(inner, outer)).unwrap();
        let mut store = wasmtime::Store::new(&engine, ());
        let instance = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
        let run = instance
            .get_typed_func::<(), ()>(&mut store, "run")
            .unwrap();
        run.call(&mut store, ()).unwrap_err()
    }

    #[test]
    fn a_trap_names_itself_and_the_guest_function_outside_the_runtime() {
        let e = trap_of(
            "_ZN4core9panicking9panic_fmt17h0123456789abcdefE",
            "_ZN5guest3run17h0123456789abcdefE",
        );
        assert_eq!(
            GuestFault::from_error(&e),
            GuestFault::Trap(
                "wasm trap: wasm `unreachable` instruction executed in `guest::run`".into()
            )
        );
        // Only runtime frames: the innermost one is named.
        let e = trap_of(
            "_RNvNtCshXfaRvt2tfW_3std7process5abort",
            "__rust_start_panic",
        );
        assert_eq!(
            GuestFault::from_error(&e).to_string(),
            "wasm trap: wasm `unreachable` instruction executed in \
             `_RNvNtCshXfaRvt2tfW_3std7process5abort`"
        );
        // A guest's own name section cannot make a fault long or break its line.
        let e = trap_of(&format!("a\nb{}", "x".repeat(300)), "outer");
        let fault = GuestFault::from_error(&e).to_string();
        assert!(
            fault.ends_with(&format!("in `a b{}…`", "x".repeat(197))),
            "{fault}"
        );
        // A user function is named even if it traps itself.
        let e = trap_of("_ZN5guest4trap17h0123456789abcdefE", "outer");
        assert!(GuestFault::from_error(&e)
            .to_string()
            .ends_with("in `guest::trap`"));
    }

    #[test]
    fn a_fault_names_its_causes_not_the_backtrace() {
        let e = trap_of("inner", "outer").context("the host said no");
        assert_eq!(
            GuestFault::from_error(&e),
            GuestFault::Trap(
                "the host said no: wasm trap: wasm `unreachable` instruction executed in `inner`"
                    .into()
            )
        );
        let e = wasmtime::Error::msg("root cause\nsecond line").context("outer");
        assert_eq!(
            GuestFault::from_error(&e),
            GuestFault::Other("outer: root cause".into())
        );
        let e = wasmtime::Error::new(wasmtime::Trap::StackOverflow);
        assert_eq!(
            GuestFault::from_error(&e).to_string(),
            "wasm trap: call stack exhausted (the guest exceeded the wasm stack limit)"
        );
    }

    #[test]
    fn rust_symbols_are_demangled() {
        assert_eq!(
            demangle("_ZN15faulty_provider4trap17h0123456789abcdefE"),
            "faulty_provider::trap"
        );
        assert_eq!(
            demangle(
                "_ZN44_$LT$$RF$T$u20$as$u20$core..fmt..Display$GT$3fmt17hdf5f1ff7ef44bbf1E.llvm.1635"
            ),
            "<&T as core::fmt::Display>::fmt"
        );
        assert_eq!(
            demangle("_ZN15faulty_provider8Settings5parse28_$u7b$$u7b$closure$u7d$$u7d$17h9b1242868577bb43E"),
            "faulty_provider::Settings::parse::{{closure}}"
        );
        for raw in [
            "seam:plugin/provider@0.1.0#run",
            "_ZN3bad",
            "_ZN99xE",
            "_ZN18446744073709551615xE",
            "main",
        ] {
            assert_eq!(demangle(raw), raw);
        }
        assert!(is_runtime_frame(
            "_RNvNtCshXfaRvt2tfW_3std7process5abort",
            "_RNvNtCshXfaRvt2tfW_3std7process5abort"
        ));
        assert!(is_runtime_frame("x", "core::panicking::panic_fmt"));
        assert!(is_runtime_frame(
            "x",
            "<alloc::string::String as core::fmt::Write>::write_str"
        ));
        assert!(!is_runtime_frame("x", "faulty_provider::run"));
        assert!(!is_runtime_frame("x", "standard::run"));
    }
}
