//! Tier-up: on a tiered host, a large component's first load is served by Winch's code while
//! Cranelift compiles it in the background, at low priority; when Cranelift's code is ready (and
//! cached), the loader swaps it in for the runs that start after, as `seam dev` swaps a rebuilt
//! plugin, and runs going finish on Winch's.
//!
//! The compiles run on a pool of their own whose threads have the lowest scheduling priority
//! (nice 19): wasmtime spreads a compile over the rayon pool it is called from, so a compile
//! started on this pool stays on it, and the plugins' runs and the host's own threads go first.

use std::sync::{Arc, OnceLock};

use wasmtime::component::Component;

use crate::cache::CompileCache;
use crate::engine::EngineError;

/// What a plugin served by Winch's code is to be compiled from by Cranelift, in the background.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TierUp {
    /// The plugin's entry id.
    pub id: String,
    /// The component file compiled.
    pub path: std::path::PathBuf,
    /// The BLAKE3 of the bytes Winch compiled: Cranelift compiles only the same.
    pub source: [u8; 32],
}

/// The low-priority pool, made on the first tier-up of the process; `None` if the OS refused
/// its threads (then tier-ups do not happen, and a later load starts on the cached Winch code).
fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("seam-tier-up-{i}"))
            .start_handler(|_| {
                // On Linux a thread has its own nice value; this one's yields to everything.
                if let Err(e) = rustix::process::setpriority_process(None, 19) {
                    tracing::debug!(error = %e, "cannot lower the tier-up thread's priority");
                }
            })
            .build()
            .map_err(|e| tracing::warn!(error = %e, "cannot start the tier-up threads"))
            .ok()
    })
    .as_ref()
}

/// Starts Cranelift's compile of `tier_up` on the low-priority pool; the receiver gets its
/// component (also cached). `None` if the pool could not be started.
pub fn compile(
    cache: &Arc<CompileCache>,
    tier_up: &TierUp,
) -> Option<tokio::sync::oneshot::Receiver<Result<Component, EngineError>>> {
    let pool = pool()?;
    let (done, compiled) = tokio::sync::oneshot::channel();
    let cache = cache.clone();
    let job = tier_up.clone();
    pool.spawn(move || {
        let _ = done.send(cache.tier_up(&job.path, &job.source));
    });
    tracing::debug!(plugin = %tier_up.id, "compiling with Cranelift in the background");
    Some(compiled)
}
