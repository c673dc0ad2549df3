//! Security round two: faults name their cause. A trap says which trap and the guest function it
//! happened in; a panicking guest's fault carries its panic message (the tail of its stderr); no
//! fault reads as a bare `error while executing at wasm backtrace:`.

use seam_host::{Event, StopReason};
use seam_tests::*;

/// A faulty provider entry (`name` = id) in `mode`.
fn faulty(id: &str, mode: &str) -> String {
    entry(
        id,
        "faulty_provider",
        &format!("name = \"{id}\", mode = \"{mode}\""),
    )
}

/// What every fault report must be: one line, naming something beyond the backtrace header.
#[track_caller]
fn assert_names_a_cause(fault: &str) {
    assert!(!fault.trim().is_empty(), "an empty fault");
    assert!(!fault.contains('\n'), "a fault is one line: {fault:?}");
    assert!(
        !fault.contains("error while executing at wasm backtrace"),
        "a fault names its cause, not the backtrace header: {fault}"
    );
}

/// Runs `mode` once on a faulty provider; the run ends `error`. Returns its output and the
/// `subagent/end` event's last assistant message.
async fn fault_of(mode: &str) -> (String, String) {
    let host = host_with(&(faulty("bad", mode) + &mock("good", ""))).await;
    let seen = record(&host);
    let run = host.subagents().start("bad", request("x")).unwrap();
    let result = run.result().await.expect("a fault is a result");
    run.dispose().await;
    assert_eq!(result.stop_reason, StopReason::Error, "{mode}: {result:?}");
    let end = seen
        .lock()
        .unwrap()
        .iter()
        .find_map(|e| match e {
            Event::SubagentEnd {
                diagnostic: Some(d),
                ..
            } => Some(d.clone()),
            _ => None,
        })
        .unwrap_or_default();
    // The host is unharmed.
    let run = host.subagents().start("good", request("x")).unwrap();
    assert!(run.result().await.unwrap().stop_reason.is_success());
    run.dispose().await;
    host.unload_all().await;
    assert_eq!(host.live_instances(), 0);
    // The fault is the host's words, not the child's.
    assert!(result.output.is_empty(), "{result:?}");
    (result.diagnostic.unwrap_or_default(), end)
}

// These go through the provider's run path (`wasm_provider.rs`), which renders the fault with
// the store at hand (`GuestFault::from_store_error`).

#[tokio::test]
async fn a_panicking_provider_fails_with_its_panic_message() {
    let (output, end) = fault_of("panic-after-ready").await;
    assert_names_a_cause(&output);
    assert!(
        output.contains("provider `bad` failed: guest fault: wasm trap: wasm `unreachable` instruction executed in `"),
        "{output}"
    );
    assert!(
        output.contains("(stderr: ")
            && output.contains("panicked at")
            && output.contains("faulty provider: panicking after ready as configured)"),
        "the panic message ends the fault: {output}"
    );
    assert!(!output.contains("RUST_BACKTRACE"), "{output}");
    assert!(
        end.contains("faulty provider: panicking after ready as configured"),
        "subagent/end carries the same detail: {end}"
    );
}

#[tokio::test]
async fn a_trapping_provider_fails_naming_the_trap_and_the_function() {
    let (output, _) = fault_of("trap-after-ready").await;
    assert_names_a_cause(&output);
    let cause = "wasm trap: wasm `unreachable` instruction executed in `";
    let at = output.find(cause).unwrap_or_else(|| panic!("{output}"));
    let function = output[at + cause.len()..].split('`').next().unwrap();
    assert!(
        !function.is_empty() && !function.starts_with("_ZN"),
        "a demangled function: {output}"
    );
    assert!(
        !output.contains("(stderr:"),
        "it wrote nothing to stderr: {output}"
    );
}

#[tokio::test]
async fn a_fault_shows_only_the_last_lines_of_stderr() {
    let (output, _) = fault_of("stderr-then-trap").await;
    assert_names_a_cause(&output);
    assert!(output.contains("wasm trap: wasm `unreachable`"), "{output}");
    let stderr = output
        .split("(stderr: ")
        .nth(1)
        .unwrap_or_else(|| panic!("{output}"));
    for n in 47..=50 {
        assert!(
            stderr.contains(&format!("stderr line {n} of 50")),
            "{output}"
        );
    }
    assert!(!stderr.contains("line 46 of 50"), "{output}");
    assert!(stderr.len() <= 1024, "the tail is bounded: {output}");
}

#[tokio::test]
async fn a_fault_in_describe_names_its_cause() {
    for (mode, cause) in [
        ("trap-describe", "wasm `unreachable` instruction executed"),
        (
            "panic-describe",
            "faulty provider: panicking in describe as configured",
        ),
    ] {
        let host = test_host();
        let report = host.load(&config(&faulty("bad", mode))).await;
        assert_eq!(report.failed.len(), 1, "{mode}");
        let e = report.failed[0].to_string();
        assert_names_a_cause(&e);
        assert!(
            e.contains("describe failed: wasm trap: wasm `unreachable` instruction executed in `")
                && e.contains(cause),
            "{mode}: {e}"
        );
        assert_eq!(host.live_instances(), 0);
    }
}

// Through the observer's delivery path (`wasm_observer.rs`).

#[tokio::test(flavor = "current_thread")]
async fn a_faulty_observer_is_logged_with_its_cause() {
    let (log, _guard) = CapturedLog::start();
    let toml = entry("trapper", "observer_probe", "mode = \"trap\"")
        + &entry("panicker", "observer_probe", "mode = \"panic\"")
        + &mock("m", "");
    let host = host_with(&toml).await;
    let run = host.subagents().start("m", request("x")).unwrap();
    run.result().await.unwrap();
    run.dispose().await;
    for plugin in ["trapper", "panicker"] {
        log.wait_for(&format!("`{plugin}` failing on subagent/end"), |_| {
            log.of_plugin(plugin, "observer failed")
                .iter()
                .any(|l| l.contains("event=\"subagent/end\"") || l.contains("event=subagent/end"))
        })
        .await;
    }
    for line in log.of_plugin("trapper", "observer failed") {
        assert_names_a_cause(&line);
        assert!(
            line.contains("wasm trap: wasm `unreachable` instruction executed in `"),
            "{line}"
        );
        assert!(!line.contains("(stderr:"), "{line}");
    }
    for line in log.of_plugin("panicker", "observer failed") {
        assert_names_a_cause(&line);
        assert!(
            line.contains("wasm trap: wasm `unreachable` instruction executed in `")
                && line.contains("(stderr: ")
                && line.contains("observer panics on"),
            "{line}"
        );
    }
    host.unload_all().await;
    assert_eq!(host.live_instances(), 0);
}

/// A long line of multibyte text on stderr before a trap: the diagnostic shows its tail, cut on
/// a character boundary (no replacement character where a character was split) and marked.
#[tokio::test]
async fn a_multibyte_stderr_tail_is_cut_on_a_character_boundary_and_marked() {
    // Nine bytes (2 + 3 + 4) a time: the last 1 KiB of stderr begins inside a character.
    let piece = "é日🦀";
    let host = host_with(&entry(
        "bad",
        "hostile_provider",
        &format!(
            "name = \"bad\", mode = \"fault\", at = \"result\", how = \"trap\", \
             stderr = \"{piece}\", count = 2000"
        ),
    ))
    .await;
    let run = host.subagents().start("bad", request("x")).unwrap();
    let result = run.result().await.unwrap();
    run.dispose().await;
    assert_eq!(result.stop_reason, StopReason::Error);
    assert!(result.output.is_empty(), "{result:?}");
    let diagnostic = result.diagnostic.unwrap_or_default();
    assert_names_a_cause(&diagnostic);
    assert!(
        !diagnostic.contains('\u{FFFD}'),
        "a character was split: {diagnostic}"
    );
    let tail = diagnostic
        .split("(stderr: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no stderr tail: {diagnostic}"));
    let tail = tail.strip_suffix(')').unwrap_or(tail);
    let kept = tail
        .strip_prefix('…')
        .unwrap_or_else(|| panic!("the cut is marked: {tail}"));
    // What is kept is whole pieces of the text, but perhaps the first.
    let whole = kept.trim_start_matches(|c| c != 'é');
    assert!(piece.ends_with(&kept[..kept.len() - whole.len()]), "{kept}");
    assert!(
        whole.len() > 900 && whole.len() % piece.len() == 0,
        "{}",
        whole.len()
    );
    assert_eq!(whole, piece.repeat(whole.len() / piece.len()));
}
