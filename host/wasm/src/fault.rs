//! What a guest's failure means, in words: a limit it hit, a trap (with the guest function it
//! happened in, demangled, and the last lines it wrote to stderr), or another engine error.

use thiserror::Error;

use crate::sandbox::LimitHit;
use crate::store::StoreData;

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
    pub fn from_store_error(e: &wasmtime::Error, store: &StoreData) -> Self {
        Self::classify(e, store.log_budget.stderr_tail())
    }

    fn classify(e: &wasmtime::Error, stderr: Option<String>) -> Self {
        if let Some(hit) = e.chain().find_map(|cause| cause.downcast_ref::<LimitHit>()) {
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

/// `text` on one line: every run of whitespace, newlines included, becomes one space (a parser's
/// multi-line byte dump, say).
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Demangles a Rust symbol (legacy `_ZN...E` or v0 `_R...`), without its hash; any other name is
/// returned as it is.
fn demangle(raw: &str) -> String {
    match rustc_demangle::try_demangle(raw) {
        Ok(symbol) => format!("{symbol:#}"),
        Err(_) => raw.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::Engine;

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
            "wasm trap: wasm `unreachable` instruction executed in `std::process::abort`"
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
        // v0 mangling, which the prebuilt standard library uses.
        let v0 = "_RNvNtCshXfaRvt2tfW_3std7process5abort";
        assert_eq!(demangle(v0), "std::process::abort");
        assert!(is_runtime_frame(v0, &demangle(v0)));
        assert!(is_runtime_frame("x", "core::panicking::panic_fmt"));
        assert!(is_runtime_frame(
            "x",
            "<alloc::string::String as core::fmt::Write>::write_str"
        ));
        assert!(!is_runtime_frame("x", "faulty_provider::run"));
        assert!(!is_runtime_frame("x", "standard::run"));
    }
}
