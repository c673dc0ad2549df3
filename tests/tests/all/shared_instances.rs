//! CONTRACT section 20: the async contract (`seam:plugin@0.5.0`): a provider built for WASI 0.3
//! whose `run` is async, on an instance of its own per run or, where its entry sets
//! `share_instance`, many runs on one instance, each cancellable, steerable and disposed.

use std::collections::BTreeSet;

use seam_host::subagent::Aborted;
use seam_host::{ContentBlock, StopReason};
use seam_tests::*;

/// An entry of the async provider named like its id.
fn async_provider(id: &str, extra: &str) -> String {
    let sep = if extra.is_empty() { "" } else { ", " };
    entry(
        id,
        "async_provider",
        &format!("name = \"{id}\"{sep}{extra}"),
    )
}

/// `N` and `P` of an answer's ` [run #N, peak P]`.
#[track_caller]
fn run_and_peak(text: &str) -> (u64, u64) {
    let tail = text
        .rsplit_once(" [run #")
        .unwrap_or_else(|| panic!("no run number in {text:?}"))
        .1;
    let (seq, peak) = tail
        .trim_end_matches(']')
        .split_once(", peak ")
        .unwrap_or_else(|| panic!("no peak in {text:?}"));
    (seq.parse().unwrap(), peak.parse().unwrap())
}

#[tokio::test]
async fn one_instance_serves_a_thousand_concurrent_runs_each_cancellable() {
    const RUNS: usize = 1000;
    // A long grace: each cancel must be the guest's own doing, however long the instance takes
    // to get through 500 of them.
    let host = patient_host_with(&format!(
        "{}[plugin.limits]\nmax_concurrent_runs = 2000\nhost_memory_mb = 256\n",
        async_provider("shared", "share_instance = 1000")
    ))
    .await;
    let runs: Vec<_> = (0..RUNS)
        .map(|_| host.subagents().start("shared", request("wait")).unwrap())
        .collect();
    for run in &runs {
        run.started().await.unwrap();
    }
    // Every run is live in the guest at once, and one instance holds them all.
    assert_eq!(host.live_runs(), RUNS);
    assert_eq!(host.live_instances(), 1);

    // Half are cancelled, each with its own reason; the other half are answered by a message.
    for (i, run) in runs.iter().enumerate() {
        if i % 2 == 0 {
            run.cancel(Some(format!("stop {i}")));
        } else {
            run.send_message(vec![ContentBlock::text(format!("go {i}"))])
                .unwrap();
        }
    }
    let mut seqs = BTreeSet::new();
    for (i, run) in runs.iter().enumerate() {
        let result = run.result().await.unwrap();
        let text = result.output_text();
        assert!(text.contains(" [run #"), "run {i}: {result:?}");
        let (seq, peak) = run_and_peak(&text);
        assert_eq!(
            peak, RUNS as u64,
            "all runs were in the guest at once: {text}"
        );
        seqs.insert(seq);
        if i % 2 == 0 {
            assert_eq!(result.stop_reason, StopReason::Aborted, "{text}");
            assert!(
                text.starts_with(&format!("cancelled: stop {i} [")),
                "{text}"
            );
            // The guest saw its cancel and ended the run itself.
            assert_eq!(run.aborted(), Some(Aborted::Cancelled), "{text}");
        } else {
            assert_eq!(result.stop_reason, StopReason::Completed, "{text}");
            assert!(text.starts_with(&format!("message: go {i} [")), "{text}");
        }
    }
    // One instance numbered them all.
    assert_eq!(seqs, (1..=RUNS as u64).collect::<BTreeSet<_>>());
    for run in &runs {
        run.dispose().await;
    }
    assert_eq!(host.live_runs(), 0);

    // The instance stays for the next run, and is gone once the provider is.
    let next = host.subagents().start("shared", request("hello")).unwrap();
    let text = next.result().await.unwrap().output_text();
    assert_eq!(run_and_peak(&text).0, RUNS as u64 + 1, "{text}");
    next.dispose().await;
    assert_eq!(host.live_instances(), 1);
    host.unload_all().await;
    assert_eq!(host.live_instances(), 0);
}

#[tokio::test]
async fn without_share_instance_each_async_run_has_an_instance_of_its_own() {
    let host = host_with(&async_provider("own", "")).await;
    let runs: Vec<_> = (0..3)
        .map(|_| host.subagents().start("own", request("wait")).unwrap())
        .collect();
    for run in &runs {
        run.started().await.unwrap();
    }
    assert_eq!(host.live_instances(), 3);
    runs[0].cancel(Some("enough".into()));
    runs[1]
        .send_message(vec![ContentBlock::text("hi")])
        .unwrap();
    // A WASI 0.3 clock, and `run-context`, which names the instance's one run.
    let slept = host.subagents().start("own", request("sleep 5")).unwrap();
    let context = host.subagents().start("own", request("context")).unwrap();
    assert_eq!(
        runs[0].result().await.unwrap().output_text(),
        "cancelled: enough [run #1, peak 1]"
    );
    assert_eq!(
        runs[1].result().await.unwrap().output_text(),
        "message: hi [run #1, peak 1]"
    );
    assert_eq!(
        slept.result().await.unwrap().output_text(),
        "slept 5 [run #1, peak 1]"
    );
    assert_eq!(
        words(&context.result().await.unwrap()),
        "cancelled false [run #1, peak 1]"
    );
    // Disposing a run that is still waiting drops its instance.
    runs[2].dispose().await;
    for run in runs.iter().chain([&slept, &context]) {
        run.dispose().await;
    }
    assert_eq!(host.live_instances(), 0);
    assert_eq!(host.live_runs(), 0);
}

#[tokio::test]
async fn progress_streamed_by_a_shared_run_is_emitted_in_order() {
    let host = host_with(&async_provider("shared", "share_instance = true")).await;
    let mut events = watch_events(&host);
    let run = host
        .subagents()
        .start("shared", request("progress 5"))
        .unwrap();
    let result = run.result().await.unwrap();
    assert_eq!(result.output_text(), "progressed 5 [run #1, peak 1]");
    wait_for(&mut events, "five progress events", |seen| {
        seen.iter()
            .filter(|e| e.name() == "subagent/progress")
            .count()
            == 5
    })
    .await;
    let steps: Vec<String> = events
        .borrow()
        .iter()
        .filter_map(|e| match e {
            seam_host::Event::SubagentProgress { content, .. } => {
                Some(content.iter().map(|b| b.as_text()).collect())
            }
            _ => None,
        })
        .collect();
    assert_eq!(steps, ["step 1", "step 2", "step 3", "step 4", "step 5"]);
    run.dispose().await;
}

#[tokio::test]
async fn a_trap_ends_the_shared_instance_and_the_next_run_gets_a_new_one() {
    let host = host_with(&async_provider("shared", "share_instance = 8")).await;
    let waiting = host.subagents().start("shared", request("wait")).unwrap();
    waiting.started().await.unwrap();
    // `run-context` names no run in a shared instance: the guest traps, and the instance with
    // it, so the run waiting beside it fails too.
    let context = host
        .subagents()
        .start("shared", request("context"))
        .unwrap();
    let failed = context.result().await.unwrap();
    assert_eq!(failed.stop_reason, StopReason::Error);
    diagnosed(&failed, "share_instance");
    let beside = waiting.result().await.unwrap();
    assert_eq!(beside.stop_reason, StopReason::Error);
    diagnosed(&beside, "share_instance");
    let trap = host.subagents().start("shared", request("trap")).unwrap();
    let trapped = trap.result().await.unwrap();
    diagnosed(&trapped, "asked to trap");
    // A fresh instance numbers its runs from 1 again.
    let next = host.subagents().start("shared", request("hello")).unwrap();
    assert_eq!(
        words(&next.result().await.unwrap()),
        "echo: hello [run #1, peak 1]"
    );
    for run in [waiting, context, trap, next] {
        run.dispose().await;
    }
    host.unload_all().await;
    assert_eq!(host.live_instances(), 0);
}

#[tokio::test]
async fn share_instance_needs_an_async_run_and_a_valid_value() {
    let host = test_host();
    let report = host
        .load(&config(&mock("blocking", "share_instance = true")))
        .await;
    let failures = report.failures();
    assert!(
        failures.contains("key `config.share_instance`")
            && failures.contains("seam:plugin@0.4.0")
            && failures.contains("plugin `blocking`"),
        "{failures}"
    );
    for bad in [
        "share_instance = 0",
        "share_instance = \"yes\"",
        "share_instance = 10001",
    ] {
        let text = async_provider("a", bad);
        let err = seam_host::Config::parse(&text, std::path::Path::new("t.toml"), &guest_dir())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("key `config.share_instance` must be true, false or the most runs"),
            "{bad}: {err}"
        );
    }
}
