//! The live recorder and player of a tree's inputs.
//!
//! Recording, every input a run's outcome depends on is taken down as an [`Entry`] under the
//! key of the agent or run it was taken for (see [`crate::cassette`]), written to the session
//! store (and kept for a cassette). Replaying, the same inputs are handed back in the same
//! order per key, and what the tree sends (a model request) is checked against what was
//! recorded: the first difference is the [`Divergence`] a replay reports.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::cassette::{Entry, Kind};
use crate::store::{SessionStore, Write};
use crate::sync::lock;

/// Default of `[recording] max_mb`: the most one session's recording may hold.
pub const DEFAULT_MAX_MB: u64 = 64;

/// `[recording]`: whether the trees of top-level agents are recorded, and how much each may
/// hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordingSettings {
    /// Whether to record (default: yes).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The most one session's recording may hold, in MiB.
    #[serde(default = "default_max_mb")]
    pub max_mb: u64,
}

fn yes() -> bool {
    true
}

fn default_max_mb() -> u64 {
    DEFAULT_MAX_MB
}

impl Default for RecordingSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            max_mb: DEFAULT_MAX_MB,
        }
    }
}

/// Whether a tape records or plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Record,
    Replay,
}

/// Where a replay first did something other than what was recorded.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Divergence {
    /// The agent or run (its tape key).
    pub key: String,
    /// What kind of input.
    pub kind: Kind,
    /// Its place among its key's inputs of that kind, from 1.
    pub step: u64,
    /// What differs, in words.
    pub what: String,
    /// What was recorded.
    pub recorded: Value,
    /// What happened now.
    pub now: Value,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "diverged at `{}`, {} step {}: {}",
            self.key,
            self.kind.as_str(),
            self.step,
            self.what
        )?;
        writeln!(f, "- recorded: {}", shown(&self.recorded))?;
        write!(f, "+ now:      {}", shown(&self.now))
    }
}

/// A value for a diff line: a string as itself, anything else as JSON.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "(nothing)".into(),
        v => v.to_string(),
    }
}

/// A tree's recorder, or its player.
pub struct Tape {
    mode: Mode,
    /// The top-level session whose inputs are recorded.
    root: String,
    store: Option<Arc<dyn SessionStore>>,
    /// Entries taken so far (recording) for a cassette, or every recorded one (replaying).
    entries: Mutex<Vec<Entry>>,
    /// The next seq by key and kind.
    next: Mutex<HashMap<(String, Kind), u64>>,
    /// Replaying: the recorded bodies by key and kind, in order.
    recorded: HashMap<(String, Kind), Vec<Value>>,
    divergence: Mutex<Option<Divergence>>,
    /// Woken when the replay diverges: whatever waits for a recorded input gives up.
    diverged: tokio::sync::Notify,
    /// What was left out, and why.
    gaps: Mutex<Vec<String>>,
    bytes: AtomicU64,
    max_bytes: u64,
    /// Replaying: model steps played so far, and where to stop (`--until`).
    steps: AtomicU64,
    until: Option<u64>,
    /// Which process of the session recorded (or is replayed): the first is 1, each
    /// continuation one more. The runs a top-level agent starts carry it in their keys after
    /// the first, so that a continuation's children never take a cut turn's keys.
    generation: std::sync::atomic::AtomicU32,
    /// Replaying: the top-level turn being replayed, and the turns the recording saw end (both
    /// counted from 1 in the order the recording has them).
    turn: std::sync::atomic::AtomicU32,
    ended: Vec<u32>,
    /// Replaying: each recorded top-level turn's start (its generation and where the top-level
    /// agent's model steps stood), in order.
    starts: Vec<Value>,
    /// Replaying: the last top-level model step the current turn recorded (the next turn's
    /// start, less one), when a later turn follows it.
    root_limit: Mutex<Option<u64>>,
}

impl std::fmt::Debug for Tape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tape")
            .field("mode", &self.mode)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// What playing one input gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Played {
    /// The recorded body, at this step.
    Entry(u64, Value),
    /// Nothing was recorded there: the replay diverged (it is recorded as the divergence).
    Missing,
    /// The replay reached its `--until` step: it stops here.
    Stopped,
}

impl Tape {
    /// A recorder of the tree under the top-level session `root`, writing to `store` (if
    /// given), holding at most `max_bytes` of entries. `already` are the entries an earlier
    /// process recorded for the same session (a continued one): new ones follow them.
    pub fn recorder(
        root: &str,
        store: Option<Arc<dyn SessionStore>>,
        max_bytes: u64,
        already: &[Entry],
    ) -> Arc<Self> {
        let mut next: HashMap<(String, Kind), u64> = HashMap::new();
        let mut generation = 0;
        for e in already {
            let n = next.entry((e.key.clone(), e.kind)).or_insert(1);
            *n = (*n).max(e.seq + 1);
            if e.kind == Kind::Turn {
                generation = generation.max(e.body["generation"].as_u64().unwrap_or(1) as u32);
            }
        }
        Arc::new(Self {
            mode: Mode::Record,
            root: root.to_string(),
            store,
            entries: Mutex::default(),
            next: Mutex::new(next),
            recorded: HashMap::new(),
            divergence: Mutex::default(),
            diverged: tokio::sync::Notify::new(),
            gaps: Mutex::default(),
            bytes: AtomicU64::new(0),
            max_bytes,
            steps: AtomicU64::new(0),
            until: None,
            generation: std::sync::atomic::AtomicU32::new(generation + 1),
            turn: std::sync::atomic::AtomicU32::new(0),
            ended: Vec::new(),
            starts: Vec::new(),
            root_limit: Mutex::default(),
        })
    }

    /// A player of `entries`, stopping after `until` model steps when given.
    pub fn player(entries: Vec<Entry>, until: Option<u64>) -> Arc<Self> {
        let mut sorted = entries.clone();
        sorted.sort_by(|a, b| (&a.key, a.kind, a.seq).cmp(&(&b.key, b.kind, b.seq)));
        // The recorded turns in order (a continuation may number its turns anew): each start
        // marker, ended when an end marker follows it before the next start.
        let markers: Vec<&Entry> = {
            let mut m: Vec<&Entry> = entries.iter().filter(|e| e.kind == Kind::Turn).collect();
            m.sort_by_key(|e| e.seq);
            m
        };
        let mut ended: Vec<u32> = Vec::new();
        let mut ordinal = 0;
        for e in &markers {
            if e.body["ended"] == true {
                if ordinal > 0 && !ended.contains(&ordinal) {
                    ended.push(ordinal);
                }
            } else {
                ordinal += 1;
            }
        }
        let starts: Vec<Value> = sorted
            .iter()
            .filter(|e| e.kind == Kind::Turn && e.body["ended"] != true)
            .map(|e| e.body.clone())
            .collect();
        let mut recorded: HashMap<(String, Kind), Vec<Value>> = HashMap::new();
        for e in sorted {
            recorded.entry((e.key, e.kind)).or_default().push(e.body);
        }
        Arc::new(Self {
            mode: Mode::Replay,
            root: String::new(),
            store: None,
            entries: Mutex::new(entries),
            next: Mutex::default(),
            recorded,
            divergence: Mutex::default(),
            diverged: tokio::sync::Notify::new(),
            gaps: Mutex::default(),
            bytes: AtomicU64::new(0),
            max_bytes: u64::MAX,
            steps: AtomicU64::new(0),
            until,
            generation: std::sync::atomic::AtomicU32::new(1),
            turn: std::sync::atomic::AtomicU32::new(0),
            ended,
            starts,
            root_limit: Mutex::default(),
        })
    }

    /// Which process of the session this is (see the field).
    pub fn generation(&self) -> u32 {
        self.generation.load(Ordering::Relaxed)
    }

    /// The top-level turn `turn` begins. Recording, it is marked with where the top-level
    /// agent's model steps stand; replaying, the marker is played, so that a turn recorded by a
    /// later process starts where that process started (past what a cut turn never recorded).
    pub fn turn_started(&self, key: &str, turn: u32) {
        match self.mode {
            Mode::Record => {
                let model_next = lock(&self.next)
                    .get(&(key.to_string(), Kind::Model))
                    .copied()
                    .unwrap_or(1);
                self.record(
                    key,
                    Kind::Turn,
                    serde_json::json!({
                        "turn": turn,
                        "generation": self.generation(),
                        "model_next": model_next,
                    }),
                );
            }
            Mode::Replay => {
                self.turn.store(turn, Ordering::Relaxed);
                let at = turn.saturating_sub(1) as usize;
                if let Some(start) = self.starts.get(at) {
                    if let Some(g) = start["generation"].as_u64() {
                        self.generation.store(g as u32, Ordering::Relaxed);
                    }
                    if let Some(n) = start["model_next"].as_u64() {
                        lock(&self.next).insert((key.to_string(), Kind::Model), n);
                    }
                }
                *lock(&self.root_limit) = self
                    .starts
                    .get(at + 1)
                    .and_then(|next| next["model_next"].as_u64())
                    .map(|n| n.saturating_sub(1));
            }
        }
    }

    /// The top-level turn `turn` ended (recording: marked, so that a replay tells a turn a
    /// crash cut short from one that ended).
    pub fn turn_ended(&self, key: &str, turn: u32) {
        if self.mode == Mode::Record {
            self.record(
                key,
                Kind::Turn,
                serde_json::json!({ "turn": turn, "ended": true }),
            );
        }
    }

    /// Replaying: the turn being replayed, when the recording never saw it end (its process
    /// was killed during it).
    pub fn cut_turn(&self) -> Option<u32> {
        let turn = self.turn.load(Ordering::Relaxed);
        (turn > 0 && !self.ended.contains(&turn)).then_some(turn)
    }

    /// Whether it plays a recording back.
    pub fn replaying(&self) -> bool {
        self.mode == Mode::Replay
    }

    fn take_seq(&self, key: &str, kind: Kind) -> u64 {
        let mut next = lock(&self.next);
        let n = next.entry((key.to_string(), kind)).or_insert(1);
        let seq = *n;
        *n += 1;
        seq
    }

    /// Records `body` as the next input of `kind` for `key`. Past the size bound, the entry is
    /// left out and named as a gap (once).
    pub fn record(&self, key: &str, kind: Kind, body: Value) {
        if self.mode != Mode::Record {
            return;
        }
        let seq = self.take_seq(key, kind);
        let text = body.to_string();
        let size = text.len() as u64;
        if self.bytes.fetch_add(size, Ordering::Relaxed) + size > self.max_bytes {
            self.gap(format!(
                "the recording reached its bound of {} bytes (`[recording] max_mb`) at `{key}`, \
                 {} step {seq}: later inputs were not recorded",
                self.max_bytes,
                kind.as_str()
            ));
            return;
        }
        let entry = Entry {
            key: key.to_string(),
            kind,
            seq,
            body,
        };
        if let Some(store) = &self.store {
            store.commit_later(vec![Write::Tape {
                root: self.root.clone(),
                entry: Box::new(entry.clone()),
                body: text,
            }]);
        }
        lock(&self.entries).push(entry);
    }

    /// The id of the run keyed `key`: recording, `fresh()`, taken down; replaying, the recorded
    /// one (a run the recording does not have is the divergence, and gets a fresh id marked
    /// as the replay's).
    pub fn run_id(&self, key: &str, fresh: impl FnOnce() -> String) -> String {
        self.id_of(key, Kind::RunId, fresh)
    }

    /// The session id of the child agent of the run keyed `key`, as [`Tape::run_id`] gives a
    /// run's.
    pub fn session_id(&self, key: &str, fresh: impl FnOnce() -> String) -> String {
        self.id_of(key, Kind::Session, fresh)
    }

    fn id_of(&self, key: &str, kind: Kind, fresh: impl FnOnce() -> String) -> String {
        match self.mode {
            Mode::Record => {
                let id = fresh();
                self.record(key, kind, serde_json::json!({ "id": id }));
                id
            }
            Mode::Replay => match self.play(key, kind) {
                Played::Entry(_, body) => match body["id"].as_str() {
                    Some(id) => id.to_string(),
                    None => format!("{}-replayed", fresh()),
                },
                _ => format!("{}-replayed", fresh()),
            },
        }
    }

    /// Names something that was not recorded (once each).
    pub fn gap(&self, what: String) {
        let mut gaps = lock(&self.gaps);
        if !gaps.contains(&what) {
            gaps.push(what);
        }
    }

    /// What was not recorded, and why.
    pub fn gaps(&self) -> Vec<String> {
        lock(&self.gaps).clone()
    }

    /// Replaying: the next recorded input of `kind` for `key`. A model step past `--until`
    /// stops the replay; one with nothing recorded is the divergence.
    pub fn play(&self, key: &str, kind: Kind) -> Played {
        if kind == Kind::Model {
            let step = self.steps.fetch_add(1, Ordering::Relaxed) + 1;
            if self.until.is_some_and(|until| step > until) {
                return Played::Stopped;
            }
        }
        let seq = self.take_seq(key, kind);
        // A turn's top-level model steps end where the next recorded turn's begin.
        let past_turn = kind == Kind::Model
            && key == crate::cassette::ROOT_KEY
            && lock(&self.root_limit).is_some_and(|limit| seq > limit);
        match self
            .recorded
            .get(&(key.to_string(), kind))
            .and_then(|v| v.get(seq as usize - 1))
            .filter(|_| !past_turn)
        {
            Some(body) => Played::Entry(seq, body.clone()),
            None => {
                self.diverge(Divergence {
                    key: key.to_string(),
                    kind,
                    step: seq,
                    what: format!(
                        "the replay made {} {} input the recording does not have",
                        if kind == Kind::Model { "a" } else { "an" },
                        kind.as_str()
                    ),
                    recorded: Value::Null,
                    now: Value::String("one more".into()),
                });
                Played::Missing
            }
        }
    }

    /// Replaying: every recorded input of `kind` for `key` not played yet, in order, taken as
    /// played. Running out of them is no divergence: for inputs whose count may differ
    /// (a component's clock reads, recorded up to a bound).
    pub fn play_rest(&self, key: &str, kind: Kind) -> Vec<Value> {
        if self.mode != Mode::Replay {
            return Vec::new();
        }
        let Some(bodies) = self.recorded.get(&(key.to_string(), kind)) else {
            return Vec::new();
        };
        let mut next = lock(&self.next);
        let n = next.entry((key.to_string(), kind)).or_insert(1);
        let from = usize::try_from(*n - 1).unwrap_or(usize::MAX);
        *n = (*n).max(bodies.len() as u64 + 1);
        bodies
            .get(from..)
            .map(<[Value]>::to_vec)
            .unwrap_or_default()
    }

    /// Keeps `d` as the divergence, unless an earlier one was found.
    pub fn diverge(&self, d: Divergence) {
        let mut kept = lock(&self.divergence);
        if kept.is_none() {
            tracing::info!(key = %d.key, kind = d.kind.as_str(), step = d.step, "the replay diverged");
            *kept = Some(d);
            self.diverged.notify_waiters();
        }
    }

    /// Resolves when the replay diverges (create it before checking [`Tape::divergence`]).
    pub fn on_divergence(&self) -> tokio::sync::futures::Notified<'_> {
        self.diverged.notified()
    }

    /// The first divergence, if the replay diverged.
    pub fn divergence(&self) -> Option<Divergence> {
        lock(&self.divergence).clone()
    }

    /// Whether the replay stopped at its `--until` step.
    pub fn stopped(&self) -> bool {
        self.until
            .is_some_and(|until| self.steps.load(Ordering::Relaxed) > until)
    }

    /// Replaying: the recorded inputs nothing asked for, by key and kind, with how many.
    pub fn unplayed(&self) -> Vec<(String, Kind, u64)> {
        let next = lock(&self.next);
        let mut left: Vec<(String, Kind, u64)> = self
            .recorded
            .iter()
            .filter_map(|((key, kind), bodies)| {
                let played = next.get(&(key.clone(), *kind)).map_or(0, |n| n - 1);
                let total = bodies.len() as u64;
                (total > played).then(|| (key.clone(), *kind, total - played))
            })
            .collect();
        left.sort();
        left
    }

    /// The entries recorded (recording), or played from (replaying).
    pub fn entries(&self) -> Vec<Entry> {
        lock(&self.entries).clone()
    }
}

/// What a host records, and the recording its next top-level agent plays.
#[derive(Default)]
pub struct Recording {
    /// The bound of one session's recording, when recording is on.
    max_bytes: std::sync::RwLock<Option<u64>>,
    /// The tape the next top-level agent plays back (`seam replay`).
    next_replay: Mutex<Option<Arc<Tape>>>,
}

impl Recording {
    /// Turns recording on (holding at most `max_mb` per session) or off.
    pub fn configure(&self, on: bool, max_mb: u64) {
        *crate::sync::write(&self.max_bytes) = on.then(|| max_mb.saturating_mul(1024 * 1024));
    }

    /// Whether the trees of new top-level agents are recorded.
    pub fn is_on(&self) -> bool {
        crate::sync::read(&self.max_bytes).is_some()
    }

    /// Makes the next top-level agent play `tape` back instead of recording.
    pub fn replay_next(&self, tape: Arc<Tape>) {
        *lock(&self.next_replay) = Some(tape);
    }

    /// Whether a tape waits to be played back: the host is about to replay, so what the
    /// recording keeps of a peer (an A2A agent's answers) is not fetched from it.
    pub fn replay_pending(&self) -> bool {
        lock(&self.next_replay).is_some()
    }

    /// The tape of a new top-level agent keeping `session` in `store`: the one to play back,
    /// else a recorder when recording is on, continuing what the session recorded before when
    /// it `continued` (a new session has nothing to read).
    pub fn tape_for(
        &self,
        session: &str,
        store: &Arc<dyn SessionStore>,
        continued: bool,
    ) -> Option<Arc<Tape>> {
        if let Some(tape) = lock(&self.next_replay).take() {
            return Some(tape);
        }
        let max = (*crate::sync::read(&self.max_bytes))?;
        let already = if continued {
            store.tape(session).unwrap_or_else(|e| {
                tracing::warn!(session, error = %e, "cannot read what the session recorded before");
                Vec::new()
            })
        } else {
            Vec::new()
        };
        Some(Tape::recorder(session, Some(store.clone()), max, &already))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_its_bound_a_recording_names_the_gap_and_a_replay_diverges_where_it_ends() {
        let tape = Tape::recorder("s", None, 40, &[]);
        tape.record("root", Kind::Model, serde_json::json!({"reply": "short"}));
        tape.record(
            "root",
            Kind::Model,
            serde_json::json!({"reply": "x".repeat(64)}),
        );
        assert_eq!(tape.entries().len(), 1);
        let gaps = tape.gaps();
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert!(
            gaps[0].contains("max_mb") && gaps[0].contains("`root`"),
            "{gaps:?}"
        );

        let player = Tape::player(tape.entries(), None);
        assert!(matches!(
            player.play("root", Kind::Model),
            Played::Entry(1, _)
        ));
        assert_eq!(player.play("root", Kind::Model), Played::Missing);
        let d = player
            .divergence()
            .expect("the second step is the divergence");
        assert_eq!((d.key.as_str(), d.step), ("root", 2));
        assert!(player.unplayed().is_empty());
    }

    #[test]
    fn until_stops_at_its_step_and_ids_are_given_again() {
        let tape = Tape::recorder("s", None, u64::MAX, &[]);
        assert_eq!(
            tape.run_id("root/call-0-0.1", || "spawn-7".into()),
            "spawn-7"
        );
        tape.record("root", Kind::Model, serde_json::json!({}));
        tape.record("root", Kind::Model, serde_json::json!({}));
        let player = Tape::player(tape.entries(), Some(1));
        assert_eq!(
            player.run_id("root/call-0-0.1", || "spawn-1".into()),
            "spawn-7"
        );
        assert!(matches!(
            player.play("root", Kind::Model),
            Played::Entry(..)
        ));
        assert_eq!(player.play("root", Kind::Model), Played::Stopped);
        assert!(player.stopped() && player.divergence().is_none());
    }
}
