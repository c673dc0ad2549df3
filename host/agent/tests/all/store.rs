//! Durable sessions (contract section 12): write-before-deliver on the bus, continuing a stored
//! session, the size limit, the schema version. The store trait on every backend is tested in
//! seam-tests (`session_stores`), beside the NATS server the JetStream backend needs.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use seam_agent::agent::{AgentSpec, SessionEvent};
use seam_core::store::{MemoryStore, SessionStore, StoreError, StoreLimits, Write};
use seam_core::{ContentBlock, Event, StopReason};
use seam_store_sqlite::{SqliteStore, SCHEMA_VERSION};

use super::support::*;

fn limits(bytes: u64) -> StoreLimits {
    StoreLimits {
        max_session_bytes: bytes,
    }
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
fn a_database_of_a_newer_schema_is_refused_naming_the_file_and_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("newer.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
    }
    let err = SqliteStore::open(&path, StoreLimits::default()).unwrap_err();
    assert!(matches!(err, StoreError::TooNew { found, supported, .. }
        if found == SCHEMA_VERSION + 1 && supported == SCHEMA_VERSION));
    let text = err.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains(&format!("{}", SCHEMA_VERSION + 1)), "{text}");
    // Nothing was written to it.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .unwrap();
    assert_eq!(tables, 0);
}

/// Hosts started together on a new database file (as parallel `seam` commands on a fresh
/// state folder are) all open it: one creates the schema, the others find it made.
#[test]
fn stores_opened_at_once_on_a_new_file_all_open() {
    const OPENERS: usize = 8;
    for _ in 0..4 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join("sessions.db");
        let barrier = std::sync::Barrier::new(OPENERS);
        let opened: Vec<Result<SqliteStore, StoreError>> = std::thread::scope(|scope| {
            let openers: Vec<_> = (0..OPENERS)
                .map(|_| {
                    scope.spawn(|| {
                        barrier.wait();
                        SqliteStore::open(&path, StoreLimits::default())
                    })
                })
                .collect();
            openers.into_iter().map(|o| o.join().unwrap()).collect()
        });
        for store in &opened {
            if let Err(e) = store {
                panic!("a store opened at once with others failed: {e}");
            }
        }
        let store = opened.into_iter().next().unwrap().unwrap();
        store.commit(vec![open("s", None)]).expect("a write");
        assert_eq!(store.integrity_check().unwrap(), "ok");
    }
}

/// Hosts sharing one file (parallel `seam` commands on one state folder) write at once: every
/// commit of each lands, none refused because another wrote between its read and its write.
#[test]
fn stores_sharing_a_file_all_commit_while_others_write() {
    const WRITERS: usize = 4;
    const STEPS: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let barrier = std::sync::Barrier::new(WRITERS);
    std::thread::scope(|scope| {
        for w in 0..WRITERS {
            let (path, barrier) = (&path, &barrier);
            scope.spawn(move || {
                let store = SqliteStore::open(path, StoreLimits::default()).unwrap();
                let id = format!("s{w}");
                barrier.wait();
                store.commit(vec![open(&id, None)]).unwrap();
                for step in 0..STEPS {
                    // An append reads its session's size before it writes.
                    store
                        .commit(vec![append(&id, &format!("\"{step}\""))])
                        .unwrap_or_else(|e| panic!("writer {w}, step {step}: {e}"));
                }
            });
        }
    });
    let store = SqliteStore::open(&path, StoreLimits::default()).unwrap();
    for w in 0..WRITERS {
        assert_eq!(store.events(&format!("s{w}")).unwrap().len(), STEPS);
    }
}

#[test]
fn a_store_that_cannot_be_created_fails_naming_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "not a folder").unwrap();
    let path = file.join("sessions.db");
    let err = SqliteStore::open(&path, StoreLimits::default()).unwrap_err();
    assert!(matches!(err, StoreError::Open { .. }), "{err}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

/// Every event a listener receives is already in the store's journal, and so is the session
/// step that led to it.
#[tokio::test]
async fn the_bus_writes_before_it_delivers_and_a_stored_session_continues() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store: Arc<dyn SessionStore> =
        Arc::new(SqliteStore::open(&path, StoreLimits::default()).unwrap());
    let core = Core::with_store(Duration::from_millis(100), store.clone());
    core.register(
        "spawn",
        all_caps(),
        Arc::new(Spawn {
            agents: core.agents.clone(),
            model: "scripted:child".into(),
        }),
    );
    core.scripts(&[
        ("child", vec![say("child says hi")]),
        ("lead", vec![say("first answer")]),
        ("later", vec![say("second: {prompt}")]),
    ]);
    let missing = Arc::new(Mutex::new(Vec::new()));
    {
        let store = store.clone();
        let missing = missing.clone();
        core.events.subscribe(move |event: Event| {
            let journal = store.journal()?;
            if !journal.contains(&event.to_json()) {
                seam_core::sync::lock(&missing).push(event.to_json());
            }
            Ok(())
        });
    }
    let mut spec = AgentSpec::top_level("scripted:lead", "/work");
    spec.session_id = Some("chat".into());
    let agent = core.agents.create(spec.clone(), None).unwrap();
    let first = agent.run_turn(vec![ContentBlock::text("hello")]).await;
    assert_eq!(first.stop_reason, StopReason::Completed);
    // A run through the service, as a tool would start it.
    let run = core
        .subagents
        .start(
            "spawn",
            seam_core::StartRequest::new("go", agent.as_parent()),
        )
        .unwrap();
    let result = within("the run", run.result()).await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Completed);
    run.dispose().await;
    core.agents.dispose(agent.id()).await;
    assert!(seam_core::sync::lock(&missing).is_empty(), "{missing:?}");

    let stored: Vec<SessionEvent> = store
        .events("chat")
        .unwrap()
        .iter()
        .map(|e| serde_json::from_str(&e.body).unwrap())
        .collect();
    assert_eq!(stored, agent.session().events());
    let runs = store.runs_of("chat").unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].stop_reason.as_deref(), Some("completed"));
    let child = runs[0]
        .child_session
        .clone()
        .expect("the child's session is linked");
    let child_events = store.events(&child).unwrap();
    assert!(
        child_events
            .iter()
            .any(|e| e.body.contains("child says hi")),
        "{child_events:?}"
    );

    // A new agent on the same session starts from its completed turns and appends after them.
    spec.model = "scripted:later".into();
    let again = core.agents.create(spec, None).unwrap();
    assert_eq!(again.session().turns(), 1);
    let second = again.run_turn(vec![ContentBlock::text("more")]).await;
    assert_eq!(seam_core::blocks_text(&second.output), "second: more");
    assert_eq!(again.session().turns(), 2);
    let stored = store.events("chat").unwrap();
    assert_eq!(stored.len(), again.session().events().len());
    assert!(stored.last().unwrap().body.contains("turn/end"));
    core.agents.dispose(again.id()).await;
}

/// A run's events on a store that batches (SQLite) do not wait for their commit: each is
/// delivered after the group commit that made it durable (in the journal when seen), every
/// run's in the order it emitted them, and all of them by the time the bus is flushed.
#[tokio::test]
async fn a_runs_events_are_delivered_after_their_group_commit_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> =
        Arc::new(SqliteStore::open(&dir.path().join("g.db"), StoreLimits::default()).unwrap());
    let core = Core::with_store(Duration::from_millis(100), store.clone());
    core.register(
        "talker",
        all_caps(),
        Fake::new(|ctx, _| async move {
            ctx.ready();
            for n in 0..3 {
                ctx.progress(vec![ContentBlock::text(format!("step {n}"))]);
                tokio::task::yield_now().await;
            }
            Ok(seam_core::SubagentResult::text(
                StopReason::Completed,
                "done",
            ))
        }),
    );
    let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let missing: Arc<Mutex<Vec<String>>> = Arc::default();
    {
        let (store, seen, missing) = (store.clone(), seen.clone(), missing.clone());
        core.events.subscribe(move |event: Event| {
            if !store.journal()?.contains(&event.to_json()) {
                seam_core::sync::lock(&missing).push(event.to_json());
            }
            let (name, id) = match &event {
                Event::SubagentStart { id, .. } => ("start", id),
                Event::SubagentProgress { id, .. } => ("progress", id),
                Event::SubagentEnd { id, .. } => ("end", id),
                _ => return Ok(()),
            };
            seam_core::sync::lock(&seen).push((id.clone(), name.to_string()));
            Ok(())
        });
    }
    let parent = seam_core::ParentRef::top_level("lead", "/work");
    let runs: Vec<_> = (0..20)
        .map(|_| {
            core.subagents
                .start("talker", seam_core::StartRequest::new("go", parent.clone()))
                .unwrap()
        })
        .collect();
    for run in &runs {
        let result = within("a run", run.result()).await.unwrap();
        assert_eq!(result.stop_reason, StopReason::Completed);
    }
    for run in &runs {
        run.dispose().await;
    }
    core.events.flush().unwrap();
    assert!(seam_core::sync::lock(&missing).is_empty(), "{missing:?}");
    let seen = seam_core::sync::lock(&seen).clone();
    for run in &runs {
        let of_run: Vec<&str> = seen
            .iter()
            .filter(|(id, _)| id == run.id())
            .map(|(_, name)| name.as_str())
            .collect();
        assert_eq!(
            of_run,
            ["start", "progress", "progress", "progress", "end"],
            "run {}",
            run.id()
        );
    }
}

/// A session past its limit ends the turn `error`, naming the limit, instead of growing.
#[tokio::test]
async fn a_turn_whose_session_outgrows_its_limit_ends_error_naming_the_limit() {
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new(limits(400)));
    let core = Core::with_store(Duration::from_millis(100), store.clone());
    core.scripts(&[("big", vec![say(&"x".repeat(1000))])]);
    let agent = core
        .agents
        .create(AgentSpec::top_level("scripted:big", "/work"), None)
        .unwrap();
    let outcome = agent.run_turn(vec![ContentBlock::text("hi")]).await;
    assert_eq!(outcome.stop_reason, StopReason::Error);
    let why = outcome.diagnostic.unwrap();
    assert!(why.contains("max_session_mb"), "{why}");
    let id = agent.as_parent().session_id;
    assert!(store.session(&id).unwrap().unwrap().bytes <= 400);
    core.agents.dispose(agent.id()).await;
}

/// Figures for the report (`cargo test -p seam-core --release --test all store::figures --
/// --ignored --nocapture`): appends per second, one commit each, and reloading 10,000 events.
#[test]
#[ignore = "a measurement, not a check"]
fn figures() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db"), StoreLimits::default()).unwrap();
    store.commit(vec![open("s", None)]).unwrap();
    let body = SessionEvent::UserMessage {
        content: vec![ContentBlock::text(
            "a message of about sixty bytes, like a short reply",
        )],
    }
    .to_json();
    let n = 10_000;
    let t = std::time::Instant::now();
    for _ in 0..n {
        store.commit(vec![append("s", &body)]).unwrap();
    }
    let took = t.elapsed();
    println!(
        "{n} appends, one commit each: {took:?} ({:.0}/s)",
        n as f64 / took.as_secs_f64()
    );
    let t = std::time::Instant::now();
    let events = store.events("s").unwrap();
    let parsed: Vec<SessionEvent> = events
        .iter()
        .map(|e| serde_json::from_str(&e.body).unwrap())
        .collect();
    println!(
        "reload and parse {} events: {:?}",
        parsed.len(),
        t.elapsed()
    );
}

/// A journaling memory store whose commits fail, while `failing` is set, as a full disk fails
/// them.
#[derive(Debug)]
struct Flaky {
    inner: MemoryStore,
    failing: std::sync::atomic::AtomicBool,
}

impl Flaky {
    fn fail(&self, on: bool) {
        self.failing.store(on, std::sync::atomic::Ordering::SeqCst);
    }
}

impl SessionStore for Flaky {
    fn id_prefix(&self) -> &str {
        self.inner.id_prefix()
    }
    fn name(&self) -> &str {
        "flaky-disk"
    }
    fn commit(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::Backend("database or disk is full".into()));
        }
        self.inner.commit(writes)
    }
    fn start_run(&self, run: seam_core::store::RunStart) -> Result<i64, StoreError> {
        self.inner.start_run(run)
    }
    fn session(&self, id: &str) -> Result<Option<seam_core::store::SessionSummary>, StoreError> {
        self.inner.session(id)
    }
    fn sessions(&self) -> Result<Vec<seam_core::store::SessionSummary>, StoreError> {
        self.inner.sessions()
    }
    fn events(&self, session: &str) -> Result<Vec<seam_core::store::StoredEvent>, StoreError> {
        self.inner.events(session)
    }
    fn runs_of(&self, session: &str) -> Result<Vec<seam_core::store::RunRecord>, StoreError> {
        self.inner.runs_of(session)
    }
    fn runs_of_child(&self, session: &str) -> Result<Vec<seam_core::store::RunRecord>, StoreError> {
        self.inner.runs_of_child(session)
    }
    fn inbox(&self, session: &str) -> Result<Option<String>, StoreError> {
        self.inner.inbox(session)
    }
    fn spend(&self, session: &str) -> Result<Option<seam_core::store::SpendRecord>, StoreError> {
        self.inner.spend(session)
    }
    fn journal(&self) -> Result<Vec<String>, StoreError> {
        self.inner.journal()
    }
    fn remove(&self, session: &str) -> Result<bool, StoreError> {
        self.inner.remove(session)
    }
    fn gc(&self, cutoff_ms: u64) -> Result<usize, StoreError> {
        self.inner.gc(cutoff_ms)
    }
}

/// A write the store fails (contract section 12) is delivered to no listener: the turn ends
/// `error` naming the store, and the session stays behind (nothing more of it is written or
/// delivered, even once the store works again) until an agent opens it again from the store.
/// Another session goes on; whatever a listener saw is in the store.
#[tokio::test]
async fn an_event_the_store_fails_is_not_delivered_and_its_session_stays_behind() {
    let store = Arc::new(Flaky {
        inner: MemoryStore::journaling(StoreLimits::default()),
        failing: Default::default(),
    });
    let core = Core::with_store(Duration::from_millis(100), store.clone());
    core.scripts(&[("lead", vec![say("one"), say("two"), say("three")])]);
    let mut spec = AgentSpec::top_level("scripted:lead", "/work");
    spec.session_id = Some("a".into());
    let a = core.agents.create(spec.clone(), None).unwrap();
    let mut other = AgentSpec::top_level("scripted:lead", "/work");
    other.session_id = Some("b".into());
    let b = core.agents.create(other, None).unwrap();
    let first = a.run_turn(vec![ContentBlock::text("hello")]).await;
    assert_eq!(first.stop_reason, StopReason::Completed);
    assert!(core.events.store_failure().is_none());
    let seen = core.log.all().len();

    store.fail(true);
    let failed = a.run_turn(vec![ContentBlock::text("again")]).await;
    store.fail(false);
    assert_eq!(failed.stop_reason, StopReason::Error);
    let why = failed.diagnostic.unwrap_or_default();
    assert!(
        why.contains("flaky-disk") && why.contains("disk is full"),
        "{why}"
    );
    assert_eq!(
        core.log.all().len(),
        seen,
        "nothing of the failed turn was delivered"
    );
    let failure = core.events.store_failure().expect("the failure is kept");
    assert!(failure.to_string().contains("flaky-disk"), "{failure}");

    // The store works again, but what this agent holds of `a` is not what the store holds.
    let behind = a.run_turn(vec![ContentBlock::text("and again")]).await;
    assert_eq!(behind.stop_reason, StopReason::Error);
    assert_eq!(
        core.log.all().len(),
        seen,
        "nothing more of `a` was delivered"
    );
    assert_eq!(
        store.events("a").unwrap().len(),
        4,
        "one turn of `a` is stored"
    );

    // Another session goes on.
    let fine = b.run_turn(vec![ContentBlock::text("hi")]).await;
    assert_eq!(fine.stop_reason, StopReason::Completed);
    assert!(core.log.all().len() > seen);
    // An agent continuing `a` from the store writes it again.
    core.agents.dispose(a.id()).await;
    spec.model = "scripted:lead".into();
    let again = core.agents.create(spec, None).unwrap();
    let resumed = again.run_turn(vec![ContentBlock::text("once more")]).await;
    assert_eq!(resumed.stop_reason, StopReason::Completed, "{resumed:?}");

    let journal = store.journal().unwrap();
    for event in core.log.all() {
        assert!(
            journal.contains(&event.to_json()),
            "delivered, not in the store: {}",
            event.to_json()
        );
    }
    core.agents.dispose(b.id()).await;
    core.agents.dispose(again.id()).await;
}
