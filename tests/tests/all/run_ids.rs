//! CONTRACT sections 1 and 4: run ids are unique in the host, whatever repeats around them. Two
//! providers made from one component file each (two `[[plugin]]` entries of the same `.wasm`,
//! one name a prefix of the other), several live runs on each at once, then the providers
//! unloaded and loaded again under the same names: no run id repeats, and every event names the
//! provider its run was started on.

use std::collections::{BTreeMap, BTreeSet};

use seam_host::{Event, Host, StopReason, SubagentRun};
use seam_tests::*;

/// The in-process provider twice (`twin`, `twin-1`) and the mock twice (`echo`, `echo-1`); every
/// run waits until it is cancelled.
fn twins() -> String {
    "[models.scripts.wait]\nsteps = [ { text = \"never\", delay_ms = 600000 } ]\n\n".to_string()
        + &entry("twin", "spawn_provider", "name = \"twin\"")
        + &entry("twin-1", "spawn_provider", "name = \"twin-1\"")
        + &mock("echo", "delayMs = 600000")
        + &mock("echo-1", "delayMs = 600000")
}

const PROVIDERS: [&str; 4] = ["twin", "twin-1", "echo", "echo-1"];
const RUNS_EACH: usize = 3;

/// Starts `RUNS_EACH` runs on every provider at once and waits until all of them announced
/// their start; returns them with the provider each was started on.
async fn start_all(host: &Host) -> Vec<(&'static str, SubagentRun)> {
    let mut events = watch_events(host);
    let runs: Vec<(&str, SubagentRun)> = PROVIDERS
        .iter()
        .flat_map(|p| std::iter::repeat_n(*p, RUNS_EACH))
        .map(|provider| {
            let mut r = request("x");
            r.agent_options = Some(seam_host::AgentOptions {
                model: Some("scripted:wait".into()),
                system_prompt: None,
            });
            (provider, host.subagents().start(provider, r).unwrap())
        })
        .collect();
    let n = runs.len();
    wait_for(&mut events, "every run's start", |seen| {
        seen.iter()
            .filter(|e| matches!(e, Event::SubagentStart { .. }))
            .count()
            == n
    })
    .await;
    runs
}

/// Every run's start and end events, checked against the provider it was started on; returns
/// the run ids.
fn check_events(events: &[Event], runs: &[(&str, SubagentRun)]) -> BTreeSet<String> {
    let provider_of: BTreeMap<&str, &str> = runs.iter().map(|(p, r)| (r.id(), *p)).collect();
    assert_eq!(
        provider_of.len(),
        runs.len(),
        "a run id repeated: {provider_of:?}"
    );
    let mut starts = BTreeMap::new();
    let mut ends = BTreeMap::new();
    for e in events {
        let (provider, id, seen) = match e {
            Event::SubagentStart { provider, id, .. } => (provider, id, &mut starts),
            Event::SubagentEnd {
                provider,
                id,
                stop_reason,
                ..
            } => {
                assert_eq!(*stop_reason, StopReason::Aborted, "{id}");
                (provider, id, &mut ends)
            }
            _ => continue,
        };
        assert_eq!(
            provider_of.get(id.as_str()).copied(),
            Some(provider.as_str()),
            "{} of run `{id}` names provider `{provider}`",
            e.name()
        );
        *seen.entry(id.clone()).or_insert(0) += 1;
    }
    for (what, seen) in [("start", &starts), ("end", &ends)] {
        assert_eq!(seen.len(), runs.len(), "{what}s: {seen:?}");
        assert!(
            seen.values().all(|n| *n == 1),
            "one {what} per run: {seen:?}"
        );
    }
    // An in-process child takes its run's id as its agent id: those ids are unique too.
    let children: BTreeSet<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::AgentCreated { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    let in_process: BTreeSet<&str> = runs
        .iter()
        .filter(|(p, _)| p.starts_with("twin"))
        .map(|(_, r)| r.id())
        .collect();
    assert_eq!(children, in_process);
    provider_of.keys().map(|id| id.to_string()).collect()
}

/// Starts a batch, cancels and disposes it, and checks its events; returns its run ids.
async fn batch(host: &Host) -> BTreeSet<String> {
    let seen = record(host);
    let runs = start_all(host).await;
    assert_eq!(host.live_runs(), runs.len());
    for (_, run) in &runs {
        run.cancel(Some("done".into()));
    }
    futures::future::join_all(runs.iter().map(|(_, r)| r.dispose())).await;
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_agents(), 0);
    assert_eq!(host.live_instances(), 0);
    let events = seen.lock().unwrap().clone();
    check_events(&events, &runs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_ids_stay_unique_across_twin_providers_and_their_reloads() {
    let host = host_with(&twins()).await;
    let first = batch(&host).await;
    assert_eq!(first.len(), PROVIDERS.len() * RUNS_EACH);

    // The same providers, unloaded and loaded again: the same names, new registrations.
    let report = loaded(host.reconfigure(&config("")).await);
    assert_eq!(report.unloaded.len(), PROVIDERS.len(), "{report:?}");
    let report = loaded(host.reconfigure(&config(&twins())).await);
    assert_eq!(report.loaded.len(), PROVIDERS.len(), "{report:?}");
    let second = batch(&host).await;
    assert_eq!(second.len(), first.len());
    let repeated: Vec<&String> = first.intersection(&second).collect();
    assert!(
        repeated.is_empty(),
        "ids of the first batch came back: {repeated:?}"
    );
}
