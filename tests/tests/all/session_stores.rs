//! The session store trait on every backend: memory, SQLite, and JetStream on a real
//! `nats-server` (loopback, JetStream in a temp folder). What one backend keeps, every backend
//! keeps; what is particular to JetStream (openings that share a bucket, a stale writer, the
//! server's `max_payload`, a server that is not there) is tested below.

use std::sync::Arc;

use seam_host::cluster::{ClusterConfig, JetStreamStore};
use seam_host::session_store::{
    MemoryStore, RunStart, RunStatus, SessionStore, SqliteStore, StoreError, StoreLimits, Write,
};
use seam_tests::nats::NatsServer;

fn limits(bytes: u64) -> StoreLimits {
    StoreLimits {
        max_session_bytes: bytes,
    }
}

fn cluster(server: &NatsServer) -> ClusterConfig {
    let mut c = ClusterConfig::new(server.url.clone());
    c.name = "store".into();
    c.heartbeat_ms = 200;
    c
}

/// What keeps a backend's resources alive: its folder, its server.
#[allow(dead_code)]
enum Keep {
    Nothing,
    Dir(tempfile::TempDir),
    Server(NatsServer),
}

/// Every backend, each fresh.
fn backends(max: u64) -> Vec<(Arc<dyn SessionStore>, Keep)> {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(&dir.path().join("s.db"), limits(max)).unwrap();
    let server = NatsServer::start();
    let jetstream = JetStreamStore::open(&cluster(&server), limits(max)).unwrap();
    vec![
        (
            Arc::new(MemoryStore::journaling(limits(max))),
            Keep::Nothing,
        ),
        (Arc::new(sqlite), Keep::Dir(dir)),
        (Arc::new(jetstream), Keep::Server(server)),
    ]
}

fn open(id: &str, parent: Option<&str>) -> Write {
    Write::OpenSession {
        id: id.into(),
        agent: format!("agent-of-{id}"),
        parent: parent.map(str::to_string),
        working_directory: "/work".into(),
    }
}

fn append(session: &str, body: &str) -> Write {
    Write::Append {
        session: session.into(),
        kind: "user-message".into(),
        body: body.into(),
    }
}

#[test]
fn every_backend_keeps_sessions_runs_and_the_journal_and_removes_whole_trees() {
    for (store, _dir) in backends(1 << 20) {
        let name = format!("{store:?}");
        // An id that would break a formatted query is only data.
        let odd = "s'; DROP TABLE sessions; --";
        store
            .commit(vec![open(odd, None), append(odd, "a"), append(odd, "bb")])
            .unwrap();
        let events = store.events(odd).unwrap();
        assert_eq!(events.len(), 2, "{name}");
        assert_eq!((events[0].seq, events[1].seq), (1, 2), "{name}");
        assert_eq!(events[1].body, "bb", "{name}");
        let summary = store.session(odd).unwrap().expect("the session is kept");
        assert_eq!((summary.events, summary.bytes), (2, 3), "{name}");

        let run = store.start_run(run_start("spawn-1", odd)).unwrap();
        store
            .commit(vec![
                open("child", Some(odd)),
                Write::LinkChild {
                    run,
                    session: "child".into(),
                },
                append("child", "c"),
            ])
            .unwrap();
        let runs = store.runs_of(odd).unwrap();
        assert_eq!(runs.len(), 1, "{name}");
        assert_eq!(runs[0].status, RunStatus::Running, "{name}");
        assert_eq!(runs[0].child_session.as_deref(), Some("child"), "{name}");
        store
            .commit(vec![Write::RunEnded {
                run,
                stop_reason: "completed".into(),
                diagnostic: None,
            }])
            .unwrap();
        let ended = &store.runs_of(odd).unwrap()[0];
        assert_eq!(ended.status, RunStatus::Ended, "{name}");
        assert_eq!(ended.stop_reason.as_deref(), Some("completed"), "{name}");
        assert!(ended.ended_ms.is_some(), "{name}");

        store
            .commit(vec![Write::Bus {
                name: "x".into(),
                body: "{\"event\":\"x\"}".into(),
            }])
            .unwrap();
        assert_eq!(
            store.journal().unwrap(),
            vec!["{\"event\":\"x\"}"],
            "{name}"
        );

        // An append to a session the store does not have is refused, and so is its batch.
        let refused = store.commit(vec![append(odd, "lost"), append("ghost", "x")]);
        assert_eq!(
            refused,
            Err(StoreError::NoSession("ghost".into())),
            "{name}"
        );
        assert_eq!(store.events(odd).unwrap().len(), 2, "{name}: all or none");

        assert!(store.remove(odd).unwrap(), "{name}");
        assert!(store.session(odd).unwrap().is_none(), "{name}");
        assert!(
            store.session("child").unwrap().is_none(),
            "{name}: the child goes too"
        );
        assert!(store.runs_of(odd).unwrap().is_empty(), "{name}");
        assert!(!store.remove(odd).unwrap(), "{name}");

        // gc takes top-level sessions last written before the cutoff, with their children.
        store.commit(vec![open("old", None)]).unwrap();
        assert_eq!(
            store.gc(0).unwrap(),
            0,
            "{name}: nothing is older than the epoch"
        );
        assert_eq!(store.gc(u64::MAX).unwrap(), 1, "{name}");
        assert!(store.sessions().unwrap().is_empty(), "{name}");
    }
}

#[test]
fn an_append_past_the_session_limit_is_refused_naming_the_session_and_changes_nothing() {
    for (store, _dir) in backends(10) {
        let name = format!("{store:?}");
        store
            .commit(vec![open("s", None), append("s", "12345")])
            .unwrap();
        let err = store
            .commit(vec![append("s", "123"), append("s", "456")])
            .unwrap_err();
        assert_eq!(
            err,
            StoreError::SessionFull {
                session: "s".into(),
                limit_bytes: 10
            },
            "{name}"
        );
        assert!(err.to_string().contains("max_session_mb"), "{err}");
        assert_eq!(store.session("s").unwrap().unwrap().bytes, 5, "{name}");
        // Up to the limit is fine.
        store.commit(vec![append("s", "12345")]).unwrap();
    }
}

fn run_start(run: &str, parent_session: &str) -> RunStart {
    RunStart {
        run_id: run.into(),
        provider: "spawn".into(),
        parent_agent: "agent:1".into(),
        parent_session: parent_session.into(),
        request: seam_host::RequestSnapshot::of(&seam_host::StartRequest::new(
            "x",
            seam_host::ParentRef::top_level("agent:1", "/work"),
        )),
        background: false,
        label: String::new(),
    }
}

/// Two openings of one durable store (two processes, say): each sees the other's run as live
/// while the other holds the store, and as interrupted once it has closed it.
fn runs_are_interrupted_when_the_holder_closes(opener: impl Fn() -> Box<dyn SessionStore>) {
    let first = opener();
    first.commit(vec![open("top", None)]).unwrap();
    let key = first.start_run(run_start("spawn-1", "top")).unwrap();
    // A run's start is batched: the first opener's own read commits it.
    assert_eq!(first.runs_of("top").unwrap().len(), 1);
    let second = opener();
    let name = format!("{second:?}");
    assert_ne!(
        first.id_prefix(),
        second.id_prefix(),
        "{name}: session ids never collide"
    );
    let other = second.start_run(run_start("spawn-1", "top")).unwrap();
    assert_ne!(key, other, "{name}: run keys never collide");
    assert_eq!(
        second.runs_of("top").unwrap()[0].status,
        RunStatus::Running,
        "{name}"
    );
    drop(first);
    let runs = second.runs_of("top").unwrap();
    let run = runs.iter().find(|r| r.key == key).expect("the first's run");
    assert_eq!(run.status, RunStatus::Interrupted, "{name}");
    assert!(
        run.diagnostic.as_deref().unwrap().contains("interrupted"),
        "{name}: {run:?}"
    );
    let own = runs.iter().find(|r| r.key == other).expect("its own run");
    assert_eq!(
        own.status,
        RunStatus::Running,
        "{name}: its own run lives on"
    );
}

#[test]
fn runs_are_interrupted_when_their_store_closes_and_not_while_another_opener_holds_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    runs_are_interrupted_when_the_holder_closes(|| {
        Box::new(SqliteStore::open(&path, StoreLimits::default()).unwrap())
    });
    let check = SqliteStore::open(&path, StoreLimits::default()).unwrap();
    assert_eq!(check.integrity_check().unwrap(), "ok");

    let server = NatsServer::start();
    runs_are_interrupted_when_the_holder_closes(|| {
        Box::new(JetStreamStore::open(&cluster(&server), StoreLimits::default()).unwrap())
    });
}

/// Two openings never number one session's events twice: a writer whose view of a session is
/// stale is refused, naming the session, and its next write reads the session again.
#[test]
fn a_stale_writer_of_a_session_is_refused_and_then_appends_after_the_other() {
    let server = NatsServer::start();
    let a = JetStreamStore::open(&cluster(&server), StoreLimits::default()).unwrap();
    let b = JetStreamStore::open(&cluster(&server), StoreLimits::default()).unwrap();
    a.commit(vec![open("s", None), append("s", "a1")]).unwrap();
    b.commit(vec![append("s", "b1")]).unwrap();
    let err = a.commit(vec![append("s", "a2")]).unwrap_err();
    assert!(
        err.to_string().contains("session `s`") && err.to_string().contains("another process"),
        "{err}"
    );
    a.commit(vec![append("s", "a2")]).unwrap();
    let bodies: Vec<String> = b.events("s").unwrap().into_iter().map(|e| e.body).collect();
    assert_eq!(bodies, ["a1", "b1", "a2"]);
    let seqs: Vec<u64> = a.events("s").unwrap().into_iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 2, 3]);
}

/// A value over the server's `max_payload` is refused with the limit named, never truncated,
/// and its commit writes nothing.
#[test]
fn an_event_over_the_servers_max_payload_is_refused_and_nothing_is_written() {
    let server = NatsServer::start_with("max_payload: 8192");
    let store = JetStreamStore::open(&cluster(&server), StoreLimits::default()).unwrap();
    store
        .commit(vec![open("s", None), append("s", "small")])
        .unwrap();
    let err = store
        .commit(vec![append("s", "x"), append("s", &"y".repeat(9000))])
        .unwrap_err();
    assert!(err.to_string().contains("max_payload"), "{err}");
    let summary = store.session("s").unwrap().unwrap();
    assert_eq!((summary.events, summary.bytes), (1, 5));
    assert_eq!(store.events("s").unwrap().len(), 1);
}

/// A server that is not there fails the opening at once, naming the URL.
#[test]
fn a_store_on_a_server_that_is_not_there_fails_naming_it() {
    let mut server = NatsServer::start();
    let config = cluster(&server);
    server.stop();
    let err = JetStreamStore::open(&config, StoreLimits::default()).unwrap_err();
    assert!(matches!(err, StoreError::Connect { .. }), "{err}");
    assert!(err.to_string().contains(&server.url), "{err}");
}

/// Requests for approval on every backend: kept and replaced by id, listed by tree, answered
/// once (a second answer finds the first), and removed with their tree.
#[test]
fn every_backend_keeps_approvals_answers_each_once_and_removes_them_with_their_tree() {
    use seam_host::approval::{Answer, ApprovalRecord, Status, Subject};
    let record = |id: &str, root: &str| ApprovalRecord {
        id: id.into(),
        session: format!("{root}-child"),
        root: root.into(),
        path: vec!["lead".into(), "run-1".into()],
        subject: Subject::Tool {
            tool: "secret".into(),
            plugin: "secret".into(),
            arguments: serde_json::json!({"prompt": "open"}),
        },
        status: Status::Pending,
        always: false,
        by: None,
        reason: None,
        delivered: false,
        requested_ms: 1,
        answered_ms: None,
    };
    for (store, _keep) in backends(1 << 20) {
        let name = store.name().to_string();
        store
            .commit(vec![
                open("t1", None),
                open("t2", None),
                Write::Approval(Box::new(record("a1", "t1"))),
                Write::Approval(Box::new(record("a2", "t2"))),
            ])
            .unwrap();
        assert_eq!(store.approvals(None).unwrap().len(), 2, "{name}");
        let t1 = store.approvals(Some("t1")).unwrap();
        assert_eq!(t1, vec![record("a1", "t1")], "{name}");

        let allowed = store
            .answer_approval("a1", &Answer::allow("seam approvals", true))
            .unwrap()
            .unwrap();
        assert_eq!(allowed.status, Status::Allowed, "{name}");
        assert!(allowed.always && allowed.answered_ms.is_some(), "{name}");
        // The second answer changes nothing: it reads the first.
        let again = store
            .answer_approval("a1", &Answer::deny("other", None))
            .unwrap()
            .unwrap();
        assert_eq!(again.by.as_deref(), Some("seam approvals"), "{name}");
        assert_eq!(
            store.approval("a1").unwrap(),
            Some(allowed.clone()),
            "{name}"
        );
        assert_eq!(
            store
                .answer_approval("nope", &Answer::allow("x", false))
                .unwrap(),
            None
        );

        // The asker's own write replaces the record under its id.
        let delivered = ApprovalRecord {
            delivered: true,
            ..allowed
        };
        store
            .commit(vec![Write::Approval(Box::new(delivered.clone()))])
            .unwrap();
        assert_eq!(store.approval("a1").unwrap(), Some(delivered), "{name}");

        assert!(store.remove("t1").unwrap(), "{name}");
        assert_eq!(store.approval("a1").unwrap(), None, "{name}");
        assert_eq!(store.approvals(None).unwrap().len(), 1, "{name}");
    }
}

/// Recorded inputs on every backend: kept in the order taken, by tree, an entry written again
/// under its key replaced, and removed with their tree.
#[test]
fn every_backend_keeps_a_trees_recording_in_order_and_removes_it_with_the_tree() {
    use seam_host::cassette::{Entry, Kind};
    let entry = |key: &str, kind: Kind, seq: u64, body: serde_json::Value| Entry {
        key: key.into(),
        kind,
        seq,
        body,
    };
    let write = |root: &str, e: &Entry| Write::Tape {
        root: root.into(),
        entry: Box::new(e.clone()),
        body: e.body.to_string(),
    };
    for (store, _keep) in backends(1 << 20) {
        let name = store.name().to_string();
        let taken = vec![
            entry("root", Kind::Model, 1, serde_json::json!({"reply": "one"})),
            entry(
                "root/call-0-0.1",
                Kind::Model,
                1,
                serde_json::json!({"reply": "child"}),
            ),
            entry("root", Kind::Model, 2, serde_json::json!({"reply": "two"})),
        ];
        let mut writes = vec![open("r1", None), open("r2", None)];
        writes.extend(taken.iter().map(|e| write("r1", e)));
        writes.push(write(
            "r2",
            &entry("root", Kind::Model, 1, serde_json::json!({})),
        ));
        store.commit(writes).unwrap();
        assert_eq!(store.tape("r1").unwrap(), taken, "{name}");
        assert_eq!(store.tape("r2").unwrap().len(), 1, "{name}");
        assert!(store.remove("r1").unwrap(), "{name}");
        assert_eq!(store.tape("r1").unwrap(), Vec::new(), "{name}");
        assert_eq!(store.tape("r2").unwrap().len(), 1, "{name}");
    }
}
