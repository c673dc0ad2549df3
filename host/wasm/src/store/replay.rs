//! A store's place on its tree's tape (`seam run --record`, `seam replay`): the key it is
//! recorded under, and what makes its guest's inputs the same in a replay — a seeded
//! `wasi:random` and a wall clock whose reads are recorded, then played back in order.
//!
//! The monotonic clock stays the host's: it only measures durations (timeouts, how long
//! something took), which an answer should not depend on, and a played-back one would make the
//! guest's waits (`subscribe-duration`) wrong.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rand::SeedableRng as _;
use seam_core::cassette::Kind;
use seam_core::sync::lock;
use seam_core::tape::{Played, Tape};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use wasmtime_wasi::{HostWallClock, WasiCtxBuilder};

/// Most wall-clock reads one store records; later ones are live, named as a gap.
pub const MAX_CLOCK_READS: u32 = 1000;

/// The tape a store is recorded on (or played from), and its key there.
#[derive(Clone)]
pub struct StoreTape {
    tape: Arc<Tape>,
    key: Arc<str>,
}

impl StoreTape {
    /// The store recorded on (or played from) `tape` under `key`.
    pub fn new(tape: Arc<Tape>, key: &str) -> Self {
        Self {
            tape,
            key: key.into(),
        }
    }

    /// The tape.
    pub fn tape(&self) -> &Arc<Tape> {
        &self.tape
    }

    /// The store's key on it.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Whether the store plays a recording back.
    pub fn replaying(&self) -> bool {
        self.tape.replaying()
    }

    /// Seeds `builder`'s random and sets its wall clock: recording, a fresh seed and the clock's
    /// base taken down as the store's `seed` entry, and each read after it; replaying, the
    /// recorded seed and reads.
    pub fn apply(&self, plugin: &str, builder: &mut WasiCtxBuilder) {
        let seed = if self.replaying() {
            self.play_clock(builder)
        } else {
            self.record_clock(plugin, builder)
        };
        builder
            .insecure_random_seed(seed)
            .secure_random(rand::rngs::ChaCha20Rng::from_seed(derived(seed, b"secure")))
            .insecure_random(rand::rngs::ChaCha8Rng::from_seed(derived(
                seed,
                b"insecure",
            )));
    }

    fn record_clock(&self, plugin: &str, builder: &mut WasiCtxBuilder) -> u128 {
        let seed: u128 = rand::random();
        let base = since_epoch(SystemTime::now());
        self.tape.record(
            &self.key,
            Kind::Seed,
            json!({ "plugin": plugin, "seed": format!("{seed:032x}"), "wall": wall(base) }),
        );
        builder.wall_clock(RecordingClock {
            store: self.clone(),
            plugin: plugin.into(),
            reads: AtomicU32::new(0),
            cut: AtomicBool::new(false),
        });
        seed
    }

    fn play_clock(&self, builder: &mut WasiCtxBuilder) -> u128 {
        // Nothing recorded for this store is the divergence `play` keeps; the store still runs,
        // on a fresh seed, until the replay stops.
        let first = match self.tape.play(&self.key, Kind::Seed) {
            Played::Entry(_, body) => Some(body),
            Played::Missing | Played::Stopped => None,
        };
        let seed = first
            .as_ref()
            .and_then(|b| b.get("seed")?.as_str())
            .and_then(|s| u128::from_str_radix(s, 16).ok())
            .unwrap_or_else(rand::random);
        let base = first
            .as_ref()
            .and_then(|b| read_wall(b.get("wall")?))
            .unwrap_or_else(|| since_epoch(SystemTime::now()));
        let reads = self
            .tape
            .play_rest(&self.key, Kind::Seed)
            .iter()
            .filter_map(|b| read_wall(b.get("wall")?))
            .collect();
        builder.wall_clock(PlayedClock {
            state: Mutex::new(PlayedState {
                reads,
                last: base,
                at: Instant::now(),
            }),
        });
        seed
    }
}

/// 32 bytes of generator seed from the store's seed, one stream per `purpose`.
fn derived(seed: u128, purpose: &[u8]) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(seed.to_le_bytes());
    hash.update(purpose);
    hash.finalize().into()
}

fn since_epoch(t: SystemTime) -> Duration {
    t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default()
}

/// A wall-clock reading as JSON: `[seconds, nanoseconds]` since the Unix epoch.
fn wall(d: Duration) -> Value {
    json!([d.as_secs(), d.subsec_nanos()])
}

fn read_wall(v: &Value) -> Option<Duration> {
    let secs = v.get(0)?.as_u64()?;
    let nanos = u32::try_from(v.get(1)?.as_u64()?).ok()?;
    Some(Duration::new(secs, nanos))
}

/// The host's wall clock, each of its first [`MAX_CLOCK_READS`] reads taken down.
struct RecordingClock {
    store: StoreTape,
    plugin: Arc<str>,
    reads: AtomicU32,
    cut: AtomicBool,
}

impl HostWallClock for RecordingClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    fn now(&self) -> Duration {
        let now = since_epoch(SystemTime::now());
        if self.reads.fetch_add(1, Ordering::Relaxed) < MAX_CLOCK_READS {
            self.store
                .tape
                .record(&self.store.key, Kind::Seed, json!({ "wall": wall(now) }));
        } else if !self.cut.swap(true, Ordering::Relaxed) {
            self.store.tape.gap(format!(
                "plugin `{}` read the wall clock more than {MAX_CLOCK_READS} times at `{}`: \
                 later reads were not recorded",
                self.plugin, self.store.key
            ));
        }
        now
    }
}

struct PlayedState {
    /// The recorded reads not played yet.
    reads: VecDeque<Duration>,
    /// The last value returned, and when.
    last: Duration,
    at: Instant,
}

/// The recorded reads in order; past them, the last one plus the real time since.
struct PlayedClock {
    state: Mutex<PlayedState>,
}

impl HostWallClock for PlayedClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    fn now(&self) -> Duration {
        let mut state = lock(&self.state);
        match state.reads.pop_front() {
            Some(read) => {
                state.last = read;
                state.at = Instant::now();
                read
            }
            None => state.last + state.at.elapsed(),
        }
    }
}
