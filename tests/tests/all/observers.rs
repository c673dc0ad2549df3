//! Security round two: observers are bounded by bytes and by time. A stuck observer makes the
//! host hold at most its queue's byte cap (8 MiB) of events, dropping the rest (counted, logged
//! once per burst), while runs go on; a delivery past its wall-clock limit is abandoned and the
//! next event gets a fresh instance.

use seam_host::StopReason;
use seam_tests::*;

/// The value of `key=<number>` in a log line.
fn field(line: &str, key: &str) -> usize {
    let at = line
        .find(&format!(" {key}="))
        .unwrap_or_else(|| panic!("no `{key}` in {line}"));
    line[at + key.len() + 2..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("`{key}` is not a number in {line}"))
}

/// Whether `line` is about event `name`.
fn about(line: &str, name: &str) -> bool {
    line.contains(&format!("event=\"{name}\"")) || line.contains(&format!("event={name} "))
}

/// One run on `provider`, which must complete; returns its id and output length.
async fn complete(host: &seam_host::Host, provider: &str) -> (String, usize) {
    let run = host.subagents().start(provider, request("x")).unwrap();
    let id = run.id().to_string();
    let result = run.result().await.unwrap();
    run.dispose().await;
    assert_eq!(result.stop_reason, StopReason::Completed, "{result:?}");
    (id, words(&result).len())
}

#[tokio::test(flavor = "current_thread")]
async fn a_stuck_observer_holds_at_most_its_byte_cap_and_runs_go_on() {
    let (log, _guard) = CapturedLog::start();
    let gate = tempfile::tempdir().unwrap();
    let reply = "r".repeat(512 * 1024);
    // `stuck` waits on every event until the gate file exists: its first delivery holds up its
    // queue while the runs below emit 40 events of over 512 KiB each.
    let toml = entry(
        "stuck",
        "observer_probe",
        "mode = \"wait\", file = \"/gate/open\"",
    ) + &format!(
        "[plugin.grants]\ndirs = [{{ host = '{}', guest = '/gate' }}]\n\n",
        gate.path().display()
    ) + &mock("big", &format!("reply = \"{reply}\""));
    let host = host_with(&toml).await;
    const RUNS: usize = 40;
    for _ in 0..RUNS {
        let (_, len) = complete(&host, "big").await;
        assert_eq!(len, reply.len());
    }

    // The first drop began a burst, logged once, naming the plugin, with the queue's account.
    let full = log.of_plugin("stuck", "observer queue full");
    assert_eq!(full.len(), 1, "one warning per burst: {full:#?}");
    let (queued, event, cap) = (
        field(&full[0], "queued_bytes"),
        field(&full[0], "event_bytes"),
        field(&full[0], "cap_bytes"),
    );
    assert_eq!(cap, 8 * 1024 * 1024, "the documented cap");
    assert!(queued <= cap && queued + event > cap, "{}", full[0]);

    // Let it go: it drains its queue, and the end of the burst is logged with its count.
    std::fs::write(gate.path().join("open"), b"").unwrap();
    log.wait_for("the end of the burst", |_| {
        !log.of_plugin("stuck", "events were dropped while it was full")
            .is_empty()
    })
    .await;
    let summary = log.of_plugin("stuck", "events were dropped while it was full");
    let dropped = field(&summary[0], "dropped");
    assert!(dropped >= 1, "{}", summary[0]);

    // It observes again: a new run's end reaches it.
    let (last, _) = complete(&host, "big").await;
    log.wait_for("`stuck` observing the last run", |_| {
        !log.of_plugin("stuck", &format!("observed subagent/end id={last}"))
            .is_empty()
    })
    .await;
    let ends = log.of_plugin("stuck", "observed subagent/end").len() - 1;
    let abandoned = log.of_plugin("stuck", "observer delivery abandoned").len();
    // Every end of the first runs was dropped, delivered, or abandoned (if this machine was so
    // slow that the first delivery ran out of time); no more were delivered than fit in the cap,
    // plus one per delivery that freed room while the gate was shut.
    assert!(
        ends + dropped + abandoned >= RUNS,
        "{ends} + {dropped} + {abandoned}"
    );
    assert!(
        ends <= cap / reply.len() + abandoned + 1,
        "{ends} ends delivered: the host held more than {cap} bytes"
    );
    assert!(
        ends < RUNS,
        "a stuck observer cannot make the host keep everything"
    );
    host.unload_all().await;
    // An observer's store may still be held by a delivery in flight, which ends on its own
    // after the unload; no event announces a dropped store, so this polls the count.
    assert!(eventually(|| host.live_instances() == 0).await);
}

#[tokio::test(flavor = "current_thread")]
async fn a_slow_observer_sees_progress_coalesced_in_order() {
    let (log, _guard) = CapturedLog::start();
    let gate = tempfile::tempdir().unwrap();
    // `slow` holds up only the run's start until the gate opens; 40 progress updates arrive
    // meanwhile.
    let updates: Vec<String> = (1..=40).map(|i| format!("\"u{i}\"")).collect();
    let toml = entry(
        "slow",
        "observer_probe",
        "mode = \"wait\", on = \"subagent/start\", file = \"/gate/open\"",
    ) + &format!(
        "[plugin.grants]\ndirs = [{{ host = '{}', guest = '/gate' }}]\n\n",
        gate.path().display()
    ) + &mock("chatty", &format!("progress = [{}]", updates.join(", ")));
    let host = host_with(&toml).await;
    let (id, _) = complete(&host, "chatty").await;
    std::fs::write(gate.path().join("open"), b"").unwrap();
    log.wait_for("`slow` observing the run's end", |_| {
        !log.of_plugin("slow", &format!("observed subagent/end id={id}"))
            .is_empty()
    })
    .await;
    let lines: Vec<String> = log
        .of_plugin("slow", &format!("id={id}"))
        .into_iter()
        .filter(|l| l.contains("observed "))
        .collect();
    let position = |needle: &str| lines.iter().position(|l| l.contains(needle));
    let start = position("observed subagent/start").expect("start observed");
    let end = position("observed subagent/end").expect("end observed");
    let progress: Vec<usize> = (0..lines.len())
        .filter(|i| lines[*i].contains("observed subagent/progress"))
        .collect();
    assert!(!progress.is_empty(), "{lines:#?}");
    assert!(
        progress.len() < 40,
        "40 updates waited behind the start: they arrive coalesced, {lines:#?}"
    );
    assert!(
        progress.iter().all(|i| start < *i && *i < end),
        "{lines:#?}"
    );
    assert!(
        lines[*progress.last().unwrap()].contains("seq=40"),
        "the last one carries the latest seq: {lines:#?}"
    );
    host.unload_all().await;
    // An observer's store may still be held by a delivery in flight, which ends on its own
    // after the unload; no event announces a dropped store, so this polls the count.
    assert!(eventually(|| host.live_instances() == 0).await);
}

#[tokio::test(flavor = "current_thread")]
async fn an_observer_past_its_time_limit_is_abandoned_and_gets_the_next_event() {
    let (log, _guard) = CapturedLog::start();
    // Each stalls on `subagent/start` only (sleeping on the WASI clock, or spinning without
    // calling the host) and logs every other event; its deliveries may take 1 s.
    let limits = "[plugin.limits]\nrun_timeout_ms = 1000\n\n";
    let toml = entry(
        "sleepy",
        "observer_probe",
        "mode = \"sleep\", on = \"subagent/start\"",
    ) + limits
        + &entry(
            "spinner",
            "observer_probe",
            "mode = \"spin\", on = \"subagent/start\"",
        )
        + limits
        + &mock("m", "");
    let host = host_with(&toml).await;
    let (id, _) = complete(&host, "m").await;
    for plugin in ["sleepy", "spinner"] {
        log.wait_for(&format!("`{plugin}` observing the run's end"), |_| {
            !log.of_plugin(plugin, &format!("observed subagent/end id={id}"))
                .is_empty()
        })
        .await;
        // In order: the start's delivery was abandoned before the end's began.
        let abandoned = log.of_plugin(plugin, "observer delivery abandoned");
        assert_eq!(abandoned.len(), 1, "{abandoned:#?}");
        assert!(about(&abandoned[0], "subagent/start"), "{}", abandoned[0]);
        assert!(abandoned[0].contains("1000 ms"), "{}", abandoned[0]);
        assert!(
            log.of_plugin(plugin, "observer failed").is_empty(),
            "abandoned, not failed: {:#?}",
            log.lines()
        );
    }
    // The wall clock, not the CPU budget (10 s by default), stopped the spinner.
    assert!(log.of_plugin("spinner", "cpu_ms_per_call").is_empty());
    host.unload_all().await;
    // An observer's store may still be held by a delivery in flight, which ends on its own
    // after the unload; no event announces a dropped store, so this polls the count.
    assert!(eventually(|| host.live_instances() == 0).await);
}

#[tokio::test(flavor = "current_thread")]
async fn unloading_a_stuck_observer_drops_its_instance() {
    let (log, _guard) = CapturedLog::start();
    // Stuck on every event, with the default delivery limit (5 s): nothing is abandoned before
    // the unload.
    let toml = entry("stuck", "observer_probe", "mode = \"sleep\"")
        + &entry("witness", "observer_probe", "mode = \"log\"")
        + &mock("m", "");
    let host = host_with(&toml).await;
    let (id, _) = complete(&host, "m").await;
    log.wait_for("the witness observing the run's end", |_| {
        !log.of_plugin("witness", &format!("observed subagent/end id={id}"))
            .is_empty()
    })
    .await;
    assert!(host.live_instances() >= 1, "`stuck` holds an instance");
    host.unload_all().await;
    // The stuck delivery's store is dropped by its task after the unload; no event announces
    // it, so this polls the count.
    assert!(
        eventually(|| host.live_instances() == 0).await,
        "the stuck delivery's store went with its observer"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn an_observer_unloaded_right_after_a_run_still_gets_the_events_queued_for_it() {
    let (log, _guard) = CapturedLog::start();
    let gate = tempfile::tempdir().unwrap();
    // `late` is still on the run's start (held until the gate opens) when the host unloads, as
    // a slow observer is at the end of a short command: the run's end is still queued.
    let toml = mock("m", "")
        + &entry(
            "late",
            "observer_probe",
            "mode = \"wait\", on = \"subagent/start\", file = \"/gate/open\"",
        )
        + &format!(
            "[plugin.grants]\ndirs = [{{ host = '{}', guest = '/gate' }}]\n\n",
            gate.path().display()
        );
    let host = host_with(&toml).await;
    let (id, _) = complete(&host, "m").await;
    std::fs::write(gate.path().join("open"), b"").unwrap();
    host.unload_all().await;
    for event in ["subagent/start", "subagent/end"] {
        assert_eq!(
            log.of_plugin("late", &format!("observed {event} id={id}"))
                .len(),
            1,
            "{event}: {:#?}",
            log.lines()
        );
    }
    assert_eq!(host.live_instances(), 0);
}
