//! CONTRACT section 8: progress while a run runs, and failure text in `diagnostic`.

use seam_host::{ContentBlock, Event, StopReason};
use seam_tests::*;

/// The run's events, as (name, seq) pairs, in emission order.
fn run_events(
    seen: &std::sync::Arc<std::sync::Mutex<Vec<Event>>>,
    run: &str,
) -> Vec<(String, u64)> {
    seen.lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::SubagentStart { id, .. } if id == run => Some(("start".into(), 0)),
            Event::SubagentProgress {
                id, seq, content, ..
            } if id == run => Some((
                format!("progress:{}", seam_host::blocks_text(content)),
                *seq,
            )),
            Event::SubagentEnd { id, .. } if id == run => Some(("end".into(), 0)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_component_reports_progress_between_start_and_end_in_order() {
    let host = host_with(&mock(
        "p",
        r#"progress = ["one", "two", "three"], reply = "done""#,
    ))
    .await;
    let seen = record(&host);
    let run = host.subagents().start("p", request("x")).unwrap();
    let result = run.result().await.unwrap();
    assert_eq!(result.output_text(), "done");
    assert_eq!(
        run_events(&seen, run.id()),
        vec![
            ("start".to_string(), 0),
            ("progress:one".to_string(), 1),
            ("progress:two".to_string(), 2),
            ("progress:three".to_string(), 3),
            ("end".to_string(), 0),
        ]
    );
    // A reader sees the progress so far, oldest first.
    assert_eq!(seam_host::blocks_text(&run.progress()), "one\ntwo\nthree");
    run.dispose().await;
    assert_eq!(host.live_runs(), 0);
}

#[tokio::test]
async fn a_progress_flood_is_cut_at_the_output_cap() {
    // Each update counts its text and 64 bytes of overhead: 144 bytes of output allow the first
    // two 8-byte updates, and the rest are dropped.
    let toml = mock(
        "flood",
        r#"progress = ["aaaaaaaa", "bbbbbbbb", "cccccccc", "dddddddd"], reply = "ok""#,
    ) + "[plugin.limits]\nmax_output_bytes = 144\n";
    let host = host_with(&toml).await;
    let seen = record(&host);
    let (log, _guard) = CapturedLog::start();
    let run = host.subagents().start("flood", request("x")).unwrap();
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Completed);
    let progress: Vec<_> = run_events(&seen, run.id())
        .into_iter()
        .filter(|(name, _)| name.starts_with("progress"))
        .collect();
    assert_eq!(
        progress,
        vec![
            ("progress:aaaaaaaa".into(), 1),
            ("progress:bbbbbbbb".into(), 2)
        ]
    );
    assert!(
        !log.of_plugin("flood", "max_output_bytes").is_empty(),
        "the cut is logged naming the limit: {:?}",
        log.lines()
    );
    run.dispose().await;
}

#[tokio::test]
async fn an_in_process_child_reports_its_turns_and_tool_calls() {
    let toml = "[models.scripts.child]\nsteps = [ { text = \"thinking\", tool_calls = [{ name = \"nope\", arguments = {} }] }, { text = \"answer\" } ]\n\n".to_string()
        + &entry("spawn", "spawn_provider", "");
    let host = host_with(&toml).await;
    let seen = record(&host);
    let mut r = request("go");
    r.agent_options = Some(seam_host::AgentOptions {
        model: Some("scripted:child".into()),
        system_prompt: None,
    });
    let run = host.subagents().start("spawn", r).unwrap();
    let result = run.result().await.unwrap();
    assert_eq!(result.output_text(), "answer");
    let events = run_events(&seen, run.id());
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"start"));
    assert_eq!(names.last(), Some(&"end"));
    for expected in [
        "progress:thinking",
        "progress:calling tool `nope`",
        "progress:tool `nope` failed",
        "progress:answer",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    let seqs: Vec<u64> = events
        .iter()
        .filter(|(_, s)| *s > 0)
        .map(|(_, s)| *s)
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    run.dispose().await;
}

#[tokio::test]
async fn failure_text_goes_to_the_diagnostic_not_the_output() {
    let host = host_with(
        &(entry(
            "bad",
            "faulty_provider",
            "name = \"bad\", mode = \"trap-after-ready\"",
        ) + &mock("slow", "delayMs = 60000")),
    )
    .await;
    let seen = record(&host);
    let run = host.subagents().start("bad", request("x")).unwrap();
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Error);
    assert!(result.output.is_empty(), "{result:?}");
    let diagnostic = result.diagnostic.clone().unwrap_or_default();
    assert!(diagnostic.contains("guest fault"), "{diagnostic}");
    let end_diagnostic = seen.lock().unwrap().iter().find_map(|e| match e {
        Event::SubagentEnd { diagnostic, .. } => diagnostic.clone(),
        _ => None,
    });
    assert_eq!(end_diagnostic.as_deref(), Some(diagnostic.as_str()));
    run.dispose().await;

    // A cancel: the reason is in the diagnostic.
    let run = host.subagents().start("slow", request("x")).unwrap();
    run.started().await.unwrap();
    run.cancel(Some("changed my mind".into()));
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    assert!(
        result
            .diagnostic
            .as_deref()
            .unwrap_or("")
            .contains("changed my mind"),
        "{result:?}"
    );
    run.dispose().await;
}

#[tokio::test]
async fn a_failed_agent_turn_says_why_in_turn_end() {
    let host = host_with(
        "[agent]\nmodel = \"scripted:broken\"\n\n[models.scripts.broken]\nsteps = [ { error = \"HTTP 401: bad key\" } ]\n",
    )
    .await;
    let seen = record(&host);
    let agent = host.create_agent(None, "/w").unwrap();
    let outcome = agent.run_turn(vec![ContentBlock::text("hi")]).await;
    assert_eq!(outcome.stop_reason, StopReason::Error);
    assert!(
        outcome.output.is_empty(),
        "the error is not the agent's answer"
    );
    let turn_end = seen.lock().unwrap().iter().find_map(|e| match e {
        Event::AgentTurnEnd { diagnostic, .. } => diagnostic.clone(),
        _ => None,
    });
    assert!(
        turn_end
            .as_deref()
            .unwrap_or("")
            .contains("HTTP 401: bad key"),
        "agent/turn-end carries the cause: {turn_end:?}"
    );
    host.agents().dispose(agent.id()).await;
}
