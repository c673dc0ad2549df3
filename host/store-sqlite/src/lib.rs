//! The SQLite session store: one database file in WAL mode, one transaction per commit (a
//! [`SessionStore`] of `seam-core`, in a crate of its own so that an embedder that keeps
//! sessions elsewhere builds no SQLite).
//!
//!
//! Each opening registers as a holder (a row, and an exclusively locked file in
//! `PATH.holders/`, which the kernel unlocks when the process dies however it dies). Opening the
//! store finds the holders whose lock is free: their runs still `running` are marked
//! `interrupted` with a diagnostic, and so are their sessions cut short mid-turn. The schema is
//! versioned with `PRAGMA user_version`; a newer database is refused, an older one migrated.
//! Openings of one file take turns (an exclusive lock on `PATH.holders/open.lock` while they
//! switch to WAL, migrate, register and recover): hosts started together on a new file would
//! otherwise race to create it, and SQLite refuses the WAL switch at once, without waiting, to
//! all but one.
//!
//! Writes nothing waits on ([`SessionStore::commit_later`], and every run's start) go to a queue
//! that a writer thread of the store's own commits in batches, many runs a transaction: a run
//! then pays for no transaction of its own. So do the events of runs that listeners are to see
//! ([`SessionStore::commit_then`]): each is queued with what to call once it is durable, and the
//! writer commits whatever is queued in one transaction (group commit) and then releases the
//! listeners of every event of the batch, in the order they were queued. Everything else commits
//! at once, and takes the queue with it first, in the same transaction, so the file always holds
//! a prefix of what was written: whatever a listener saw is in it, and so is everything written
//! before.
//!
//! Those callbacks are called by one thread at a time, one after the other, in commit order
//! (the store's *turn*): the writer thread, or a thread whose commit or read took the queue with
//! it, which calls them before it returns. A callback may use the store again on the same thread
//! (its listeners may read or commit): the turn is re-entered, and the callbacks that commit
//! releases are called after the running one returns, by the thread that holds the turn.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use seam_core::approval::{Answer, ApprovalRecord, Status as ApprovalStatus};
use seam_core::store::{
    now_ms, RunKey, RunRecord, RunStart, RunStatus, SessionStore, SessionSummary, SpendRecord,
    StoreError, StoreLimits, StoredEvent, Then, Write,
};
use seam_core::sync::lock;

/// The schema version this build writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 6;

/// Migrations, oldest first: `MIGRATIONS[n]` takes a database from version `n` to `n + 1`.
const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE holders (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        pid INTEGER NOT NULL,
        opened_ms INTEGER NOT NULL
    );
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        agent TEXT NOT NULL,
        parent TEXT,
        working_directory TEXT NOT NULL,
        holder INTEGER,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL,
        events INTEGER NOT NULL DEFAULT 0,
        bytes INTEGER NOT NULL DEFAULT 0,
        open_turn INTEGER NOT NULL DEFAULT 0,
        interrupted INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE events (
        session TEXT NOT NULL,
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        body TEXT NOT NULL,
        at_ms INTEGER NOT NULL,
        PRIMARY KEY (session, seq)
    ) WITHOUT ROWID;
    CREATE TABLE runs (
        key INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        provider TEXT NOT NULL,
        parent_agent TEXT NOT NULL,
        parent_session TEXT NOT NULL,
        request TEXT NOT NULL,
        status TEXT NOT NULL,
        stop_reason TEXT,
        diagnostic TEXT,
        child_session TEXT,
        holder INTEGER NOT NULL,
        started_ms INTEGER NOT NULL,
        ended_ms INTEGER
    );
    CREATE INDEX runs_by_parent ON runs (parent_session);
    CREATE TABLE journal (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL,
        body TEXT NOT NULL,
        at_ms INTEGER NOT NULL
    );
",
    "
    ALTER TABLE runs ADD COLUMN background INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN label TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN announced INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN report TEXT;
    ALTER TABLE runs ADD COLUMN report_pending INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX runs_by_child ON runs (child_session);
    CREATE TABLE inbox (
        session TEXT PRIMARY KEY,
        body TEXT NOT NULL
    ) WITHOUT ROWID;
",
    // Which opening journaled an entry, and from which entry on each opening of a session
    // holds it: what `journal_of` reads. Entries journaled before have no holder.
    "
    ALTER TABLE journal ADD COLUMN holder INTEGER;
    CREATE INDEX journal_by_holder ON journal (holder, seq);
    CREATE TABLE openings (
        session TEXT NOT NULL,
        holder INTEGER NOT NULL,
        after_seq INTEGER NOT NULL,
        PRIMARY KEY (session, holder)
    ) WITHOUT ROWID;
",
    // What each session's account spent and its budget (JSON `SpendRecord`): budgets over the
    // delegation tree.
    "
    CREATE TABLE spend (
        session TEXT PRIMARY KEY,
        body TEXT NOT NULL
    ) WITHOUT ROWID;
",
    // Requests for approval (JSON `ApprovalRecord`), by the top-level session of their tree:
    // kept so that one outlives its process and is answered from another.
    "
    CREATE TABLE approvals (
        id TEXT PRIMARY KEY,
        root TEXT NOT NULL,
        requested_ms INTEGER NOT NULL,
        body TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX approvals_by_root ON approvals (root, requested_ms);
",
    // Recorded inputs of a tree (JSON `cassette::Entry` bodies), in the order they were taken
    // (the rowid): what `seam replay` plays back.
    "
    CREATE TABLE tape (
        root TEXT NOT NULL,
        key TEXT NOT NULL,
        kind TEXT NOT NULL,
        seq INTEGER NOT NULL,
        body TEXT NOT NULL
    );
    CREATE UNIQUE INDEX tape_entries ON tape (root, key, kind, seq);
",
];

/// Sessions, runs and the journal in one SQLite file.
pub struct SqliteStore {
    inner: Arc<Inner>,
    path: PathBuf,
    prefix: String,
    /// The last run key handed out, in this opening's range (see [`SqliteStore::start_run`]).
    last_key: AtomicI64,
    /// The writer thread that commits the queue.
    writer: Option<JoinHandle<()>>,
    /// Locked for as long as this store is open: the proof, to other openers, that its runs are
    /// live.
    _lock: File,
}

/// What the store's users and its writer thread share.
struct Inner {
    conn: Mutex<Connection>,
    queue: Mutex<Queue>,
    queued: Condvar,
    /// Held while committing and then calling the callbacks of what was committed, so that
    /// they are called in commit order (see the module's doc); re-entered by its holder.
    turn: Mutex<()>,
    /// Callbacks of committed (or failed) [`Deferred::Then`] items, in commit order, waiting
    /// for the turn's holder to call them.
    ready: Mutex<VecDeque<(Then, Result<(), StoreError>)>>,
    limits: StoreLimits,
    holder: i64,
    /// The database file, as errors name it.
    name: String,
}

/// Writes waiting for the writer thread, oldest first, each with the time it was made.
#[derive(Default)]
struct Queue {
    items: Vec<(i64, Deferred)>,
    closing: bool,
    /// Whether the writer thread was woken for what is queued (and will take it): later writes
    /// wake it no more, so that a batch costs one wake-up, not one a write.
    woken: bool,
    /// Whether an event whose listeners wait for its commit is queued: the writer then lets
    /// the batch gather for [`LISTENED_WINDOW`] only.
    listened: bool,
}

impl Queue {
    /// Queues `items`; whether the writer thread must be woken for them.
    fn push(&mut self, items: impl IntoIterator<Item = (i64, Deferred)>) -> bool {
        self.items.extend(items);
        !std::mem::replace(&mut self.woken, true)
    }

    /// Queues an event's writes and its callback; whether the writer thread must be woken (also
    /// from a long wait for writes nobody listens to).
    fn push_then(&mut self, at: i64, writes: Vec<Write>, then: Then) -> bool {
        self.items.push((at, Deferred::Then(writes, then)));
        let first = !std::mem::replace(&mut self.listened, true);
        let unwoken = !std::mem::replace(&mut self.woken, true);
        first || unwoken
    }

    /// Everything queued, for one transaction.
    fn take(&mut self) -> Vec<(i64, Deferred)> {
        self.listened = false;
        std::mem::take(&mut self.items)
    }
}

/// One queued write.
enum Deferred {
    Write(Write),
    Start(RunKey, Box<RunStart>),
    /// An event's writes, and what to call once they are durable (or were not made).
    Then(Vec<Write>, Then),
}

thread_local! {
    /// The stores whose turn this thread holds (by address), innermost last.
    static TURNS: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// A store's turn, held by this thread until dropped (nothing, if it already held it).
struct Turn<'a> {
    _guard: Option<MutexGuard<'a, ()>>,
}

impl Turn<'_> {
    /// Whether this thread took the turn here, rather than holding it already (inside a
    /// callback): only the outermost holder calls callbacks, so that none is called while
    /// another is still running (a listener is never re-entered).
    fn outermost(&self) -> bool {
        self._guard.is_some()
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        if self._guard.is_some() {
            TURNS.with(|t| t.borrow_mut().pop());
        }
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .field("holder", &self.inner.holder)
            .finish_non_exhaustive()
    }
}

fn holders_dir(path: &Path) -> PathBuf {
    let mut dir = path.as_os_str().to_owned();
    dir.push(".holders");
    PathBuf::from(dir)
}

fn lock_file(path: &Path, holder: i64) -> PathBuf {
    holders_dir(path).join(format!("{holder}.lock"))
}

/// The diagnostic of a run found live in a process that is gone.
const INTERRUPTED: &str = "interrupted: the process running it ended before the run did";

impl SqliteStore {
    /// Opens (creating it and its folder if needed) the database at `path`, migrates it, and
    /// marks what a dead process left running as interrupted. Fails, naming the path, if the
    /// file cannot be created, opened or written, or was written by a newer schema.
    pub fn open(path: &Path, limits: StoreLimits) -> Result<Self, StoreError> {
        let open_err = |message: String| StoreError::Open {
            path: path.to_path_buf(),
            message,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| open_err(format!("cannot create {}: {e}", dir.display())))?;
        }
        let dir = holders_dir(path);
        std::fs::create_dir_all(&dir)
            .map_err(|e| open_err(format!("cannot create {}: {e}", dir.display())))?;
        // Held until this opening is registered and has recovered; released when dropped.
        let turn = dir.join("open.lock");
        let _turn = File::create(&turn)
            .and_then(|f| f.lock().map(|()| f))
            .map_err(|e| open_err(format!("cannot lock {}: {e}", turn.display())))?;
        let mut conn = Connection::open(path).map_err(|e| open_err(e.to_string()))?;
        let sql = |e: rusqlite::Error| open_err(e.to_string());
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(sql)?;
        // Every transaction takes the write lock as it begins, waiting for it (the busy
        // timeout) if another process holds it. A deferred one that read first and wrote
        // after another process's commit would be refused at once ("database is locked"),
        // with no wait: hosts sharing one file would fail each other's commits.
        conn.set_transaction_behavior(rusqlite::TransactionBehavior::Immediate);
        let found: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(sql)?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: path.to_path_buf(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
        // WAL: a writer never blocks readers, and a commit survives the process being killed.
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
            .map_err(sql)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(open_err(format!("cannot use WAL mode (got `{mode}`)")));
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(sql)?;
        migrate(&mut conn, found).map_err(sql)?;

        let (holder, lock) = register(&mut conn, path)?;
        recover(&mut conn, path, holder).map_err(sql)?;
        let inner = Arc::new(Inner {
            conn: Mutex::new(conn),
            queue: Mutex::default(),
            queued: Condvar::new(),
            turn: Mutex::default(),
            ready: Mutex::default(),
            limits,
            holder,
            name: path.display().to_string(),
        });
        let writer = {
            let inner = inner.clone();
            std::thread::Builder::new()
                .name("seam-store".into())
                .spawn(move || inner.write_queued())
                .map_err(|e| open_err(format!("cannot start the store's writer thread: {e}")))?
        };
        Ok(Self {
            inner,
            path: path.to_path_buf(),
            prefix: format!("s{holder}"),
            last_key: AtomicI64::new(holder << KEY_BITS),
            writer: Some(writer),
            _lock: lock,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `PRAGMA integrity_check`: `ok`, or what is wrong.
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        self.inner
            .settled()?
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .map_err(|e| self.fail(e))
    }
}

/// Run keys of one opening are `holder << KEY_BITS` plus a count: unique across openings without
/// asking the database, so that starting a run needs no transaction of its own. (Keys of schema
/// version 2 were small counts, below every range.)
const KEY_BITS: u32 = 32;

/// How long the writer thread lets queued writes gather before it commits them: what a `kill -9`
/// can take of writes that nobody saw.
const BATCH_WINDOW: std::time::Duration = std::time::Duration::from_millis(2);

/// How long the writer thread lets a batch gather once an event that listeners wait for is
/// queued: how late, at most, they see it (its commit aside). Long enough to commit many runs'
/// events at once, short enough that nobody watching notices.
const LISTENED_WINDOW: std::time::Duration = std::time::Duration::from_micros(250);

/// How long the writer thread waits before it tries a batch that failed (a full disk) again.
const RETRY_WINDOW: std::time::Duration = std::time::Duration::from_secs(1);

impl Inner {
    /// This store's turn (see the module's doc), waiting for it unless this thread holds it.
    fn turn(&self) -> Turn<'_> {
        let me = self as *const Inner as usize;
        if TURNS.with(|t| t.borrow().contains(&me)) {
            return Turn { _guard: None };
        }
        let guard = lock(&self.turn);
        TURNS.with(|t| t.borrow_mut().push(me));
        Turn {
            _guard: Some(guard),
        }
    }

    /// Commits `writes` (all or none) after everything queued, in one transaction, then calls
    /// the callbacks of what was queued: an immediate commit, or (with no writes) what a read
    /// starts from. The outer error: the transaction failed; the inner one: `writes` were
    /// refused, and the queue was committed without them.
    fn commit_now(&self, writes: &[Write]) -> Result<Result<(), StoreError>, StoreError> {
        let turn = self.turn();
        let outcome = {
            let mut conn = lock(&self.conn);
            let queued = lock(&self.queue).take();
            if queued.is_empty() && writes.is_empty() {
                Ok(Ok(()))
            } else {
                self.commit_with(&mut conn, queued, writes)
            }
        };
        if turn.outermost() {
            self.call_ready();
        }
        outcome
    }

    /// The connection, with everything queued committed and its callbacks called: what a read
    /// starts from.
    fn settled(&self) -> Result<MutexGuard<'_, Connection>, StoreError> {
        self.commit_now(&[])??;
        Ok(lock(&self.conn))
    }

    /// Calls the callbacks of what was committed, in commit order; the caller holds the turn.
    /// One at a time, the queue's lock not held, so that a callback may use the store.
    fn call_ready(&self) {
        loop {
            let next = lock(&self.ready).pop_front();
            let Some((then, outcome)) = next else {
                return;
            };
            then(outcome);
        }
    }

    /// Commits `queued`, then `writes` (all or none), in one transaction, and puts the callbacks
    /// of the queued events in line to be called (the caller holds the connection, so they are
    /// in commit order). The outer error: the transaction failed, nothing was written, the
    /// queued writes are queued again (in front, so that the file still holds a prefix of what
    /// was written) and the queued events fail (their listeners never see them, as for an event
    /// committed at once); the inner one: `writes` were refused, and the queue was committed
    /// without them.
    fn commit_with(
        &self,
        conn: &mut Connection,
        queued: Vec<(i64, Deferred)>,
        writes: &[Write],
    ) -> Result<Result<(), StoreError>, StoreError> {
        let mut refused = Vec::new();
        let outcome = self.transact(conn, &queued, writes, &mut refused);
        if queued.is_empty() {
            return outcome;
        }
        let mut ready = lock(&self.ready);
        match &outcome {
            Ok(_) => {
                let mut refused = refused.into_iter();
                for (_, item) in queued {
                    if let Deferred::Then(_, then) = item {
                        let refusal = refused.next().flatten();
                        ready.push_back((then, refusal.map_or(Ok(()), Err)));
                    }
                }
            }
            Err(e) => {
                let mut again = Vec::with_capacity(queued.len());
                for (at, item) in queued {
                    match item {
                        Deferred::Then(_, then) => ready.push_back((then, Err(e.clone()))),
                        item => again.push((at, item)),
                    }
                }
                let mut queue = lock(&self.queue);
                let later = std::mem::replace(&mut queue.items, again);
                queue.items.extend(later);
            }
        }
        outcome
    }

    /// One transaction: `queued` (each write kept or skipped alone), then `writes`. `refused`
    /// gets, for each queued event, the error that kept its writes out, if one did.
    fn transact(
        &self,
        conn: &mut Connection,
        queued: &[(i64, Deferred)],
        writes: &[Write],
        refused: &mut Vec<Option<StoreError>>,
    ) -> Result<Result<(), StoreError>, StoreError> {
        let now = now_ms() as i64;
        let mut tx = conn.transaction().map_err(|e| self.fail(e))?;
        let apply = |c: &Connection| writes.iter().try_for_each(|w| self.apply(c, w, now));
        if queued.is_empty() {
            apply(&tx)?;
            tx.commit().map_err(|e| self.fail(e))?;
            return Ok(Ok(()));
        }
        // The queue is kept whatever becomes of the writes, which are all or none.
        self.apply_queued(&tx, queued, refused)?;
        let outcome = {
            let sp = tx.savepoint().map_err(|e| self.fail(e))?;
            apply(&sp).and_then(|()| sp.commit().map_err(|e| self.fail(e)))
        };
        if let Err(e) = outcome {
            if tx.is_autocommit() {
                // SQLite rolled the whole transaction back (a full disk): nothing is left.
                return Err(e);
            }
            tx.commit().map_err(|e| self.fail(e))?;
            return Ok(Err(e));
        }
        tx.commit().map_err(|e| self.fail(e))?;
        Ok(Ok(()))
    }

    /// Applies queued writes; one that fails is logged and skipped, so that it takes no other
    /// run's record with it (they are writes nothing waited on, so nobody else can be told).
    /// A failure that ended the transaction (SQLite rolls it back itself when the disk is full)
    /// fails them all: the rest would otherwise be written one by one, outside it.
    fn apply_queued(
        &self,
        tx: &Connection,
        queued: &[(i64, Deferred)],
        refused: &mut Vec<Option<StoreError>>,
    ) -> Result<(), StoreError> {
        for (at, item) in queued {
            let outcome = match item {
                Deferred::Write(w) => self.apply(tx, w, *at),
                Deferred::Start(key, run) => self.insert_run(tx, *key, run, *at),
                // An event's writes stop at the first that fails, and its listeners are told
                // nothing (the writes before it are kept, as a queued write's are).
                Deferred::Then(writes, _) => {
                    let outcome = writes.iter().try_for_each(|w| self.apply(tx, w, *at));
                    if let Err(e) = &outcome {
                        refused.push(Some(e.clone()));
                    } else {
                        refused.push(None);
                    }
                    outcome
                }
            };
            if let Err(e) = outcome {
                if tx.is_autocommit() {
                    return Err(e);
                }
                tracing::error!(error = %e, "the session store could not apply a queued write");
            }
        }
        Ok(())
    }

    /// Queues `item`, waking the writer thread.
    fn enqueue(&self, item: Deferred) {
        let wake = lock(&self.queue).push([(now_ms() as i64, item)]);
        if wake {
            self.queued.notify_one();
        }
    }

    /// The writer thread: commits whatever is queued, a batch a transaction, until the store
    /// closes with nothing queued.
    fn write_queued(&self) {
        let mut failing = false;
        loop {
            {
                let mut queue = lock(&self.queue);
                while queue.items.is_empty() && !queue.closing {
                    queue.woken = false;
                    queue = self.queued.wait(queue).unwrap_or_else(|p| p.into_inner());
                }
                // A store that cannot write what is queued at its close gives up on it; the
                // listeners of its events are told nothing.
                if queue.items.is_empty() || (queue.closing && failing) {
                    let left = queue.take();
                    drop(queue);
                    self.give_up(left);
                    return;
                }
                // Let a batch gather: many runs then share one transaction, and a commit made
                // meanwhile (an event someone listens to) takes the queue with it instead. A
                // failed batch is queued again: it is tried again a while later, not at once.
                // Listeners wait for an event: its batch gathers briefly, and one queued
                // during a longer wait ends it.
                let window = if failing {
                    RETRY_WINDOW
                } else if queue.listened {
                    LISTENED_WINDOW
                } else {
                    BATCH_WINDOW
                };
                let long = !queue.listened;
                queue = self
                    .queued
                    .wait_timeout_while(queue, window, |q| !(q.closing || long && q.listened))
                    .map_or_else(|p| p.into_inner().0, |(q, _)| q);
                drop(queue);
            }
            failing = match self.commit_now(&[]).and_then(|refused| refused) {
                Ok(()) => false,
                Err(e) => {
                    tracing::error!(error = %e, "the session store could not commit queued writes");
                    true
                }
            };
        }
    }
}

impl Inner {
    /// Drops writes the store could not commit before it closed, failing the events among
    /// them.
    fn give_up(&self, left: Vec<(i64, Deferred)>) {
        let turn = self.turn();
        {
            let mut ready = lock(&self.ready);
            for (_, item) in left {
                if let Deferred::Then(_, then) = item {
                    let e = StoreError::Failed {
                        store: self.name.clone(),
                        message: "the store closed before it could write this".into(),
                    };
                    ready.push_back((then, Err(e)));
                }
            }
        }
        if turn.outermost() {
            self.call_ready();
        }
    }

    /// A failure of this store's database, naming its file.
    fn fail(&self, e: rusqlite::Error) -> StoreError {
        StoreError::Failed {
            store: self.name.clone(),
            message: e.to_string(),
        }
    }
}

impl SqliteStore {
    fn fail(&self, e: rusqlite::Error) -> StoreError {
        self.inner.fail(e)
    }
}

/// Brings the schema up to [`SCHEMA_VERSION`]. The version is read again under the write lock
/// (an immediate transaction): processes opening a new file at once would otherwise each see
/// version 0 and each create the tables, and all but the first fail ("table already exists").
fn migrate(conn: &mut Connection, seen: i64) -> rusqlite::Result<()> {
    if seen >= SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn.transaction()?;
    let from: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if from >= SCHEMA_VERSION {
        return Ok(());
    }
    for step in &MIGRATIONS[from as usize..SCHEMA_VERSION as usize] {
        tx.execute_batch(step)?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()
}

/// Adds this opening to the holders and takes its lock, in one write transaction: the row
/// becomes visible to other openers (whose [`recover`] takes the same write lock) only once
/// its lock is held, so none of them can take a holder that is still starting for a dead one.
fn register(conn: &mut Connection, path: &Path) -> Result<(i64, File), StoreError> {
    let open_err = |message: String| StoreError::Open {
        path: path.to_path_buf(),
        message,
    };
    let sql = |e: rusqlite::Error| open_err(e.to_string());
    let tx = conn.transaction().map_err(sql)?;
    tx.execute(
        "INSERT INTO holders (pid, opened_ms) VALUES (?1, ?2)",
        params![std::process::id(), now_ms() as i64],
    )
    .map_err(sql)?;
    let holder = tx.last_insert_rowid();
    let file = lock_file(path, holder);
    let lock = File::create(&file)
        .and_then(|lock| lock.try_lock().map(|()| lock).map_err(std::io::Error::from))
        .map_err(|e| open_err(format!("cannot lock {}: {e}", file.display())))?;
    if let Err(e) = tx.commit() {
        let _ = std::fs::remove_file(&file);
        return Err(sql(e));
    }
    Ok((holder, lock))
}

/// Marks the runs and open turns of every holder whose lock is free as interrupted. The holders
/// are read and judged under the write lock, so that a holder registering meanwhile is either
/// not seen or seen with its lock held (see [`register`]).
fn recover(conn: &mut Connection, path: &Path, me: i64) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    let holders: Vec<i64> = {
        let mut stmt = tx.prepare("SELECT id FROM holders WHERE id != ?1")?;
        let rows = stmt.query_map([me], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let dead: Vec<i64> = holders
        .into_iter()
        .filter(|h| match File::open(lock_file(path, *h)) {
            // Free: its process is gone (the kernel released the lock with it).
            Ok(f) => f.try_lock().is_ok(),
            Err(_) => true,
        })
        .collect();
    if dead.is_empty() {
        return Ok(());
    }
    let now = now_ms() as i64;
    for h in &dead {
        tx.execute(
            "UPDATE runs SET status = 'interrupted', diagnostic = ?1, ended_ms = ?2
             WHERE holder = ?3 AND status = 'running'",
            params![INTERRUPTED, now, h],
        )?;
        tx.execute(
            "UPDATE sessions SET interrupted = 1, open_turn = 0 WHERE holder = ?1 AND open_turn = 1",
            [h],
        )?;
        tx.execute("DELETE FROM holders WHERE id = ?1", [h])?;
    }
    tx.commit()?;
    for h in dead {
        let _ = std::fs::remove_file(lock_file(path, h));
    }
    Ok(())
}

impl Inner {
    fn insert_run(
        &self,
        tx: &Connection,
        key: RunKey,
        run: &RunStart,
        now: i64,
    ) -> Result<(), StoreError> {
        tx.prepare_cached(
            "INSERT INTO runs (key, run_id, provider, parent_agent, parent_session, request, status,
                               holder, started_ms, background, label)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running', ?7, ?8, ?9, ?10)",
        )
        .and_then(|mut s| {
            s.execute(params![
                key,
                run.run_id,
                run.provider,
                run.parent_agent,
                run.parent_session,
                run.request.to_json(),
                self.holder,
                now,
                i64::from(run.background),
                run.label
            ])
        })
        .map_err(|e| self.fail(e))?;
        Ok(())
    }

    fn apply(&self, tx: &Connection, write: &Write, now: i64) -> Result<(), StoreError> {
        match write {
            Write::OpenSession {
                id,
                agent,
                parent,
                working_directory,
            } => {
                tx.execute(
                    "INSERT INTO sessions (id, agent, parent, working_directory, holder, created_ms, updated_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
                     ON CONFLICT (id) DO UPDATE SET holder = ?5, interrupted = 0",
                    params![id, agent, parent, working_directory, self.holder, now],
                )
                .map_err(|e| self.fail(e))?;
                // Journal seqs only grow (AUTOINCREMENT): every entry after this one's last is
                // above it. A second opening by the same holder keeps the first's start.
                tx.prepare_cached(
                    "INSERT INTO openings (session, holder, after_seq)
                     VALUES (?1, ?2, (SELECT IFNULL(MAX(seq), 0) FROM journal))
                     ON CONFLICT (session, holder) DO NOTHING",
                )
                .and_then(|mut s| s.execute(params![id, self.holder]))
                .map_err(|e| self.fail(e))?;
            }
            Write::Append {
                session,
                kind,
                body,
            } => {
                let row: Option<(i64, i64)> = tx
                    .prepare_cached("SELECT events, bytes FROM sessions WHERE id = ?1")
                    .and_then(|mut s| {
                        s.query_row([&session], |r| Ok((r.get(0)?, r.get(1)?)))
                            .optional()
                    })
                    .map_err(|e| self.fail(e))?;
                let Some((events, bytes)) = row else {
                    return Err(StoreError::NoSession(session.clone()));
                };
                let grown = bytes as u64 + body.len() as u64;
                if grown > self.limits.max_session_bytes {
                    return Err(StoreError::SessionFull {
                        session: session.clone(),
                        limit_bytes: self.limits.max_session_bytes,
                    });
                }
                let open_turn = match kind.as_str() {
                    "turn/start" => Some(1),
                    "turn/end" => Some(0),
                    _ => None,
                };
                tx.prepare_cached(
                    "INSERT INTO events (session, seq, kind, body, at_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .and_then(|mut s| s.execute(params![session, events + 1, kind, body, now]))
                .map_err(|e| self.fail(e))?;
                tx.prepare_cached(
                    "UPDATE sessions SET events = ?2, bytes = ?3, updated_ms = ?4,
                     open_turn = COALESCE(?5, open_turn), holder = ?6 WHERE id = ?1",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        session,
                        events + 1,
                        grown as i64,
                        now,
                        open_turn,
                        self.holder
                    ])
                })
                .map_err(|e| self.fail(e))?;
            }
            Write::Bus { name, body } => {
                tx.prepare_cached(
                    "INSERT INTO journal (name, body, at_ms, holder) VALUES (?1, ?2, ?3, ?4)",
                )
                .and_then(|mut s| s.execute(params![name, body, now, self.holder]))
                .map_err(|e| self.fail(e))?;
            }
            Write::RunEnded {
                run,
                stop_reason,
                diagnostic,
            } => {
                tx.prepare_cached(
                    "UPDATE runs SET status = 'ended', stop_reason = ?2, diagnostic = ?3, ended_ms = ?4
                     WHERE key = ?1",
                )
                .and_then(|mut s| s.execute(params![run, stop_reason, diagnostic, now]))
                .map_err(|e| self.fail(e))?;
            }
            Write::RunInterrupted { run, diagnostic } => {
                tx.prepare_cached(
                    "UPDATE runs SET status = 'interrupted', stop_reason = 'aborted', diagnostic = ?2,
                     ended_ms = ?3 WHERE key = ?1",
                )
                .and_then(|mut s| s.execute(params![run, diagnostic, now]))
                .map_err(|e| self.fail(e))?;
            }
            Write::LinkChild { run, session } => {
                tx.prepare_cached("UPDATE runs SET child_session = ?2 WHERE key = ?1")
                    .and_then(|mut s| s.execute(params![run, session]))
                    .map_err(|e| self.fail(e))?;
            }
            Write::Announced { run } => {
                tx.prepare_cached("UPDATE runs SET announced = 1 WHERE key = ?1")
                    .and_then(|mut s| s.execute([run]))
                    .map_err(|e| self.fail(e))?;
            }
            Write::Report {
                run,
                text,
                next_step,
            } => {
                tx.prepare_cached(
                    "UPDATE runs SET report = ?2, report_pending = MAX(report_pending, ?3)
                     WHERE key = ?1",
                )
                .and_then(|mut s| s.execute(params![run, text, i64::from(*next_step)]))
                .map_err(|e| self.fail(e))?;
            }
            Write::ReportDelivered { run } => {
                tx.prepare_cached("UPDATE runs SET report_pending = 0 WHERE key = ?1")
                    .and_then(|mut s| s.execute([run]))
                    .map_err(|e| self.fail(e))?;
            }
            Write::Spend {
                session,
                added,
                limits,
            } => {
                let before = read_spend(tx, session).map_err(|e| self.fail(e))?;
                let after = before.unwrap_or_default().add(*added, *limits);
                let body = serde_json::to_string(&after)
                    .map_err(|e| StoreError::Backend(format!("cannot write spend: {e}")))?;
                tx.prepare_cached(
                    "INSERT INTO spend (session, body) VALUES (?1, ?2)
                     ON CONFLICT (session) DO UPDATE SET body = ?2",
                )
                .and_then(|mut s| s.execute(params![session, body]))
                .map_err(|e| self.fail(e))?;
            }
            Write::Tape { root, entry, body } => {
                tx.prepare_cached(
                    "INSERT OR REPLACE INTO tape (root, key, kind, seq, body)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        root,
                        entry.key,
                        entry.kind.as_str(),
                        entry.seq.min(i64::MAX as u64) as i64,
                        body
                    ])
                })
                .map_err(|e| self.fail(e))?;
            }
            Write::Approval(record) => {
                let body = serde_json::to_string(record)
                    .map_err(|e| StoreError::Backend(format!("cannot write approval: {e}")))?;
                tx.prepare_cached(
                    "INSERT INTO approvals (id, root, requested_ms, body) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (id) DO UPDATE SET body = ?4",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        record.id,
                        record.root,
                        record.requested_ms.min(i64::MAX as u64) as i64,
                        body
                    ])
                })
                .map_err(|e| self.fail(e))?;
            }
            Write::Inbox { session, body } => match body {
                Some(body) => {
                    tx.prepare_cached(
                        "INSERT INTO inbox (session, body) VALUES (?1, ?2)
                         ON CONFLICT (session) DO UPDATE SET body = ?2",
                    )
                    .and_then(|mut s| s.execute(params![session, body]))
                    .map_err(|e| self.fail(e))?;
                }
                None => {
                    tx.prepare_cached("DELETE FROM inbox WHERE session = ?1")
                        .and_then(|mut s| s.execute([session]))
                        .map_err(|e| self.fail(e))?;
                }
            },
        }
        Ok(())
    }
}

/// A session's spend record; a body that does not parse reads as a fault of the file.
fn read_approval(conn: &Connection, id: &str) -> rusqlite::Result<Option<ApprovalRecord>> {
    let body: Option<String> = conn
        .prepare_cached("SELECT body FROM approvals WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?;
    body.map(|b| parse_approval(&b)).transpose()
}

fn parse_approval(body: &str) -> rusqlite::Result<ApprovalRecord> {
    serde_json::from_str(body).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })
}

fn read_spend(conn: &Connection, session: &str) -> rusqlite::Result<Option<SpendRecord>> {
    let body: Option<String> = conn
        .prepare_cached("SELECT body FROM spend WHERE session = ?1")?
        .query_row([session], |r| r.get(0))
        .optional()?;
    body.map(|b| {
        serde_json::from_str(&b).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
        })
    })
    .transpose()
}

/// The columns [`run_record`] reads, in its order.
const RUN: &str = "SELECT key, run_id, provider, parent_agent, parent_session, request, status, \
                   stop_reason, diagnostic, child_session, started_ms, ended_ms, background, label, \
                   announced, report, report_pending FROM runs";

fn run_record(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRecord> {
    let status: String = r.get(6)?;
    Ok(RunRecord {
        key: r.get(0)?,
        start: RunStart {
            run_id: r.get(1)?,
            provider: r.get(2)?,
            parent_agent: r.get(3)?,
            parent_session: r.get(4)?,
            request: {
                let text: String = r.get(5)?;
                serde_json::from_str(&text).map_err(|e| {
                    rusqlite::Error::FromSqlConversionFailure(
                        5,
                        rusqlite::types::Type::Text,
                        Box::new(e),
                    )
                })?
            },
            background: r.get::<_, i64>(12)? != 0,
            label: r.get(13)?,
        },
        status: RunStatus::parse(&status).unwrap_or(RunStatus::Interrupted),
        stop_reason: r.get(7)?,
        diagnostic: r.get(8)?,
        child_session: r.get(9)?,
        started_ms: r.get::<_, i64>(10)? as u64,
        ended_ms: r.get::<_, Option<i64>>(11)?.map(|v| v as u64),
        announced: r.get::<_, i64>(14)? != 0,
        report: r.get(15)?,
        report_pending: r.get::<_, i64>(16)? != 0,
    })
}

impl SqliteStore {
    /// The runs whose `column` (a constant of this file, never input) is `value`, oldest first.
    fn runs_where(&self, column: &'static str, value: &str) -> Result<Vec<RunRecord>, StoreError> {
        let conn = self.inner.settled()?;
        let mut stmt = conn
            .prepare_cached(&format!("{RUN} WHERE {column} = ?1 ORDER BY key"))
            .map_err(|e| self.fail(e))?;
        let rows = stmt
            .query_map([value], run_record)
            .map_err(|e| self.fail(e))?;
        rows.collect::<rusqlite::Result<_>>()
            .map_err(|e| self.fail(e))
    }
}

fn summary(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionSummary> {
    Ok(SessionSummary {
        id: r.get(0)?,
        agent: r.get(1)?,
        parent: r.get(2)?,
        working_directory: r.get(3)?,
        created_ms: r.get::<_, i64>(4)? as u64,
        updated_ms: r.get::<_, i64>(5)? as u64,
        events: r.get::<_, i64>(6)? as u64,
        bytes: r.get::<_, i64>(7)? as u64,
        interrupted: r.get::<_, i64>(8)? != 0,
    })
}

const SUMMARY: &str =
    "SELECT id, agent, parent, working_directory, created_ms, updated_ms, events, \
                       bytes, interrupted FROM sessions";

/// `session` and the child sessions of every run below it.
fn subtree(tx: &Transaction<'_>, session: &str) -> rusqlite::Result<Vec<String>> {
    let mut out = vec![session.to_string()];
    let mut i = 0;
    let mut stmt = tx.prepare(
        "SELECT child_session FROM runs WHERE parent_session = ?1 AND child_session IS NOT NULL",
    )?;
    while i < out.len() {
        let children: Vec<String> = stmt
            .query_map([&out[i]], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for c in children {
            if !out.contains(&c) {
                out.push(c);
            }
        }
        i += 1;
    }
    Ok(out)
}

fn remove_tree(tx: &Transaction<'_>, session: &str) -> rusqlite::Result<bool> {
    let tree = subtree(tx, session)?;
    let mut had = false;
    for s in &tree {
        tx.execute("DELETE FROM events WHERE session = ?1", [s])?;
        tx.execute("DELETE FROM inbox WHERE session = ?1", [s])?;
        tx.execute("DELETE FROM spend WHERE session = ?1", [s])?;
        tx.execute("DELETE FROM approvals WHERE root = ?1", [s])?;
        tx.execute("DELETE FROM tape WHERE root = ?1", [s])?;
        tx.execute("DELETE FROM openings WHERE session = ?1", [s])?;
        tx.execute("DELETE FROM runs WHERE parent_session = ?1", [s])?;
        let n = tx.execute("DELETE FROM sessions WHERE id = ?1", [s])?;
        had |= s == session && n > 0;
    }
    Ok(had)
}

impl SessionStore for SqliteStore {
    fn id_prefix(&self) -> &str {
        &self.prefix
    }

    fn name(&self) -> &str {
        &self.inner.name
    }

    fn commit(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        self.inner.commit_now(&writes)?
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.inner.commit_now(&[])?
    }

    /// Queues the event's writes for the writer thread's next batch (see the module's doc).
    fn commit_then(&self, writes: Vec<Write>, then: Then) {
        let wake = lock(&self.inner.queue).push_then(now_ms() as i64, writes, then);
        if wake {
            self.inner.queued.notify_one();
        }
    }

    fn commit_later(&self, writes: Vec<Write>) {
        let now = now_ms() as i64;
        let wake =
            lock(&self.inner.queue).push(writes.into_iter().map(|w| (now, Deferred::Write(w))));
        if wake {
            self.inner.queued.notify_one();
        }
    }

    /// Queues the run's record (see the module's doc): its key is this opening's next.
    fn start_run(&self, run: RunStart) -> Result<RunKey, StoreError> {
        let key = self.last_key.fetch_add(1, Ordering::Relaxed) + 1;
        self.inner.enqueue(Deferred::Start(key, Box::new(run)));
        Ok(key)
    }

    fn session(&self, id: &str) -> Result<Option<SessionSummary>, StoreError> {
        self.inner
            .settled()?
            .query_row(&format!("{SUMMARY} WHERE id = ?1"), [id], summary)
            .optional()
            .map_err(|e| self.fail(e))
    }

    fn sessions(&self) -> Result<Vec<SessionSummary>, StoreError> {
        let conn = self.inner.settled()?;
        let mut stmt = conn
            .prepare(&format!("{SUMMARY} ORDER BY updated_ms DESC, id DESC"))
            .map_err(|e| self.fail(e))?;
        let rows = stmt.query_map([], summary).map_err(|e| self.fail(e))?;
        rows.collect::<rusqlite::Result<_>>()
            .map_err(|e| self.fail(e))
    }

    fn events(&self, session: &str) -> Result<Vec<StoredEvent>, StoreError> {
        let conn = self.inner.settled()?;
        let mut stmt = conn
            .prepare_cached(
                "SELECT seq, kind, body, at_ms FROM events WHERE session = ?1 ORDER BY seq",
            )
            .map_err(|e| self.fail(e))?;
        let rows = stmt
            .query_map([session], |r| {
                Ok(StoredEvent {
                    seq: r.get::<_, i64>(0)? as u64,
                    kind: r.get(1)?,
                    body: r.get(2)?,
                    at_ms: r.get::<_, i64>(3)? as u64,
                })
            })
            .map_err(|e| self.fail(e))?;
        rows.collect::<rusqlite::Result<_>>()
            .map_err(|e| self.fail(e))
    }

    fn runs_of(&self, session: &str) -> Result<Vec<RunRecord>, StoreError> {
        self.runs_where("parent_session", session)
    }

    fn runs_of_child(&self, session: &str) -> Result<Vec<RunRecord>, StoreError> {
        self.runs_where("child_session", session)
    }

    fn spend(&self, session: &str) -> Result<Option<SpendRecord>, StoreError> {
        let conn = self.inner.settled()?;
        read_spend(&conn, session).map_err(|e| self.fail(e))
    }

    fn inbox(&self, session: &str) -> Result<Option<String>, StoreError> {
        self.inner
            .settled()?
            .query_row(
                "SELECT body FROM inbox WHERE session = ?1",
                [session],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.fail(e))
    }

    fn approvals(&self, root: Option<&str>) -> Result<Vec<ApprovalRecord>, StoreError> {
        let conn = self.inner.settled()?;
        let mut stmt = conn
            .prepare(
                "SELECT body FROM approvals WHERE ?1 IS NULL OR root = ?1
                 ORDER BY requested_ms, id",
            )
            .map_err(|e| self.fail(e))?;
        let rows = stmt
            .query_map([root], |r| r.get::<_, String>(0))
            .map_err(|e| self.fail(e))?;
        rows.map(|body| body.and_then(|b| parse_approval(&b)))
            .collect::<rusqlite::Result<_>>()
            .map_err(|e| self.fail(e))
    }

    fn tape(&self, root: &str) -> Result<Vec<seam_core::cassette::Entry>, StoreError> {
        let conn = self.inner.settled()?;
        let mut stmt = conn
            .prepare("SELECT key, kind, seq, body FROM tape WHERE root = ?1 ORDER BY rowid")
            .map_err(|e| self.fail(e))?;
        let rows = stmt
            .query_map([root], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })
            .map_err(|e| self.fail(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (key, kind, seq, body) = row.map_err(|e| self.fail(e))?;
            let (Some(kind), Ok(body)) = (
                seam_core::cassette::Kind::parse(&kind),
                serde_json::from_str(&body),
            ) else {
                return Err(StoreError::Backend(format!(
                    "{}: an unreadable recorded entry of session `{root}` (`{key}`, {kind} {seq})",
                    self.inner.name
                )));
            };
            out.push(seam_core::cassette::Entry {
                key,
                kind,
                seq: seq.max(0) as u64,
                body,
            });
        }
        Ok(out)
    }

    fn approval(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        let conn = self.inner.settled()?;
        read_approval(&conn, id).map_err(|e| self.fail(e))
    }

    fn answer_approval(
        &self,
        id: &str,
        answer: &Answer,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        let mut conn = self.inner.settled()?;
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| self.fail(e))?;
        let Some(record) = read_approval(&tx, id).map_err(|e| self.fail(e))? else {
            return Ok(None);
        };
        if record.status != ApprovalStatus::Pending {
            return Ok(Some(record));
        }
        let record = record.answered(answer, now_ms());
        let body = serde_json::to_string(&record)
            .map_err(|e| StoreError::Backend(format!("cannot write approval: {e}")))?;
        tx.execute(
            "UPDATE approvals SET body = ?2 WHERE id = ?1",
            params![id, body],
        )
        .map_err(|e| self.fail(e))?;
        tx.commit().map_err(|e| self.fail(e))?;
        Ok(Some(record))
    }

    fn journal(&self) -> Result<Vec<String>, StoreError> {
        let conn = self.inner.settled()?;
        let mut stmt = conn
            .prepare("SELECT body FROM journal ORDER BY seq")
            .map_err(|e| self.fail(e))?;
        let rows = stmt.query_map([], |r| r.get(0)).map_err(|e| self.fail(e))?;
        rows.collect::<rusqlite::Result<_>>()
            .map_err(|e| self.fail(e))
    }

    fn journal_of(&self, session: &str) -> Result<Vec<String>, StoreError> {
        let conn = self.inner.settled()?;
        let mut stmt = conn
            .prepare(
                "SELECT j.body FROM openings o
                 JOIN journal j ON j.holder = o.holder AND j.seq > o.after_seq
                 WHERE o.session = ?1 ORDER BY j.seq",
            )
            .map_err(|e| self.fail(e))?;
        let rows = stmt
            .query_map([session], |r| r.get(0))
            .map_err(|e| self.fail(e))?;
        rows.collect::<rusqlite::Result<_>>()
            .map_err(|e| self.fail(e))
    }

    fn remove(&self, session: &str) -> Result<bool, StoreError> {
        let mut conn = self.inner.settled()?;
        let tx = conn.transaction().map_err(|e| self.fail(e))?;
        let had = remove_tree(&tx, session).map_err(|e| self.fail(e))?;
        tx.commit().map_err(|e| self.fail(e))?;
        Ok(had)
    }

    fn gc(&self, cutoff_ms: u64) -> Result<usize, StoreError> {
        let cutoff_ms = cutoff_ms.min(i64::MAX as u64);
        let mut conn = self.inner.settled()?;
        let tx = conn.transaction().map_err(|e| self.fail(e))?;
        let old: Vec<String> = {
            let mut stmt = tx
                .prepare("SELECT id FROM sessions WHERE parent IS NULL AND updated_ms < ?1")
                .map_err(|e| self.fail(e))?;
            let rows = stmt
                .query_map([cutoff_ms as i64], |r| r.get(0))
                .map_err(|e| self.fail(e))?;
            rows.collect::<rusqlite::Result<_>>()
                .map_err(|e| self.fail(e))?
        };
        for id in &old {
            remove_tree(&tx, id).map_err(|e| self.fail(e))?;
        }
        tx.execute("DELETE FROM journal WHERE at_ms < ?1", [cutoff_ms as i64])
            .map_err(|e| self.fail(e))?;
        tx.commit().map_err(|e| self.fail(e))?;
        Ok(old.len())
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        lock(&self.inner.queue).closing = true;
        self.inner.queued.notify_one();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
        // A clean close: whatever is still running did not settle, and no process holds it now.
        let Ok(conn) = self.inner.settled() else {
            return;
        };
        let _ = conn.execute(
            "UPDATE runs SET status = 'interrupted', diagnostic = ?1, ended_ms = ?2
             WHERE holder = ?3 AND status = 'running'",
            params![
                "interrupted: the host closed its session store before the run settled",
                now_ms() as i64,
                self.inner.holder
            ],
        );
        let _ = conn.execute("DELETE FROM holders WHERE id = ?1", [self.inner.holder]);
        let _ = std::fs::remove_file(lock_file(&self.path, self.inner.holder));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_one_database_is_migrated_and_its_runs_read_as_foreground() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("old.db");
        {
            let conn = Connection::open(&path).expect("a database");
            conn.execute_batch(MIGRATIONS[0]).expect("the first schema");
            // What version 1 wrote for a request.
            let request = r#"{"prompt":[{"type":"text","value":"x"}],"parent":{"id":"agent:1","session-id":"p","working-directory":"/","depth":0},"agent-options":null,"output-schema":null,"max-depth":null,"tool-filter":null,"persona":null}"#;
            conn.execute(
                "INSERT INTO runs (run_id, provider, parent_agent, parent_session, request, status,
                                   holder, started_ms, stop_reason)
                 VALUES ('spawn-1', 'spawn', 'agent:1', 'p', ?1, 'ended', 0, 1, 'completed')",
                [request],
            )
            .expect("a run");
            conn.pragma_update(None, "user_version", 1)
                .expect("the version");
        }
        let store = SqliteStore::open(&path, StoreLimits::default()).expect("migrated");
        let runs = store.runs_of("p").expect("the runs");
        assert_eq!(runs.len(), 1);
        assert!(!runs[0].start.background && !runs[0].announced && !runs[0].report_pending);
        assert_eq!(store.inbox("p").expect("an inbox lookup"), None);
        let version: i64 = lock(&store.inner.conn)
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .expect("the version");
        assert_eq!(version, SCHEMA_VERSION);
    }

    #[test]
    fn a_sessions_journal_is_what_each_of_its_openings_journaled_from_then_on() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("journal.db");
        let bus = |body: &str| Write::Bus {
            name: "e".into(),
            body: body.into(),
        };
        let open = || Write::OpenSession {
            id: "s".into(),
            agent: "agent:0".into(),
            parent: None,
            working_directory: "/".into(),
        };
        let first = SqliteStore::open(&path, StoreLimits::default()).expect("opens");
        let other = SqliteStore::open(&path, StoreLimits::default()).expect("opens again");
        first.commit(vec![bus("loaded")]).expect("a write");
        first.commit(vec![open(), bus("created")]).expect("a write");
        other.commit(vec![bus("another process")]).expect("a write");
        first.commit(vec![bus("ended")]).expect("a write");
        drop(first);
        let second = SqliteStore::open(&path, StoreLimits::default()).expect("reopens");
        second.commit(vec![bus("loaded again")]).expect("a write");
        second
            .commit(vec![open(), bus("continued")])
            .expect("a write");
        assert_eq!(
            other.journal_of("s").expect("the journal"),
            ["created", "ended", "continued"]
        );
        assert!(second.remove("s").expect("a removal"));
        assert!(second.journal_of("s").expect("the journal").is_empty());
    }

    fn run(id: &str, parent_session: &str) -> RunStart {
        let parent = seam_core::types::ParentRef {
            id: "agent:1".into(),
            session_id: parent_session.into(),
            working_directory: "/".into(),
            depth: 0,
        };
        RunStart {
            run_id: id.into(),
            provider: "spawn".into(),
            parent_agent: parent.id.clone(),
            parent_session: parent_session.into(),
            request: seam_core::types::RequestSnapshot {
                prompt: Vec::new(),
                parent,
                agent_options: None,
                output_schema: None,
                max_depth: None,
                tool_filter: None,
                persona: None,
                budget: None,
                scope: None,
                approver: None,
            },
            background: false,
            label: String::new(),
        }
    }

    fn small() -> StoreLimits {
        StoreLimits {
            max_session_bytes: 64,
        }
    }

    /// An event for [`SessionStore::commit_then`]: its journal entry, and a callback that
    /// records its number and whether the store held the entry when it was called (read
    /// through the store from inside the callback, as a listener may).
    fn listened(
        store: &Arc<SqliteStore>,
        n: usize,
        seen: &Arc<Mutex<Vec<(usize, bool)>>>,
        done: Option<std::sync::mpsc::Sender<()>>,
    ) {
        let body = format!("{{\"n\":{n}}}");
        let (reader, seen) = (store.clone(), seen.clone());
        let entry = body.clone();
        store.commit_then(
            vec![Write::Bus {
                name: "subagent/start".into(),
                body,
            }],
            Box::new(move |outcome| {
                outcome.expect("committed");
                let held = reader.journal().expect("the journal").contains(&entry);
                seen.lock().unwrap().push((n, held));
                if let Some(done) = done {
                    let _ = done.send(());
                }
            }),
        );
    }

    #[test]
    fn events_are_released_in_order_once_committed_by_the_writer_or_any_later_commit() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let store = Arc::new(SqliteStore::open(&dir.path().join("then.db"), small()).unwrap());
        let seen: Arc<Mutex<Vec<(usize, bool)>>> = Arc::default();

        // The writer thread releases them by itself, after their commit.
        let (tx, rx) = std::sync::mpsc::channel();
        for n in 0..3 {
            listened(&store, n, &seen, (n == 2).then(|| tx.clone()));
        }
        rx.recv().expect("the writer thread released the last one");
        assert_eq!(*seen.lock().unwrap(), [(0, true), (1, true), (2, true)]);

        // A commit made at once releases what was queued before it, before it returns.
        for n in 3..6 {
            listened(&store, n, &seen, None);
        }
        store
            .commit(vec![Write::Bus {
                name: "subagent/end".into(),
                body: "{}".into(),
            }])
            .expect("a commit");
        let now: Vec<usize> = seen.lock().unwrap().iter().map(|(n, _)| *n).collect();
        assert_eq!(now, [0, 1, 2, 3, 4, 5]);

        // So do a read and a flush.
        listened(&store, 6, &seen, None);
        store.journal().expect("a read");
        listened(&store, 7, &seen, None);
        store.flush().expect("a flush");
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 8);
        assert!(
            seen.iter().enumerate().all(|(i, s)| *s == (i, true)),
            "{seen:?}"
        );
    }

    #[test]
    fn events_queued_at_the_close_are_committed_and_released_before_it_ends() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("close.db");
        let store = SqliteStore::open(&path, small()).unwrap();
        let released: Arc<Mutex<Vec<usize>>> = Arc::default();
        for n in 0..4 {
            let released = released.clone();
            store.commit_then(
                vec![Write::Bus {
                    name: "subagent/start".into(),
                    body: format!("{n}"),
                }],
                Box::new(move |outcome| {
                    outcome.expect("committed");
                    released.lock().unwrap().push(n);
                }),
            );
        }
        drop(store);
        assert_eq!(*released.lock().unwrap(), [0, 1, 2, 3]);
        let store = SqliteStore::open(&path, small()).unwrap();
        assert_eq!(store.journal().unwrap(), ["0", "1", "2", "3"]);
    }

    #[test]
    fn queued_writes_are_read_back_at_once_and_survive_a_refused_commit_and_the_close() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("queue.db");
        let store = SqliteStore::open(&path, small()).expect("opens");
        let key = store.start_run(run("spawn-1", "p")).expect("a key");
        store.commit_later(vec![Write::Bus {
            name: "subagent/start".into(),
            body: "{}".into(),
        }]);
        // A read finds the queue applied, whether or not the writer thread got to it.
        let runs = store.runs_of("p").expect("the runs");
        assert_eq!(runs.len(), 1);
        assert_eq!((runs[0].key, runs[0].status), (key, RunStatus::Running));
        assert_eq!(
            store.journal().expect("the journal"),
            vec!["{}".to_string()]
        );

        // A refused commit refuses its own writes only, never what was queued before it.
        let second = store.start_run(run("spawn-2", "p")).expect("a key");
        assert!(second > key, "keys grow within an opening");
        store
            .commit(vec![Write::OpenSession {
                id: "s".into(),
                agent: "agent:1".into(),
                parent: None,
                working_directory: "/".into(),
            }])
            .expect("a session");
        let err = store
            .commit(vec![
                Write::LinkChild {
                    run: second,
                    session: "s".into(),
                },
                Write::Append {
                    session: "s".into(),
                    kind: "user-message".into(),
                    body: "x".repeat(65),
                },
            ])
            .expect_err("past the session's limit");
        assert!(matches!(err, StoreError::SessionFull { .. }), "{err}");
        let runs = store.runs_of("p").expect("the runs");
        assert_eq!(runs.len(), 2, "the queued start was kept");
        assert_eq!(
            runs[1].child_session, None,
            "the refused batch left nothing"
        );

        // Queued at the close: written before the store lets go of the file.
        let third = store.start_run(run("spawn-3", "p")).expect("a key");
        store.commit_later(vec![Write::RunEnded {
            run: third,
            stop_reason: "completed".into(),
            diagnostic: None,
        }]);
        drop(store);
        let store = SqliteStore::open(&path, small()).expect("reopens");
        let runs = store.runs_of("p").expect("the runs");
        let last = runs.last().expect("three runs");
        assert_eq!(runs.len(), 3);
        assert_eq!((last.key, last.status), (third, RunStatus::Ended));
        assert_eq!(last.stop_reason.as_deref(), Some("completed"));
        // A later opening's keys are above every earlier one's.
        let fourth = store.start_run(run("spawn-1", "p")).expect("a key");
        assert!(fourth > third);
    }
}
