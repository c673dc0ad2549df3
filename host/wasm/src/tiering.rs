//! Tier-up: on a tiered host, a large component's first load is served by Winch's code while
//! Cranelift compiles it in the background, at low priority; when Cranelift's code is ready (and
//! cached), the loader swaps it in for the runs that start after, as `seam dev` swaps a rebuilt
//! plugin, and runs going finish on Winch's.
//!
//! The compiles run on a pool of their own whose threads have the lowest scheduling priority
//! (nice 19): wasmtime spreads a compile over the rayon pool it is called from, so a compile
//! started on this pool stays on it, and the plugins' runs and the host's own threads go first.

use std::sync::{Arc, OnceLock, Weak};

use crate::host::HostShared;

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

/// Starts the Cranelift compile of every plugin the last load committed on Winch's code.
pub(crate) fn start(shared: &Arc<HostShared>) {
    let tier_ups = shared.loader.take_tier_ups();
    if tier_ups.is_empty() {
        return;
    }
    let Some(pool) = pool() else {
        return;
    };
    for tier_up in tier_ups {
        let (done, compiled) = tokio::sync::oneshot::channel();
        let cache = shared.cache.clone();
        let job = tier_up.clone();
        pool.spawn(move || {
            let _ = done.send(cache.tier_up(&job.path, &job.source));
        });
        tracing::debug!(plugin = %tier_up.id, "compiling with Cranelift in the background");
        let shared: Weak<HostShared> = Arc::downgrade(shared);
        tokio::spawn(async move {
            let Ok(result) = compiled.await else {
                return;
            };
            // A host dropped meanwhile has nothing to swap.
            let Some(shared) = shared.upgrade() else {
                return;
            };
            match result {
                Ok(component) => shared.loader.swap_in(&tier_up, component).await,
                Err(e) => tracing::warn!(
                    plugin = %tier_up.id,
                    "the background Cranelift compile failed; Winch's code goes on serving: {e}"
                ),
            }
        });
    }
}
