//! The cluster, in one process: workers and front-ends as separate hosts on a real
//! `nats-server` (loopback, JetStream in a temp folder), loading real components. Where a test
//! needs a worker that breaks the protocol, it plays that worker itself over NATS.

use std::time::Duration;

use futures::StreamExt;
use seam_host::cluster::wire::{Advert, Control, Out, OutBody, Start, StartReply, PROTOCOL};
use seam_host::cluster::{ClusterConfig, Served, Worker, WorkerOptions};
use seam_host::{ContentBlock, Event, Host, StopReason};
use seam_tests::nats::NatsServer;
use seam_tests::{diagnosed, host_with, mock, request, test_host, wait_for, watch_events, words};

/// A short heartbeat, so that a silent worker is found quickly.
const BEAT_MS: u64 = 200;

fn cluster(server: &NatsServer) -> ClusterConfig {
    let mut c = ClusterConfig::new(server.url.clone());
    c.name = "t".into();
    c.heartbeat_ms = BEAT_MS;
    c
}

/// A worker host loading `toml`, serving every provider named in `served` with `capacity`.
async fn worker(
    server: &NatsServer,
    id: &str,
    toml: &str,
    served: &[(&str, u32, bool)],
) -> (Host, Worker) {
    let host = host_with(toml).await;
    let worker = Worker::serve(
        &cluster(server),
        host.subagents().clone(),
        host.events().clone(),
        WorkerOptions {
            id: id.into(),
            providers: served
                .iter()
                .map(|(name, capacity, waits)| Served {
                    name: (*name).into(),
                    capacity: *capacity,
                    waits: *waits,
                })
                .collect(),
            contract: "seam:plugin@0.4.0".into(),
            keep_finished: Duration::from_secs(60),
        },
    )
    .await
    .expect("the worker serves");
    (host, worker)
}

/// A front-end host with no provider of its own, joined to the cluster.
async fn front(server: &NatsServer) -> Host {
    let host = test_host();
    host.join_cluster(&cluster(server)).await.expect("joins");
    host
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_end_runs_on_a_provider_only_a_worker_loads_with_its_events_in_order() {
    let server = NatsServer::start();
    let (worker_host, w) = worker(
        &server,
        "w1",
        &mock("remote", r#"reply = "answered {prompt}", progress = ["one", "two"], capabilities = { persona = true }"#),
        &[("remote", 4, true)],
    )
    .await;
    let front = front(&server).await;
    // The descriptor is the worker's, frozen.
    let local = worker_host
        .subagents()
        .descriptor("remote")
        .expect("on the worker");
    let seen = front
        .subagents()
        .descriptor("remote")
        .expect("registered on the front-end");
    assert_eq!(*seen, *local);

    let mut events = watch_events(&front);
    let mut r = request("the task");
    r.persona = Some("terse".into());
    let run = front.subagents().start("remote", r).expect("starts");
    let result = run.result().await.expect("a result");
    assert_eq!(words(&result), "answered the task");
    assert_eq!(result.stop_reason, StopReason::Completed);
    wait_for(&mut events, "the run's end", |seen| {
        seen.iter().any(|e| matches!(e, Event::SubagentEnd { .. }))
    })
    .await;
    let order: Vec<String> = events
        .borrow()
        .iter()
        .filter_map(|e| match e {
            Event::SubagentStart { .. } => Some("start".to_string()),
            Event::SubagentProgress { content, seq, .. } => Some(format!(
                "progress {seq} {}",
                seam_host::types::blocks_text(content)
            )),
            Event::SubagentEnd { .. } => Some("end".to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["start", "progress 1 one", "progress 2 two", "end"]);
    run.dispose().await;
    // Disposed on the front-end, the run goes from the worker too.
    assert!(
        seam_tests::eventually(|| w.runs() == 0).await,
        "the worker still holds the run"
    );

    // Capabilities are checked on the front-end before anything is sent, as for a local one.
    let mut r = request("x");
    r.output_schema = Some(serde_json::json!({"type": "object"}));
    let err = front
        .subagents()
        .start("remote", r)
        .expect_err("no output-schema capability");
    assert_eq!(err.code(), "UNSUPPORTED_CAPABILITY");

    w.drain(Duration::from_secs(5)).await;
    front.unload_all().await;
    worker_host.unload_all().await;
}

/// A run that settles at once is told in the start's answer (its readiness and its end: one
/// message back instead of three) to a front-end that asks for it, as far as the worker's short
/// wait allows, and the rest on `out`, each once; a front-end that does not ask (an older one)
/// is told both on the run's `out` subject, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_settles_at_once_is_told_in_the_starts_answer_when_asked() {
    let server = NatsServer::start();
    let (worker_host, w) = worker(
        &server,
        "w1",
        &mock("quick", r#"reply = "at once""#),
        &[("quick", 4, true)],
    )
    .await;
    let client = async_nats::connect(server.url.as_str())
        .await
        .expect("connects");
    for early in [true, false] {
        let token = format!("early-{early}");
        let mut out = client
            .subscribe(format!("seam.t.run.{token}.out"))
            .await
            .expect("subscribes");
        let start = Start {
            token: token.clone(),
            provider: "quick".into(),
            request: seam_host::RequestSnapshot::of(&request("now")),
            resume: None,
            lease_ms: None,
            early,
        };
        let reply = client
            .request(
                "seam.t.start.quick",
                serde_json::to_vec(&start).expect("json").into(),
            )
            .await
            .expect("answered");
        let reply: StartReply = serde_json::from_slice(&reply.payload).expect("an answer");
        let StartReply::Accepted { ready, settled, .. } = reply else {
            panic!("not accepted: {reply:?}");
        };
        let end = if early {
            // The worker waits a few milliseconds at most for what it can put in the answer: on
            // a loaded machine the run may not be ready, or not ended, by then. Whatever is not
            // in the answer comes on `out`, once: never both, never neither.
            if !ready {
                assert!(settled.is_none(), "an end in the answer without readiness");
                assert_eq!(next_out(&mut out).await.body, OutBody::Ready);
            }
            match settled {
                Some(end) => *end,
                None => next_out(&mut out).await.body,
            }
        } else {
            assert!(
                !ready && settled.is_none(),
                "an older front-end is told on `out`"
            );
            assert_eq!(next_out(&mut out).await.body, OutBody::Ready);
            next_out(&mut out).await.body
        };
        let OutBody::Result { result, .. } = end else {
            panic!("not a result: {end:?}");
        };
        assert_eq!(words(&result), "at once");
        client
            .publish(
                format!("seam.t.run.{token}.ctl"),
                serde_json::to_vec(&Control::Dispose).expect("json").into(),
            )
            .await
            .expect("sends");
    }
    assert!(
        seam_tests::eventually(|| w.runs() == 0).await,
        "the worker still holds a run"
    );
    w.drain(Duration::from_secs(5)).await;
    worker_host.unload_all().await;
}

/// The next message of a run's `out` subject.
async fn next_out(out: &mut async_nats::Subscriber) -> Out {
    let msg = out.next().await.expect("a message");
    serde_json::from_slice(&msg.payload).expect("a run's message")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_steer_and_dispose_reach_the_worker_and_its_run_ends_aborted() {
    let server = NatsServer::start();
    let (worker_host, w) = worker(
        &server,
        "w1",
        &(mock("slow", "delayMs = 600000")
            + &mock(
                "listens",
                r#"steering = true, awaitMessages = 1, reply = "heard {messages}""#,
            )),
        &[("slow", 4, true), ("listens", 4, true)],
    )
    .await;
    let mut worker_events = watch_events(&worker_host);
    let front = front(&server).await;

    let run = front
        .subagents()
        .start("slow", request("forever"))
        .expect("starts");
    run.started().await.expect("ready on the worker");
    run.cancel(Some("the user gave up".into()));
    let result = run.result().await.expect("a result");
    assert_eq!(result.stop_reason, StopReason::Aborted);
    // The worker's own run ended aborted: the cancel crossed.
    wait_for(&mut worker_events, "the worker's run to end aborted", |seen| {
        seen.iter().any(|e| {
            matches!(e, Event::SubagentEnd { provider, stop_reason: StopReason::Aborted, .. } if provider == "slow")
        })
    })
    .await;
    run.dispose().await;

    let run = front
        .subagents()
        .start("listens", request("wait"))
        .expect("starts");
    run.started().await.expect("ready");
    run.send_message(vec![ContentBlock::text("over the wire")])
        .expect("steerable");
    let result = run.result().await.expect("a result");
    assert_eq!(words(&result), "heard over the wire");
    run.dispose().await;
    assert!(
        seam_tests::eventually(|| w.runs() == 0).await,
        "the worker still holds runs"
    );

    w.drain(Duration::from_secs(5)).await;
    front.unload_all().await;
    worker_host.unload_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_remote_child_continues_on_the_worker_that_ran_it() {
    let server = NatsServer::start();
    let toml =
        "[models.scripts.child]\nsteps = [ { text = \"{prompt}, seeing {history} messages\" } ]\n\n"
            .to_string() + &seam_tests::entry("spawn", "spawn_provider", "");
    let (worker_host, w) = worker(&server, "w1", &toml, &[("spawn", 4, true)]).await;
    let front = front(&server).await;
    let mut r = request("go");
    r.agent_options = Some(seam_host::AgentOptions {
        model: Some("scripted:child".into()),
        system_prompt: None,
    });
    let run = front.subagents().start("spawn", r).expect("starts");
    assert_eq!(
        words(&run.result().await.expect("a result")),
        "go, seeing 1 messages"
    );
    let again = front
        .subagents()
        .resume(&run, vec![ContentBlock::text("more")])
        .expect("resumable");
    // The child starts from the first one's conversation, kept on the worker.
    assert_eq!(
        words(&again.result().await.expect("a result")),
        "more, seeing 3 messages"
    );
    again.dispose().await;
    run.dispose().await;
    // A finished run stays resumable after dispose, for as long as a handle of it lives; the
    // worker is told to let go of its own once the last one goes.
    drop((again, run));
    assert!(
        seam_tests::eventually(|| w.runs() == 0).await,
        "the worker still holds runs"
    );
    w.drain(Duration::from_secs(5)).await;
    front.unload_all().await;
    worker_host.unload_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_worker_hands_the_start_to_another_replica_and_a_full_cluster_refuses() {
    let server = NatsServer::start();
    let slow = |who: &str| {
        mock(
            "busy",
            &format!(
                r#"reply = "from {who}", readyDelayMs = 0, awaitMessages = 1, steering = true"#
            ),
        )
    };
    let (h1, w1) = worker(&server, "w1", &slow("w1"), &[("busy", 1, false)]).await;
    let (h2, w2) = worker(&server, "w2", &slow("w2"), &[("busy", 1, false)]).await;
    let front = front(&server).await;
    let a = front
        .subagents()
        .start("busy", request("a"))
        .expect("starts");
    let b = front
        .subagents()
        .start("busy", request("b"))
        .expect("starts");
    a.started().await.expect("a on one worker");
    b.started().await.expect("b on the other");
    // Both replicas are full and neither waits: the third start is refused, naming the limit.
    let c = front
        .subagents()
        .start("busy", request("c"))
        .expect("starts");
    let err = c.started().await.expect_err("no replica has room");
    assert_eq!(err.code(), "START_FAILED", "{err}");
    assert!(err.to_string().contains("max_concurrent_runs"), "{err}");
    for run in [&a, &b] {
        run.send_message(vec![ContentBlock::text("go")])
            .expect("steerable");
    }
    let mut answers = vec![
        words(&a.result().await.expect("a result")),
        words(&b.result().await.expect("a result")),
    ];
    answers.sort();
    assert_eq!(answers, ["from w1", "from w2"], "one run on each replica");
    for run in [a, b, c] {
        run.dispose().await;
    }
    w1.drain(Duration::from_secs(5)).await;
    w2.drain(Duration::from_secs(5)).await;
    front.unload_all().await;
    h1.unload_all().await;
    h2.unload_all().await;
}

/// Puts an advert for `provider` from `worker` (beating every `heartbeat_ms`), as a worker
/// would, and waits for the front-end whose `events` these are to register it.
async fn advertise(
    client: &async_nats::Client,
    events: &mut tokio::sync::watch::Receiver<Vec<Event>>,
    provider: &str,
    worker: &str,
    heartbeat_ms: u64,
) {
    let js = async_nats::jetstream::new(client.clone());
    let kv = js
        .get_key_value("seam-t-providers")
        .await
        .expect("the bucket");
    let advert = Advert {
        worker: worker.into(),
        descriptor: seam_host::ProviderDescriptor {
            name: provider.into(),
            capabilities: Default::default(),
            features: Default::default(),
            inherits_parent_context: false,
        },
        contract: "seam:plugin@0.4.0".into(),
        protocol: PROTOCOL,
        capacity: 1,
        waits: false,
        heartbeat_ms,
        draining: false,
    };
    kv.put(
        format!("{provider}.{worker}"),
        serde_json::to_vec(&advert).expect("json").into(),
    )
    .await
    .expect("put");
    wait_for(events, "the advertised provider", |seen| {
        seen.iter()
            .any(|e| matches!(e, Event::ProviderAdded { name } if name == provider))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_worker_answering_is_start_failed_naming_the_provider() {
    let server = NatsServer::start();
    let client = async_nats::connect(server.url.as_str())
        .await
        .expect("connects");
    let front = front(&server).await;
    let mut events = watch_events(&front);
    // Advertised, but nobody listens on its subject.
    advertise(&client, &mut events, "ghost", "gone", 600_000).await;
    let run = front
        .subagents()
        .start("ghost", request("x"))
        .expect("starts");
    let err = run.started().await.expect_err("nobody answers");
    assert_eq!(err.code(), "START_FAILED");
    assert!(
        err.to_string()
            .contains("no worker of cluster `t` serves provider `ghost`"),
        "{err}"
    );
    run.dispose().await;
    front.unload_all().await;
}

/// Plays a worker of `provider` named `worker`: it takes every start (answering `accepted`) and
/// sends the run, as its one message, what `message` makes of the start's number (from 1).
async fn play_worker(
    client: &async_nats::Client,
    provider: &str,
    worker: &'static str,
    message: impl Fn(usize) -> Vec<u8> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    let mut starts = client
        .queue_subscribe(format!("seam.t.start.{provider}"), "workers".into())
        .await
        .expect("subscribes");
    let fake = client.clone();
    tokio::spawn(async move {
        let mut n = 0;
        while let Some(msg) = starts.next().await {
            n += 1;
            let start: serde_json::Value = serde_json::from_slice(&msg.payload).expect("a start");
            let token = start["token"].as_str().expect("a token").to_string();
            // A worker that predates leases: it says nothing of them, and is sent none.
            let reply = StartReply::Accepted {
                worker: worker.into(),
                leases: false,
                ready: false,
                settled: None,
            };
            fake.publish(
                msg.reply.expect("a reply subject"),
                serde_json::to_vec(&reply).expect("json").into(),
            )
            .await
            .expect("answers");
            fake.publish(format!("seam.t.run.{token}.out"), message(n).into())
                .await
                .expect("sends");
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_loses_a_message_or_speaks_garbage_ends_the_run_naming_it() {
    let server = NatsServer::start();
    let client = async_nats::connect(server.url.as_str())
        .await
        .expect("connects");
    // A worker that answers every start, then breaks the run's stream: the first run's first
    // message is numbered 2, the second run gets a message that is not one.
    let player = play_worker(&client, "broken", "liar", |n| {
        if n == 1 {
            serde_json::to_vec(&Out {
                seq: 2,
                body: OutBody::Ready,
            })
            .expect("json")
        } else {
            b"{ not json".to_vec()
        }
    })
    .await;
    let front = front(&server).await;
    let mut events = watch_events(&front);
    advertise(&client, &mut events, "broken", "liar", 600_000).await;
    let run = front
        .subagents()
        .start("broken", request("x"))
        .expect("starts");
    let err = run.started().await.expect_err("a lost message");
    assert!(
        err.to_string()
            .contains("messages from worker `liar` were lost: expected message 1, got 2"),
        "{err}"
    );
    run.dispose().await;
    let run = front
        .subagents()
        .start("broken", request("y"))
        .expect("starts");
    let err = run.started().await.expect_err("garbage");
    assert!(
        err.to_string()
            .contains("worker `liar` sent a message that is not one"),
        "{err}"
    );
    run.dispose().await;
    player.abort();
    front.unload_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_over_max_payload_is_refused_not_truncated() {
    let server = NatsServer::start_with("max_payload: 8192");
    let (worker_host, w) = worker(
        &server,
        "w1",
        &mock("remote", r#"reply = "ok""#),
        &[("remote", 4, true)],
    )
    .await;
    let front = front(&server).await;
    let run = front
        .subagents()
        .start("remote", request(&"x".repeat(20_000)))
        .expect("starts");
    let err = run.started().await.expect_err("too large");
    let text = err.to_string();
    assert!(
        text.contains("over the NATS server's max_payload of 8192 bytes"),
        "{text}"
    );
    run.dispose().await;
    // The cluster still serves a start that fits.
    let run = front
        .subagents()
        .start("remote", request("small"))
        .expect("starts");
    assert_eq!(words(&run.result().await.expect("a result")), "ok");
    run.dispose().await;
    w.drain(Duration::from_secs(5)).await;
    front.unload_all().await;
    worker_host.unload_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_gone_silent_ends_its_runs_naming_it_and_its_provider_goes() {
    let server = NatsServer::start();
    let client = async_nats::connect(server.url.as_str())
        .await
        .expect("connects");
    // A worker that takes the run, says it is ready, then neither beats nor answers again.
    let player = play_worker(&client, "mute", "mute", |_| {
        serde_json::to_vec(&Out {
            seq: 1,
            body: OutBody::Ready,
        })
        .expect("json")
    })
    .await;
    let front = front(&server).await;
    let mut events = watch_events(&front);
    // One advert, with a short heartbeat, never put again.
    advertise(&client, &mut events, "mute", "mute", BEAT_MS).await;
    let run = front
        .subagents()
        .start("mute", request("x"))
        .expect("starts");
    run.started().await.expect("ready");
    let result = run.result().await.expect("a result");
    assert_eq!(result.stop_reason, StopReason::Error);
    diagnosed(&result, "worker `mute` stopped answering: no heartbeat for");
    run.dispose().await;
    wait_for(&mut events, "the silent worker's provider to go", |seen| {
        seen.iter()
            .any(|e| matches!(e, Event::ProviderRemoved { name } if name == "mute"))
    })
    .await;
    player.abort();
    front.unload_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_no_subject_may_be_built_from_are_refused() {
    let server = NatsServer::start();
    let host = host_with(&mock("remote", "")).await;
    for bad in ["a.b", "w*", "w>", "a b"] {
        let err = Worker::serve(
            &cluster(&server),
            host.subagents().clone(),
            host.events().clone(),
            WorkerOptions {
                id: bad.into(),
                providers: vec![],
                contract: String::new(),
                keep_finished: Duration::from_secs(1),
            },
        )
        .await
        .err()
        .expect("refused");
        assert!(err.to_string().contains("worker id"), "{err}");
    }
    let mut c = cluster(&server);
    c.name = "x>".into();
    let err = test_host().join_cluster(&c).await.expect_err("refused");
    assert!(err.to_string().contains("cluster name `x>`"), "{err}");
    host.unload_all().await;
}

/// Contract 16 on a cluster: the budget travels with a remote run, the worker holds the run to
/// it, and what the run spent there is counted at the front end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_run_is_held_to_its_budget_on_the_worker_and_counted_at_the_front_end() {
    let server = NatsServer::start();
    let toml = "[models.scripts.child]\nsteps = [ { text = \"long\", usage = { prompt-tokens = 7, completion-tokens = 80 } } ]\n\n"
        .to_string()
        + &seam_tests::entry("spawn", "spawn_provider", "");
    let (worker_host, w) = worker(&server, "w1", &toml, &[("spawn", 4, true)]).await;
    let front = front(&server).await;
    let seen = seam_tests::record(&front);
    let capped = |output_tokens: u64| {
        let mut r = request("go");
        r.agent_options = Some(seam_host::AgentOptions {
            model: Some("scripted:child".into()),
            system_prompt: None,
        });
        r.budget = Some(seam_host::spend::Budget {
            output_tokens: Some(output_tokens),
            ..Default::default()
        });
        r
    };
    let run = front
        .subagents()
        .start("spawn", capped(50))
        .expect("starts");
    let result = run.result().await.expect("a result");
    assert_eq!(
        result.stop_reason,
        StopReason::MaxTokens,
        "the worker sent the call what the budget left, and the reply was cut there"
    );
    let spent = run.account().spent();
    assert_eq!(
        (spent.input_tokens, spent.output_tokens, spent.model_calls),
        (7, 50, 1),
        "what the run spent on the worker is spent at the front end"
    );
    let told = seen.lock().unwrap().iter().find_map(|e| match e {
        Event::SubagentEnd { id, usage, .. } if id == run.id() => Some(*usage),
        _ => None,
    });
    assert_eq!(
        told.flatten().map(|u| u.completion_tokens),
        Some(50),
        "subagent/end at the front end carries it"
    );

    // Nothing left: the worker refuses the child's model call before it is made.
    let broke = front.subagents().start("spawn", capped(0)).expect("starts");
    let result = broke.result().await.expect("a result");
    assert_eq!(result.stop_reason, StopReason::Budget);
    let why = result.diagnostic.unwrap_or_default();
    assert!(why.contains("budget exhausted: output tokens"), "{why}");
    assert_eq!(broke.account().spent().output_tokens, 0);

    for r in [run, broke] {
        r.dispose().await;
    }
    assert!(
        seam_tests::eventually(|| w.runs() == 0).await,
        "the worker still holds runs"
    );
    w.drain(Duration::from_secs(5)).await;
    front.unload_all().await;
    worker_host.unload_all().await;
}

/// A run sent to a worker carries every scope over it at the front end, not only its own: the
/// worker's provider, granted the address, is denied it when a scope two delegations up
/// removed it (the nearest scope leaves the network alone), and reaches it with no scope.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_run_is_narrowed_by_every_scope_over_it() {
    let server = NatsServer::start();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let toml = seam_tests::entry(
        "connect",
        "hostile_provider",
        &format!("name = \"connect\", mode = \"connect\", addr = \"{addr}\""),
    ) + &format!("[plugin.grants]\nnetwork = [\"{addr}\"]\n");
    let (worker_host, w) = worker(&server, "w1", &toml, &[("connect", 4, true)]).await;
    let call = |tool: &str| {
        format!("{{ name = \"{tool}\", arguments = {{ description = \"d\", prompt = \"p\" }} }}")
    };
    let front_toml = format!(
        r#"[agent]
model = "scripted:lead"

[models.scripts.lead]
steps = [{{ text = "asking", tool_calls = [{outer}, {direct}] }}, {{ text = "{{tool_results}}" }}]

[models.scripts.child]
steps = [{{ text = "asking", tool_calls = [{inner}] }}, {{ text = "child: {{tool_results}}" }}]

"#,
        outer = call("outer"),
        direct = call("direct"),
        inner = call("inner"),
    ) + &seam_tests::entry("spawn", "spawn_provider", "")
        // Two delegations up, the network goes.
        + &seam_tests::entry(
            "outer",
            "subagent_tool",
            "provider = \"spawn\", toolName = \"outer\", agentOptions = { model = \"scripted:child\" }, scope = { network = [\"127.0.0.1:1\"] }",
        )
        // The nearest scope leaves the network alone.
        + &seam_tests::entry(
            "inner",
            "subagent_tool",
            "provider = \"connect\", toolName = \"inner\", scope = { env = [] }",
        )
        + &seam_tests::entry(
            "direct",
            "subagent_tool",
            "provider = \"connect\", toolName = \"direct\"",
        );
    let front = host_with(&front_toml).await;
    let mut events = watch_events(&front);
    front.join_cluster(&cluster(&server)).await.expect("joins");
    wait_for(&mut events, "the remote provider's tools", |seen| {
        ["inner", "direct"].iter().all(|tool| {
            seen.iter()
                .any(|e| matches!(e, Event::ToolMounted { name, .. } if name == tool))
        })
    })
    .await;
    let agent = front.create_agent(None, "/work").unwrap();
    let outcome = agent.run_turn(vec![ContentBlock::text("go")]).await;
    front.agents().dispose(agent.id()).await;
    let text = seam_host::blocks_text(&outcome.output);
    assert_eq!(outcome.stop_reason, StopReason::Completed, "{text}");
    assert!(text.contains("child: denied: "), "{text}");
    assert_eq!(text.matches("ok: connected").count(), 1, "{text}");
    assert!(
        seam_tests::eventually(|| w.runs() == 0).await,
        "the worker still holds runs"
    );
    w.drain(Duration::from_secs(5)).await;
    front.unload_all().await;
    worker_host.unload_all().await;
}
