//! The hostile-guest suite: components that attack their sandbox or their limits. Each attack
//! must end only its own run (or call, or load), with an outcome that names the plugin and the
//! limit, while a well-behaved provider in the same host keeps serving.
//!
//! Every grant and limit of files, sockets, origins and the environment is asserted against two
//! guests ([`Guest`]): the hostile provider, whose attacks go through Rust's std (WASI 0.2), and
//! the hostile WASI 0.3 provider (`seam:plugin@0.5.0`, an async `run`), whose attacks go through
//! the WASI 0.3 interfaces. Both attack in a run, through the host's API ([`Attacks`]).

use std::future::Future;
use std::path::Path;

use seam_host::{Event, Host, ParentRef, PluginState, StartRequest, StopReason, SubagentRun};
use seam_tests::*;
use tokio_util::sync::CancellationToken;

/// A hostile provider, by the WASI version its attacks go through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Guest {
    /// `hostile_provider`: Rust's std, which binds WASI 0.2.
    P2,
    /// `hostile_p3_provider`: the WASI 0.3 interfaces (`wasip3`).
    P3,
}

/// Both hostile providers: each grant and limit is asserted against each.
pub(crate) const GUESTS: [Guest; 2] = [Guest::P2, Guest::P3];

impl Guest {
    /// The component's file name, without `.wasm`.
    fn component(self) -> &'static str {
        match self {
            Guest::P2 => "hostile_provider",
            Guest::P3 => "hostile_p3_provider",
        }
    }

    /// An entry of this guest (`name` = id), as [`hostile`] makes the 0.2 guest's.
    pub(crate) fn hostile(self, id: &str, extra: &str, tables: &str) -> String {
        let sep = if extra.is_empty() { "" } else { ", " };
        entry(
            id,
            self.component(),
            &format!("name = \"{id}\"{sep}{extra}"),
        ) + tables
            + "\n"
    }
}

/// A host loaded with a config of hostile entries, and the attacks made on it: each a run of
/// the entry's provider, whichever guest it is.
pub(crate) struct Attacks {
    pub(crate) host: Host,
}

impl Attacks {
    /// A host with `toml` loaded (every entry must load).
    pub(crate) async fn load(toml: &str) -> Self {
        Self {
            host: host_with(toml).await,
        }
    }

    /// Entry `id`'s attack, a run of it, while the good provider is served: `Ok` with the
    /// attack's own answer, or `Err` with the run's diagnostic when it ended otherwise.
    pub(crate) async fn try_attack(&self, id: &str) -> Result<String, String> {
        let (result, _) = while_serving(&self.host, run_once(&self.host, id, request("x"))).await;
        if result.stop_reason == StopReason::Completed {
            Ok(words(&result))
        } else {
            Err(result.diagnostic.unwrap_or_default())
        }
    }

    /// Entry `id`'s attack, which must end with its own answer.
    pub(crate) async fn attack(&self, id: &str) -> String {
        self.try_attack(id)
            .await
            .unwrap_or_else(|e| panic!("attack `{id}` did not answer: {e}"))
    }
}

/// A WASI 0.2 hostile provider entry (`name` = id) with extra component config and extra TOML
/// after the entry (its `[plugin.grants]` or `[plugin.limits]`).
pub(crate) fn hostile(id: &str, extra: &str, tables: &str) -> String {
    Guest::P2.hostile(id, extra, tables)
}

/// A hostile tool entry under tool name `id`.
pub(crate) fn hostile_tool(id: &str, extra: &str, tables: &str) -> String {
    entry(id, "hostile_tool", &format!("toolName = \"{id}\", {extra}")) + tables + "\n"
}

/// The well-behaved provider every test keeps using during its attack.
pub(crate) fn good() -> String {
    mock("good", "reply = \"fine\"")
}

/// Runs the good provider over and over until `attack` finishes; every one of those runs must
/// complete. Returns the attack's output and how many good runs were served meanwhile.
pub(crate) async fn while_serving<F: Future>(host: &Host, attack: F) -> (F::Output, usize) {
    let stop = CancellationToken::new();
    let serving = {
        let host = host.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut served = 0;
            loop {
                let run = host.subagents().start("good", request("x")).unwrap();
                let result = run.result().await.unwrap();
                run.dispose().await;
                assert_eq!(result.stop_reason, StopReason::Completed, "{result:?}");
                assert_eq!(words(&result), "fine");
                served += 1;
                if stop.is_cancelled() {
                    return served;
                }
                tokio::task::yield_now().await;
            }
        })
    };
    let out = attack.await;
    stop.cancel();
    let served = serving
        .await
        .expect("the good provider's loop never panics");
    assert!(served >= 1);
    (out, served)
}

/// Starts a run on `name`, waits for its result and disposes it.
pub(crate) async fn run_once(
    host: &Host,
    name: &str,
    req: StartRequest,
) -> seam_host::SubagentResult {
    let run = host.subagents().start(name, req).unwrap();
    let result = run
        .result()
        .await
        .expect("result never fails on a guest fault");
    run.dispose().await;
    result
}

/// The output text of a run of hostile provider `name`, which must complete.
pub(crate) async fn attack_output(host: &Host, name: &str) -> String {
    let (result, _) = while_serving(host, run_once(host, name, request("x"))).await;
    assert_eq!(result.stop_reason, StopReason::Completed, "{result:?}");
    words(&result)
}

/// The stop reason and last assistant message of `name`'s last `subagent/end`.
pub(crate) fn last_end(
    seen: &std::sync::Arc<std::sync::Mutex<Vec<Event>>>,
    name: &str,
) -> (StopReason, String) {
    let events = seen.lock().unwrap();
    let end = events
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::SubagentEnd {
                provider,
                stop_reason,
                diagnostic,
                ..
            } if provider == name => {
                Some((stop_reason.clone(), diagnostic.clone().unwrap_or_default()))
            }
            _ => None,
        })
        .expect("a subagent/end was emitted");
    end
}

pub(crate) fn assert_quiescent(host: &Host) {
    assert_eq!(host.live_runs(), 0, "live runs");
    assert_eq!(host.live_instances(), 0, "live instances");
}

/// Asserts that a limit hit ended the run `error`, named the plugin and the limit in the result
/// and in `subagent/end`.
pub(crate) async fn assert_limit_hit(host: &Host, name: &str, limit: &str) {
    let seen = record(host);
    let (result, _) = while_serving(host, run_once(host, name, request("x"))).await;
    let expected = format!("plugin `{name}` hit its limit `{limit}`");
    assert_eq!(result.stop_reason, StopReason::Error, "{result:?}");
    assert!(
        result
            .diagnostic
            .as_deref()
            .unwrap_or("")
            .contains(&expected),
        "the limit is in the diagnostic, not the child's words: {result:?}"
    );
    let (reason, message) = last_end(&seen, name);
    assert_eq!(reason, StopReason::Error);
    assert!(message.contains(&expected), "{message}");
    assert_quiescent(host);
}

// --- CPU, memory, stack, output -------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_infinite_loop_is_stopped_by_the_cpu_budget() {
    let toml = hostile(
        "spin",
        "mode = \"spin\"",
        "[plugin.limits]\ncpu_ms_per_call = 1000",
    ) + &good();
    let host = host_with(&toml).await;
    let run = host.subagents().start("spin", request("x")).unwrap();
    run.started().await.unwrap();
    // The good provider is served while the loop burns its budget, not only after.
    let (served_during, _) = while_serving(&host, async {
        let mut during = 0;
        while run.try_result().is_none() {
            let r = run_once(&host, "good", request("x")).await;
            assert!(r.stop_reason.is_success());
            during += usize::from(run.try_result().is_none());
        }
        during
    })
    .await;
    eprintln!("served {served_during} good runs while the loop spun");
    assert!(served_during >= 1, "nothing was served during the loop");
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Error);
    diagnosed(
        &result,
        "plugin `spin` hit its limit `cpu_ms_per_call`: one call may use at most 1000 ms",
    );
    run.dispose().await;
    assert_limit_hit(&host, "spin", "cpu_ms_per_call").await;
}

#[tokio::test]
async fn a_memory_bomb_hits_the_memory_limit() {
    let toml = hostile(
        "bomb",
        "mode = \"memory-bomb\"",
        "[plugin.limits]\nmemory_mb = 16",
    ) + &good();
    let host = host_with(&toml).await;
    assert_limit_hit(&host, "bomb", "memory_mb").await;
}

#[tokio::test]
async fn flooding_the_host_with_http_header_fields_stops_at_the_resource_cap() {
    // 100,000 sets of 15 KiB would be 1.5 GB of host memory; a store holds at most 4096
    // resources, so the guest's own memory runs out or the import fails well before.
    let toml = hostile("fields", "mode = \"fields-flood\"", "") + &good();
    let host = host_with(&toml).await;
    let (result, _) = while_serving(&host, run_once(&host, "fields", request("x"))).await;
    assert_eq!(result.stop_reason, StopReason::Error, "{result:?}");
    // The cause is named.
    diagnosed(&result, "resource");
    assert_eq!(host.live_instances(), 0);
}

#[tokio::test]
async fn allocating_a_huge_output_string_hits_the_memory_limit() {
    let toml = hostile(
        "alloc",
        "mode = \"huge-output\", bytes = 100000000",
        "[plugin.limits]\nmemory_mb = 32",
    ) + &good();
    let host = host_with(&toml).await;
    assert_limit_hit(&host, "alloc", "memory_mb").await;
}

#[tokio::test]
async fn deep_recursion_overflows_the_stack_and_ends_only_that_run() {
    // Small frames exhaust the wasm call stack; large ones the guest's own stack in its linear
    // memory, which runs off the bottom of the memory.
    let toml = hostile("deep", "mode = \"recurse\"", "")
        + &hostile("wide", "mode = \"recurse-big\"", "")
        + &good();
    let host = host_with(&toml).await;
    let (result, _) = while_serving(&host, run_once(&host, "deep", request("x"))).await;
    assert_eq!(result.stop_reason, StopReason::Error);
    // The stack overflow is named.
    diagnosed(&result, "stack");
    let (result, _) = while_serving(&host, run_once(&host, "wide", request("x"))).await;
    assert_eq!(result.stop_reason, StopReason::Error);
    diagnosed(&result, "provider `wide` failed: guest fault");
    assert_quiescent(&host);
}

#[tokio::test]
async fn a_huge_output_hits_the_output_cap() {
    let toml = hostile(
        "big",
        "mode = \"huge-output\", bytes = 3000000",
        "[plugin.limits]\nmax_output_bytes = 2000000",
    ) + &hostile("small", "mode = \"huge-output\", bytes = 1000000", "")
        + &good();
    let host = host_with(&toml).await;
    assert_limit_hit(&host, "big", "max_output_bytes").await;
    // Under the cap, the same attack is just a big answer.
    let r = run_once(&host, "small", request("x")).await;
    assert_eq!(r.stop_reason, StopReason::Completed);
    assert_eq!(words(&r).len(), 1_000_000);
}

#[tokio::test]
async fn a_run_past_its_wall_clock_budget_ends_error() {
    let toml = hostile(
        "slow",
        "mode = \"ignore-cancel\"",
        "[plugin.limits]\nrun_timeout_ms = 300",
    ) + &good();
    let host = host_with(&toml).await;
    assert_limit_hit(&host, "slow", "run_timeout_ms").await;
}

// --- Files --------------------------------------------------------------------------------

/// A folder with `data/readme.txt`, `data/escape` (a symlink to /etc/passwd), `data/up` (a
/// symlink to the folder above `data`), `secret.txt` beside `data`, and an empty `out`.
fn files() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::create_dir(dir.path().join("out")).unwrap();
    std::fs::write(data.join("readme.txt"), "granted content").unwrap();
    std::fs::write(dir.path().join("secret.txt"), "top secret").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", data.join("escape")).unwrap();
    std::os::unix::fs::symlink(dir.path(), data.join("up")).unwrap();
    dir
}

fn dirs_grant(root: &Path) -> String {
    format!(
        "[plugin.grants]\ndirs = [{{ host = '{}', guest = '/data' }}, {{ host = '{}', guest = '/out', write = true }}]\n",
        root.join("data").display(),
        root.join("out").display()
    )
}

#[tokio::test]
async fn a_plugin_reads_only_inside_its_granted_directory() {
    let reads = [
        ("mine", "/data/readme.txt"),
        ("passwd", "/etc/passwd"),
        ("dotdot", "/data/../../../../etc/passwd"),
        ("dotdot2", "/data/../secret.txt"),
        ("symlink", "/data/escape"),
        ("dirlink", "/data/up/secret.txt"),
    ];
    for guest in GUESTS {
        let dir = files();
        let mut toml = good();
        for (id, path) in reads {
            toml += &guest.hostile(
                id,
                &format!("mode = \"read-file\", path = \"{path}\""),
                &dirs_grant(dir.path()),
            );
        }
        toml += &guest.hostile(
            "nogrant",
            "mode = \"read-file\", path = \"/etc/passwd\"",
            "",
        );
        let attacks = Attacks::load(&toml).await;
        assert_eq!(
            attacks.attack("mine").await,
            "ok: granted content",
            "{guest:?}"
        );
        for id in [
            "passwd", "dotdot", "dotdot2", "symlink", "dirlink", "nogrant",
        ] {
            let out = attacks.attack(id).await;
            assert!(out.starts_with("denied: "), "{guest:?} {id} escaped: {out}");
            assert!(
                !out.contains("root:") && !out.contains("top secret"),
                "{guest:?} {id}: {out}"
            );
        }
        // The 0.3 guest asks the host for what its grant holds: the host refuses.
        if guest == Guest::P3 {
            for id in ["dotdot", "dotdot2", "symlink", "dirlink"] {
                let out = attacks.attack(id).await;
                assert_eq!(out, "denied: ErrorCode::NotPermitted", "{id}");
            }
        }
        assert_quiescent(&attacks.host);
    }
}

#[tokio::test]
async fn a_plugin_cannot_write_to_a_read_only_grant() {
    for guest in GUESTS {
        let dir = files();
        let toml = good()
            + &guest.hostile(
                "ro",
                "mode = \"write-file\", path = \"/data/new.txt\"",
                &dirs_grant(dir.path()),
            )
            + &guest.hostile(
                "overwrite",
                "mode = \"write-file\", path = \"/data/readme.txt\"",
                &dirs_grant(dir.path()),
            )
            + &guest.hostile(
                "rw",
                "mode = \"write-file\", path = \"/out/new.txt\"",
                &dirs_grant(dir.path()),
            );
        let attacks = Attacks::load(&toml).await;
        for id in ["ro", "overwrite"] {
            let out = attacks.attack(id).await;
            assert!(out.starts_with("denied: "), "{guest:?} {id}: {out}");
        }
        assert!(!dir.path().join("data/new.txt").exists(), "{guest:?}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("data/readme.txt")).unwrap(),
            "granted content"
        );
        // The writable grant works, so the denials above are the sandbox's doing.
        assert_eq!(attacks.attack("rw").await, "ok: written", "{guest:?}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("out/new.txt")).unwrap(),
            "pwned"
        );
    }
}

#[tokio::test]
async fn a_plugin_without_grants_sees_no_filesystem() {
    for guest in GUESTS {
        let toml = good() + &guest.hostile("ls", "mode = \"list-dir\", path = \"/\"", "");
        let attacks = Attacks::load(&toml).await;
        let out = attacks.attack("ls").await;
        assert!(out.starts_with("denied: "), "{guest:?}: {out}");
    }
    // With a grant, the 0.3 guest lists it through the host: the denial above is the grant's.
    let dir = files();
    let toml = good()
        + &Guest::P3.hostile(
            "ls",
            "mode = \"list-dir\", path = \"/data\"",
            &dirs_grant(dir.path()),
        );
    let attacks = Attacks::load(&toml).await;
    assert_eq!(attacks.attack("ls").await, "ok: escape,readme.txt,up");
}

// --- Network and environment --------------------------------------------------------------

#[tokio::test(flavor = "current_thread")]
async fn sockets_and_name_lookup_need_a_grant() {
    for guest in GUESTS {
        let (log, _guard) = CapturedLog::start();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let other_addr = other.local_addr().unwrap();
        let grant = format!("[plugin.grants]\nnetwork = [\"{addr}\"]\n");
        let toml = good()
            + &guest.hostile(
                "connect",
                &format!("mode = \"connect\", addr = \"{addr}\""),
                "",
            )
            + &guest.hostile("resolve", "mode = \"resolve\", host = \"localhost\"", "")
            + &guest.hostile(
                "granted",
                &format!("mode = \"connect\", addr = \"{addr}\""),
                &grant,
            )
            + &guest.hostile(
                "elsewhere",
                &format!("mode = \"connect\", addr = \"{other_addr}\""),
                &grant,
            )
            + &guest.hostile(
                "lookup-with-socket-grant",
                "mode = \"resolve\", host = \"localhost\"",
                &grant,
            );
        let attacks = Attacks::load(&toml).await;
        for id in [
            "connect",
            "resolve",
            "elsewhere",
            "lookup-with-socket-grant",
        ] {
            let out = attacks.attack(id).await;
            assert!(out.starts_with("denied: "), "{guest:?} {id}: {out}");
        }
        // The granted address connects, so the denials are the sandbox's doing.
        let out = attacks.attack("granted").await;
        assert!(out.starts_with("ok: connected"), "{guest:?}: {out}");
        // A denied address outside a plugin's grant is named, with the grant to add.
        let warned = log.of_plugin("elsewhere", &format!("add \"{other_addr}\" to `network`"));
        assert_eq!(warned.len(), 1, "{guest:?}: {:#?}", log.lines());
        // A socket without a `network` grant, and a name lookup without `dns`, are named too.
        let warned = log.of_plugin("connect", "opened a TCP socket");
        assert_eq!(warned.len(), 1, "{guest:?}: {:#?}", log.lines());
        assert!(
            warned[0].contains("to `network` under [plugin.grants]"),
            "{warned:?}"
        );
        for id in ["resolve", "lookup-with-socket-grant"] {
            let warned = log.of_plugin(id, "looked up the name `localhost`");
            assert_eq!(warned.len(), 1, "{guest:?} {id}: {:#?}", log.lines());
            assert!(warned[0].contains("set `dns = true`"), "{warned:?}");
        }
        // A granted socket is not warned about.
        assert!(
            log.of_plugin("granted", "opened a").is_empty(),
            "{guest:?}: {:#?}",
            log.lines()
        );
    }
}

#[tokio::test]
async fn a_plugin_sees_only_the_environment_it_is_granted() {
    // PATH and HOME are set for any test process; only PATH is granted.
    assert!(std::env::var("PATH").is_ok());
    let grant = "[plugin.grants]\nenv = [\"PATH\", \"SEAM_TEST_SURELY_UNSET_VARIABLE\"]\n";
    for guest in GUESTS {
        let toml = good()
            + &guest.hostile("all", "mode = \"env-all\"", grant)
            + &guest.hostile("home", "mode = \"env\", var = \"HOME\"", grant)
            + &guest.hostile("path", "mode = \"env\", var = \"PATH\"", grant)
            + &guest.hostile("none", "mode = \"env-all\"", "");
        let attacks = Attacks::load(&toml).await;
        assert_eq!(attacks.attack("all").await, "vars: [PATH]", "{guest:?}");
        assert_eq!(attacks.attack("home").await, "unset", "{guest:?}");
        assert_eq!(
            attacks.attack("path").await,
            format!("set: {}", std::env::var("PATH").unwrap()),
            "{guest:?}"
        );
        assert_eq!(attacks.attack("none").await, "vars: []", "{guest:?}");
        // What was granted, as `seam check` reports it.
        let plugins = attacks.host.plugins().await;
        let all = plugins.iter().find(|p| p.id == "all").unwrap();
        let grants = all.grants.as_ref().unwrap();
        assert_eq!(grants.env, ["PATH"]);
        assert_eq!(grants.env_unset, ["SEAM_TEST_SURELY_UNSET_VARIABLE"]);
        let none = plugins.iter().find(|p| p.id == "none").unwrap();
        assert!(none.grants.as_ref().unwrap().is_empty());
    }
}

// --- WASI 0.3 through the contract's exports ----------------------------------------------

/// A 0.3 component is a provider like any (0.5.0's world, its `run` async): it loads,
/// describes and runs under its grants, and its WASI 0.3 calls may wait.
#[tokio::test]
async fn a_wasi_0_3_provider_runs_under_its_grants() {
    let dir = files();
    let grant = "[plugin.grants]\nenv = [\"PATH\"]\n";
    let toml = good()
        + &Guest::P3.hostile("env", "mode = \"env-all\"", grant)
        + &Guest::P3.hostile(
            "reader",
            "mode = \"read-file\", path = \"/data/readme.txt\"",
            &dirs_grant(dir.path()),
        );
    let attacks = Attacks::load(&toml).await;
    let info = attacks.host.plugins().await;
    let env = info.iter().find(|p| p.id == "env").unwrap();
    assert_eq!(env.name.as_deref(), Some("env"));
    assert_eq!(env.version, Some(seam_host::WitVersion::V0_5_0));
    assert_eq!(attacks.attack("env").await, "vars: [PATH]");
    assert_eq!(attacks.attack("reader").await, "ok: granted content");
    assert_quiescent(&attacks.host);
}

// --- Faults at each step ------------------------------------------------------------------

#[tokio::test]
async fn a_fault_in_describe_fails_only_that_plugin() {
    for how in ["trap", "panic"] {
        let toml = good()
            + &hostile(
                "bad",
                &format!("mode = \"fault\", at = \"describe\", how = \"{how}\""),
                "",
            );
        let host = test_host();
        let report = host.load(&config(&toml)).await;
        assert_eq!(report.failed.len(), 1, "{how}");
        assert_eq!(report.failed[0].id(), "bad");
        let e = report.failed[0].to_string();
        assert!(e.contains("describe failed"), "{e}");
        let plugins = host.plugins().await;
        assert!(matches!(plugins[1].state, PluginState::Failed(_)));
        let r = run_once(&host, "good", request("x")).await;
        assert!(r.stop_reason.is_success());
        assert_quiescent(&host);
    }
}

#[tokio::test]
async fn a_describe_that_spins_is_stopped_by_its_own_small_cpu_budget() {
    // `describe_cpu_ms` (default 1000) bounds describe, not `cpu_ms_per_call` (10000): one
    // hostile plugin cannot hold every command on its config for ten seconds.
    let toml = good()
        + &hostile(
            "bad",
            r#"mode = "fault", at = "describe", how = "spin""#,
            "",
        );
    let host = test_host();
    let report = host.load(&config(&toml)).await;
    assert_eq!(report.failed.len(), 1);
    assert_eq!(report.failed[0].id(), "bad");
    let e = report.failed[0].to_string();
    assert!(e.contains("`describe_cpu_ms`"), "{e}");
    let r = run_once(&host, "good", request("x")).await;
    assert!(r.stop_reason.is_success());
    assert_quiescent(&host);
}

#[tokio::test]
async fn a_fault_at_start_rejects_started_and_emits_nothing() {
    for how in ["trap", "panic"] {
        let toml = good()
            + &hostile(
                "bad",
                &format!("mode = \"fault\", at = \"start\", how = \"{how}\""),
                "",
            );
        let host = host_with(&toml).await;
        let seen = record(&host);
        let run = host.subagents().start("bad", request("x")).unwrap();
        let (err, _) = while_serving(&host, run.started()).await;
        assert_eq!(err.unwrap_err().code(), "START_FAILED", "{how}");
        assert_eq!(run.result().await.unwrap().stop_reason, StopReason::Error);
        run.dispose().await;
        let bad_events = seen
            .lock()
            .unwrap()
            .iter()
            .filter(|e| matches!(e, Event::SubagentStart { provider, .. } if provider == "bad"))
            .count();
        assert_eq!(bad_events, 0);
        assert_quiescent(&host);
    }
}

#[tokio::test]
async fn a_fault_while_producing_the_result_ends_the_run_error() {
    for how in ["trap", "panic"] {
        let toml = good()
            + &hostile(
                "bad",
                &format!("mode = \"fault\", at = \"result\", how = \"{how}\""),
                "",
            );
        let host = host_with(&toml).await;
        let seen = record(&host);
        let (result, _) = while_serving(&host, run_once(&host, "bad", request("x"))).await;
        assert_eq!(result.stop_reason, StopReason::Error, "{how}");
        diagnosed(&result, "provider `bad` failed");
        assert_eq!(last_end(&seen, "bad").0, StopReason::Error);
        assert_quiescent(&host);
    }
}

#[tokio::test]
async fn a_fault_on_cancel_still_ends_the_run_aborted() {
    for how in ["trap", "panic"] {
        let toml = good()
            + &hostile(
                "bad",
                &format!("mode = \"fault\", at = \"cancel\", how = \"{how}\""),
                "",
            );
        let host = host_with(&toml).await;
        let seen = record(&host);
        let run = host.subagents().start("bad", request("x")).unwrap();
        run.started().await.unwrap();
        run.cancel(Some("stop".into()));
        let (result, _) = while_serving(&host, run.result()).await;
        assert_eq!(result.unwrap().stop_reason, StopReason::Aborted, "{how}");
        run.dispose().await;
        assert_eq!(last_end(&seen, "bad").0, StopReason::Aborted);
        assert_quiescent(&host);
    }
}

#[tokio::test]
async fn a_provider_that_ignores_cancel_is_dropped_after_the_grace() {
    let toml = good() + &hostile("deaf", "mode = \"ignore-cancel\"", "");
    let host = host_with(&toml).await;
    let run = host.subagents().start("deaf", request("x")).unwrap();
    run.started().await.unwrap();
    run.cancel(None);
    let (result, _) = while_serving(&host, run.result()).await;
    let result = result.unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    diagnosed(&result, "enforced");
    run.dispose().await;
    assert_quiescent(&host);
}

// --- Lying descriptors --------------------------------------------------------------------

#[tokio::test]
async fn a_provider_that_lies_about_its_capabilities_fails_only_its_runs() {
    let toml = good() + &hostile("liar", "mode = \"lie\"", "");
    let host = host_with(&toml).await;
    let d = host.subagents().descriptor("liar").unwrap();
    assert!(d.capabilities.output_schema && d.capabilities.persona);

    let mut schema = request("x");
    schema.output_schema = Some(serde_json::json!({"type": "object"}));
    let (r, _) = while_serving(&host, run_once(&host, "liar", schema)).await;
    assert_eq!(r.stop_reason, StopReason::Error);
    assert!(
        r.diagnostic.as_deref().unwrap_or("").contains("not JSON"),
        "{r:?}"
    );
    assert_eq!(r.output_text(), "here you go", "the child's words stay");
    assert_eq!(r.structured, None);

    let mut persona = request("x");
    persona.persona = Some("pirate".into());
    let (r, _) = while_serving(&host, run_once(&host, "liar", persona)).await;
    assert_eq!(r.stop_reason, StopReason::Error);
    diagnosed(&r, "I lied");

    // Asked for nothing special, it answers.
    assert!(run_once(&host, "liar", request("x"))
        .await
        .stop_reason
        .is_success());
    assert_quiescent(&host);
}

#[tokio::test]
async fn an_empty_or_enormous_provider_name_is_refused_at_load() {
    let toml = good()
        + &entry("empty", "hostile_provider", "name = \"\", mode = \"ok\"")
        + &entry(
            "huge",
            "hostile_provider",
            "nameBytes = 1000000, mode = \"ok\"",
        );
    let host = test_host();
    let report = host.load(&config(&toml)).await;
    assert_eq!(report.failed.len(), 2);
    for failure in &report.failed {
        let e = failure.to_string();
        assert!(e.contains("INVALID_DESCRIPTOR"), "{e}");
        // The message names the problem without repeating a megabyte of name.
        assert!(e.len() < 500, "{} bytes", e.len());
    }
    assert_eq!(host.subagents().list().len(), 1);
    assert!(run_once(&host, "good", request("x"))
        .await
        .stop_reason
        .is_success());
    assert_quiescent(&host);
}

// --- Concurrency --------------------------------------------------------------------------

#[tokio::test]
async fn excess_runs_wait_for_a_slot_when_the_entry_says_wait() {
    let toml = good()
        + &mock("slow", "delayMs = 60000")
        + "[plugin.limits]\nmax_concurrent_runs = 2\non_concurrency = \"wait\"\n";
    let host = host_with(&toml).await;
    let runs: Vec<SubagentRun> = (0..3)
        .map(|_| host.subagents().start("slow", request("x")).unwrap())
        .collect();
    runs[0].started().await.unwrap();
    runs[1].started().await.unwrap();
    // The third holds no instance while it waits, and the host keeps serving.
    assert!(run_once(&host, "good", request("x"))
        .await
        .stop_reason
        .is_success());
    assert_eq!(host.live_instances(), 2);
    assert!(runs[2].try_result().is_none());
    // A slot frees: the third starts.
    runs[0].dispose().await;
    runs[2].started().await.unwrap();
    // A waiting run can be cancelled: it never starts.
    let waiting = host.subagents().start("slow", request("x")).unwrap();
    waiting.cancel(Some("no longer needed".into()));
    assert_eq!(waiting.started().await.unwrap_err().code(), "ABORTED");
    assert_eq!(
        waiting.result().await.unwrap().stop_reason,
        StopReason::Aborted
    );
    waiting.dispose().await;
    for run in &runs {
        run.dispose().await;
    }
    assert_quiescent(&host);
}

#[tokio::test]
async fn excess_runs_are_refused_when_the_entry_says_refuse() {
    let toml = good()
        + &mock("slow", "delayMs = 60000")
        + "[plugin.limits]\nmax_concurrent_runs = 2\non_concurrency = \"refuse\"\n";
    let host = host_with(&toml).await;
    let seen = record(&host);
    let a = host.subagents().start("slow", request("x")).unwrap();
    let b = host.subagents().start("slow", request("x")).unwrap();
    a.started().await.unwrap();
    b.started().await.unwrap();
    let c = host.subagents().start("slow", request("x")).unwrap();
    let err = c.started().await.unwrap_err();
    assert_eq!(err.code(), "START_FAILED");
    assert!(
        err.to_string()
            .contains("plugin `slow` hit its limit `max_concurrent_runs`"),
        "{err}"
    );
    assert_eq!(c.result().await.unwrap().stop_reason, StopReason::Error);
    c.dispose().await;
    assert_eq!(names(&seen), ["subagent/start", "subagent/start"]);
    a.dispose().await;
    b.dispose().await;
    assert_quiescent(&host);
}

// --- Hostile tools ------------------------------------------------------------------------

pub(crate) fn caller() -> ParentRef {
    ParentRef::top_level("agent-0", "/work")
}

pub(crate) async fn call(host: &Host, tool: &str) -> seam_host::ToolResult {
    let (r, _) = while_serving(
        host,
        host.call_tool(tool, caller(), "{}", CancellationToken::new()),
    )
    .await;
    r.unwrap()
}

#[tokio::test]
async fn a_tool_that_never_disposes_its_runs_leaves_nothing_behind() {
    let toml = good()
        + &mock("slow", "delayMs = 60000")
        + &hostile_tool(
            "leak",
            "mode = \"leak-runs\", provider = \"slow\", count = 5",
            "",
        )
        + &hostile_tool(
            "leaktrap",
            "mode = \"leak-and-trap\", provider = \"slow\", count = 5",
            "",
        );
    let host = host_with(&toml).await;
    let seen = record(&host);
    let r = call(&host, "leak").await;
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.text(), "leaked 5 runs");
    // The call has returned: its runs are gone, whatever the guest did.
    assert_quiescent(&host);
    let r = call(&host, "leaktrap").await;
    assert!(r.is_error, "{r:?}");
    assert!(r.text().contains("tool plugin `leaktrap` failed"), "{r:?}");
    assert_quiescent(&host);
    let starts = names(&seen)
        .iter()
        .filter(|n| **n == "subagent/start")
        .count();
    let ends = names(&seen)
        .iter()
        .filter(|n| **n == "subagent/end")
        .count();
    assert_eq!(starts, ends, "every leaked run that started also ended");
}

#[tokio::test]
async fn a_tool_hits_its_limits_like_a_provider() {
    let toml = good()
        + &hostile_tool(
            "spin",
            "mode = \"spin\"",
            "[plugin.limits]\ncpu_ms_per_call = 300",
        )
        + &hostile_tool(
            "big",
            "mode = \"huge-result\", bytes = 5000",
            "[plugin.limits]\nmax_output_bytes = 1000",
        )
        + &hostile_tool(
            "bigreq",
            "mode = \"huge-request\", provider = \"good\", bytes = 5000",
            "[plugin.limits]\nmax_output_bytes = 1000",
        )
        + &hostile_tool(
            "flood",
            "mode = \"flood\", provider = \"capped\", count = 4",
            "",
        )
        + &mock("capped", "delayMs = 60000")
        + "[plugin.limits]\nmax_concurrent_runs = 2\non_concurrency = \"refuse\"\n";
    let host = host_with(&toml).await;
    for (tool, limit) in [("spin", "cpu_ms_per_call"), ("big", "max_output_bytes")] {
        let r = call(&host, tool).await;
        assert!(r.is_error, "{r:?}");
        let expected = format!("plugin `{tool}` hit its limit `{limit}`");
        assert!(r.text().contains(&expected), "{tool}: {r:?}");
    }
    let r = call(&host, "bigreq").await;
    assert!(
        r.text().starts_with("refused: ")
            && r.text().contains("InvalidRequest")
            && r.text()
                .contains("plugin `bigreq` hit its limit `max_output_bytes`"),
        "{r:?}"
    );
    let r = call(&host, "flood").await;
    assert!(r.text().starts_with("started 2, refused 2"), "{r:?}");
    assert!(r.text().contains("max_concurrent_runs"), "{r:?}");
    assert_quiescent(&host);
}

// --- Guest output -------------------------------------------------------------------------

/// Everything a `tracing` fmt subscriber writes.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Captured {
    fn lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .map(str::to_string)
            .collect()
    }
}

// Current-thread runtime: every guest call runs on this thread, under the scoped subscriber.
#[tokio::test(flavor = "current_thread")]
async fn guest_stdout_and_stderr_reach_the_log_with_the_plugin_id_capped() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let toml = good()
        + &hostile("printer", "mode = \"print\", lines = 3, lineBytes = 10", "")
        + &hostile(
            "flood",
            "mode = \"print\", lines = 2000, lineBytes = 5000",
            "",
        );
    let host = host_with(&toml).await;

    assert_eq!(attack_output(&host, "printer").await, "ok");
    let lines = captured.lines();
    let of = |plugin: &str, stream: &str| -> Vec<String> {
        lines
            .iter()
            .filter(|l| {
                l.contains("seam_host::guest")
                    && l.contains(&format!("plugin=\"{plugin}\""))
                    && l.contains(&format!("stream=\"{stream}\""))
            })
            .cloned()
            .collect()
    };
    let stdout = of("printer", "stdout");
    assert_eq!(stdout.len(), 3, "{lines:#?}");
    assert!(stdout[0].contains("line 0 zzzzzzzzzz"), "{}", stdout[0]);
    let stderr = of("printer", "stderr");
    assert_eq!(stderr.len(), 1, "{lines:#?}");
    assert!(stderr[0].contains("a line on stderr"));

    // 10 MB of output: lines are cut, and the store's log budget ends the flood.
    assert_eq!(attack_output(&host, "flood").await, "ok");
    let lines = captured.lines();
    let flood: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("plugin=\"flood\"") && l.contains("stream="))
        .collect();
    assert!(!flood.is_empty());
    for l in &flood {
        assert!(l.contains("[line cut]"), "{l}");
        assert!(
            l.len() < seam_host::sandbox::MAX_LINE + 200,
            "{} bytes",
            l.len()
        );
    }
    let logged: usize = flood.len() * seam_host::sandbox::MAX_LINE;
    assert!(
        logged <= seam_host::sandbox::LOG_BUDGET,
        "{logged} bytes logged"
    );
    let spent = lines
        .iter()
        .filter(|l| l.contains("plugin=\"flood\"") && l.contains("log budget"))
        .count();
    assert_eq!(spent, 1, "one warning when the budget is spent");
    assert_quiescent(&host);
}

// --- Grants and limits in the config ------------------------------------------------------

fn parse_err(text: &str) -> String {
    seam_host::Config::parse(text, Path::new("test.toml"), &guest_dir())
        .unwrap_err()
        .to_string()
}

#[test]
fn malformed_grants_and_limits_are_config_errors_naming_entry_and_key() {
    let base = hostile("p", "mode = \"ok\"", "");
    let cases = [
        ("[plugin.grants]\nnetwork = [\"example.com:80\"]", "key `grants.network[0]`"),
        ("[plugin.grants]\nfiles = []", "key `grants.files` is unknown"),
        ("[plugin.grants]\ndirs = [{ host = \"x\" }]", "key `grants.dirs[0].guest` is required"),
        (
            "[plugin.grants]\ndirs = [{ host = \"x\", guest = \"/a\", write = \"yes\" }]",
            "key `grants.dirs[0].write` must be a boolean",
        ),
        (
            "[plugin.grants]\ndirs = [{ host = \"x\", guest = \"/a\" }, { host = \"y\", guest = \"/a\" }]",
            "key `grants.dirs[1].guest`: `/a` is granted twice",
        ),
        ("[plugin.grants]\nenv = [\"A=B\"]", "key `grants.env[0]`"),
        ("[plugin.grants]\ndns = 1", "key `grants.dns` must be a boolean"),
        ("[plugin.limits]\nmemory_mb = 0", "key `limits.memory_mb` must be an integer from 1"),
        ("[plugin.limits]\ncpu_ms_per_call = -5", "key `limits.cpu_ms_per_call`"),
        ("[plugin.limits]\nfuel = 5", "key `limits.fuel` is unknown"),
        ("[plugin.limits]\non_concurrency = \"drop\"", "key `limits.on_concurrency`"),
    ];
    for (tables, expected) in cases {
        let e = parse_err(&format!("{base}{tables}\n"));
        assert!(
            e.contains("plugin entry 1 (id `p`)") && e.contains(expected),
            "{tables}: {e}"
        );
    }
}

#[tokio::test]
async fn grants_and_limits_the_host_cannot_honour_fail_the_load_naming_entry_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file.txt");
    std::fs::write(&file, "x").unwrap();
    let toml = good()
        + &hostile(
            "missing",
            "mode = \"ok\"",
            &format!(
                "[plugin.grants]\ndirs = [{{ host = '{}', guest = '/d' }}]",
                dir.path().join("nope").display()
            ),
        )
        + &hostile(
            "notdir",
            "mode = \"ok\"",
            &format!(
                "[plugin.grants]\ndirs = [{{ host = '{}', guest = '/d' }}]",
                file.display()
            ),
        )
        + &hostile(
            "hungry",
            "mode = \"ok\"",
            "[plugin.limits]\nmemory_mb = 4096",
        );
    let host = test_host();
    let report = host.load(&config(&toml)).await;
    let errors: Vec<String> = report.failed.iter().map(|e| e.to_string()).collect();
    let ids: Vec<&str> = report.failed.iter().map(|e| e.id()).collect();
    assert_eq!(ids, ["missing", "notdir", "hungry"], "{errors:#?}");
    assert!(
        errors[0].contains("key `grants.dirs[0].host`"),
        "{}",
        errors[0]
    );
    assert!(
        errors[1].contains("key `grants.dirs[0].host`") && errors[1].contains("not a directory"),
        "{}",
        errors[1]
    );
    assert!(
        errors[2].contains("key `limits.memory_mb`"),
        "{}",
        errors[2]
    );
    assert!(run_once(&host, "good", request("x"))
        .await
        .stop_reason
        .is_success());
    // What each loaded plugin is granted and limited to is reported.
    let plugins = host.plugins().await;
    let limits = plugins[0].limits.as_ref().unwrap();
    assert_eq!(*limits, seam_host::Limits::default());
}

#[tokio::test]
async fn a_tool_with_an_enormous_name_or_description_is_not_mounted() {
    let long_name = "n".repeat(100_000);
    let toml = good()
        + &hostile_tool(&long_name, "mode = \"ok\"", "")
        + &hostile_tool("verbose", "mode = \"huge-describe\", bytes = 5000000", "")
        + &hostile_tool("fine", "mode = \"ok\"", "");
    // A 100 KB id is refused by the config before anything loads; use a short id.
    let toml = toml.replacen(&format!("id = \"{long_name}\""), "id = \"longname\"", 1);
    let host = test_host();
    let report = host.load(&config(&toml)).await;
    let errors: Vec<String> = report.failed.iter().map(|e| e.to_string()).collect();
    let ids: Vec<&str> = report.failed.iter().map(|e| e.id()).collect();
    assert_eq!(ids, ["longname", "verbose"], "{errors:#?}");
    assert!(errors[0].contains("binding of more than"), "{}", errors[0]);
    assert!(errors[0].len() < 500);
    assert!(
        errors[1].contains("hit its limit `max_output_bytes`"),
        "{}",
        errors[1]
    );
    let names: Vec<String> = host
        .tool_descriptors()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["fine"]);
    assert!(run_once(&host, "good", request("x"))
        .await
        .stop_reason
        .is_success());
    assert_quiescent(&host);
}

/// An ACP agent that floods its answer is stopped at `max_output_bytes` and reaped, while a
/// component provider in the same host keeps serving.
#[tokio::test]
async fn an_acp_agent_flooding_output_is_stopped_at_the_output_limit() {
    use super::acp::{acp_entry, assert_no_agent_left};
    let tag = "acp-flood";
    let host = host_with(
        &(acp_entry(
            "flood",
            tag,
            "",
            "[plugin.limits]\nmax_output_bytes = 1000000",
        ) + &mock("calm", "")),
    )
    .await;
    let run = host.subagents().start("flood", request("flood")).unwrap();
    let result = run.result().await.unwrap();
    run.dispose().await;
    assert_eq!(result.stop_reason, StopReason::Error, "{result:?}");
    let diagnostic = result.diagnostic.unwrap_or_default();
    assert!(
        diagnostic.contains("ACP agent `flood`") && diagnostic.contains("max_output_bytes"),
        "{diagnostic}"
    );
    let calm = host
        .subagents()
        .start("calm", request("still here"))
        .unwrap();
    assert_eq!(
        calm.result().await.unwrap().stop_reason,
        StopReason::Completed
    );
    calm.dispose().await;
    assert_no_agent_left(&host, tag).await;
}

/// An ACP agent's file requests stay beneath their grant: writes and reads through dangling,
/// relative, absolute and chained symbolic links, a link to a directory outside, `..`, and a
/// link swapped between two requests are refused naming the grant, nothing outside is created
/// or read, and a component provider keeps serving throughout.
#[tokio::test]
async fn an_acp_agents_file_requests_cannot_leave_their_grant() {
    use super::acp::{acp_entry, assert_no_agent_left};
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let (open, outside) = (base.join("open"), base.join("outside"));
    std::fs::create_dir(&open).unwrap();
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "top secret").unwrap();
    std::fs::write(open.join("mine.txt"), "granted").unwrap();
    let links: [(&str, std::path::PathBuf); 8] = [
        ("dangling-abs", outside.join("PWNED")),
        ("dangling-rel", "../outside/PWNED".into()),
        ("abs", outside.join("secret.txt")),
        ("rel", "../outside/secret.txt".into()),
        ("chain", "chain-2".into()),
        ("chain-2", "../outside/PWNED-chained".into()),
        ("chain-read", "rel".into()),
        ("dir", outside.clone()),
    ];
    for (name, target) in &links {
        symlink(target, open.join(name)).unwrap();
    }
    symlink("mine.txt", open.join("swap")).unwrap();
    let grants = format!(
        "[plugin.grants]\ndirs = [{{ host = \"{}\", guest = \"/open\", write = true }}]",
        open.display()
    );
    let tag = "acp-grant-escape";
    let host = host_with(&(acp_entry("files", tag, "", &grants) + &good())).await;
    let ask = |prompt: String| {
        let host = host.clone();
        async move {
            let started = std::time::Instant::now();
            let answer = words(&run_once(&host, "files", request(&prompt)).await);
            (answer, started.elapsed())
        }
    };
    let p = |name: &str| open.join(name).display().to_string();
    let outside_now = || {
        let mut names: Vec<String> = std::fs::read_dir(&outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let (_, served) = while_serving(&host, async {
        let writes = [
            p("dangling-abs"),
            p("dangling-rel"),
            p("chain"),
            p("abs"),
            p("dir/PWNED-through-dir"),
            format!("{}/../outside/PWNED-dotdot", open.display()),
        ];
        for path in writes {
            let (answer, took) = ask(format!("write {path} PWNED")).await;
            eprintln!("write {path}: answered after {took:.1?}");
            assert!(
                answer.starts_with("error: ") && answer.contains("outside the directories granted"),
                "write {path}: {answer}"
            );
        }
        let reads = [
            p("abs"),
            p("rel"),
            p("chain-read"),
            p("dir/secret.txt"),
            format!("{}/../outside/secret.txt", open.display()),
        ];
        for path in reads {
            let (answer, took) = ask(format!("read {path}")).await;
            eprintln!("read {path}: answered after {took:.1?}");
            assert!(
                answer.starts_with("error: ") && answer.contains("outside the directories granted"),
                "read {path}: {answer}"
            );
            assert!(!answer.contains("top secret"), "{path}: {answer}");
        }
        // A link that leads inside is followed; swapped to lead outside between two requests,
        // it is refused.
        assert_eq!(
            ask(format!("write {} inside", p("swap"))).await.0,
            "written"
        );
        assert_eq!(
            std::fs::read_to_string(open.join("mine.txt")).unwrap(),
            "inside"
        );
        std::fs::remove_file(open.join("swap")).unwrap();
        symlink(outside.join("PWNED-swapped"), open.join("swap")).unwrap();
        let (answer, _) = ask(format!("write {} PWNED", p("swap"))).await;
        assert!(
            answer.contains("outside the directories granted"),
            "{answer}"
        );
        std::fs::remove_file(open.join("swap")).unwrap();
        symlink(outside.join("secret.txt"), open.join("swap")).unwrap();
        let (answer, _) = ask(format!("read {}", p("swap"))).await;
        assert!(
            answer.contains("outside the directories granted"),
            "{answer}"
        );
    })
    .await;
    eprintln!("served {served} good runs during the attacks");
    assert_eq!(
        outside_now(),
        ["secret.txt"],
        "a file was created outside the grant"
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "top secret"
    );
    // A plain write and read inside still work: the refusals are the grant's doing.
    assert_eq!(
        ask(format!("write {} hello", p("new.txt"))).await.0,
        "written"
    );
    assert_eq!(ask(format!("read {}", p("new.txt"))).await.0, "read: hello");
    assert_no_agent_left(&host, tag).await;
}
