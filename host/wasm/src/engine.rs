//! The wasmtime engine: its configuration (pooling, warm slots, epoch interruption) and the
//! epoch ticker. The linkers live with the interfaces (`plugin`), the compile cache in `cache`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use seam_core::types::PluginKind;
use thiserror::Error;
use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Strategy,
};

/// How the engine is set up.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Where compiled components are cached; `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// Most bytes of artifacts the cache keeps; past it, the least recently used go first
    /// (`$SEAM_CACHE_MAX_MB`, 1 GiB by default).
    pub cache_max_bytes: u64,
    /// Use the pooling instance allocator (fast instantiation, reserved address space).
    pub pooling: bool,
    /// Component instances the pool can hold at once, for all plugins together: each live run,
    /// tool call or observer delivery holds one (`$SEAM_POOL_INSTANCES`, 1,000 by default).
    pub pool_instances: u32,
    /// Largest linear memory a pool slot holds, in bytes; no plugin's `memory_mb` may exceed it.
    pub pool_memory_bytes: usize,
    /// Most elements a pooled table holds; no plugin's `table_elements` may exceed it.
    pub pool_table_elements: usize,
    /// Interval of the epoch ticker: the granularity of yields and time budgets.
    pub epoch_tick: Duration,
    /// The compiler that turns components into native code (`$SEAM_COMPILER`).
    pub compiler: Compiler,
    /// With [`Compiler::Tiered`], components at least this large are compiled by Winch first
    /// (smaller ones compile with Cranelift in well under a second, so they start on it).
    pub tier_min_bytes: u64,
}

/// Default of [`EngineOptions::tier_min_bytes`]: 2 MiB (the Rust mock is 0.3 MB and compiles
/// with Cranelift in 0.2 s; a Python guest is 18.5 MB and takes 5 to 6 s).
pub const DEFAULT_TIER_MIN_BYTES: u64 = 2 << 20;

/// Which wasmtime compiler compiles components.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Compiler {
    /// Both, by tiers (the default): a large component with no cached Cranelift artifact is
    /// compiled by Winch and serves at once, while Cranelift compiles it in the background at
    /// low priority; runs that start after that are served by Cranelift's code (the plugin is
    /// swapped as `seam dev` swaps a rebuilt one: runs going finish on the old code).
    #[default]
    Tiered,
    /// Cranelift only, the optimising compiler: slower to compile, faster code
    /// (`SEAM_COMPILER=cranelift`; what `seam compile` always produces).
    Cranelift,
    /// Winch only, the baseline compiler: compiles large guests (Python, JavaScript) several
    /// times faster, and the code runs slower (`SEAM_COMPILER=winch`).
    Winch,
}

impl Compiler {
    /// `$SEAM_COMPILER` (`tiered`, `cranelift` or `winch`), else tiered; another value is
    /// ignored, with a warning.
    pub fn from_env() -> Compiler {
        Self::from_value(std::env::var("SEAM_COMPILER").ok().as_deref())
    }

    fn from_value(value: Option<&str>) -> Compiler {
        match value {
            None | Some("") | Some("tiered") => Compiler::Tiered,
            Some("cranelift") => Compiler::Cranelift,
            Some("winch") => Compiler::Winch,
            Some(other) => {
                tracing::warn!(
                    "SEAM_COMPILER=`{other}` is not `tiered`, `cranelift` or `winch`; using tiered"
                );
                Compiler::Tiered
            }
        }
    }

    /// Its name, as `SEAM_COMPILER` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Compiler::Tiered => "tiered",
            Compiler::Cranelift => "cranelift",
            Compiler::Winch => "winch",
        }
    }
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            cache_dir: default_cache_dir(),
            cache_max_bytes: default_cache_max_bytes(),
            pooling: true,
            pool_instances: default_pool_instances(),
            pool_memory_bytes: 256 << 20,
            pool_table_elements: 20_000,
            epoch_tick: Duration::from_millis(10),
            compiler: Compiler::from_env(),
            tier_min_bytes: DEFAULT_TIER_MIN_BYTES,
        }
    }
}

/// Default of [`EngineOptions::cache_max_bytes`], in MiB.
pub const DEFAULT_CACHE_MAX_MB: u64 = 1024;

/// `$SEAM_CACHE_MAX_MB` in bytes, else 1 GiB. A value that is not a whole number of MiB is
/// ignored, with a warning.
pub fn default_cache_max_bytes() -> u64 {
    let mb = match std::env::var("SEAM_CACHE_MAX_MB") {
        Ok(text) => text.trim().parse::<u64>().unwrap_or_else(|_| {
            tracing::warn!(
                value = %text,
                "SEAM_CACHE_MAX_MB is not a whole number of MiB; using {DEFAULT_CACHE_MAX_MB}"
            );
            DEFAULT_CACHE_MAX_MB
        }),
        Err(_) => DEFAULT_CACHE_MAX_MB,
    };
    mb.saturating_mul(1 << 20)
}

/// Default of [`EngineOptions::pool_instances`].
pub const DEFAULT_POOL_INSTANCES: u32 = 1000;

/// `$SEAM_POOL_INSTANCES`, else 1,000. A value that is not a whole number above 0 is ignored,
/// with a warning.
pub fn default_pool_instances() -> u32 {
    pool_instances_from(std::env::var("SEAM_POOL_INSTANCES").ok().as_deref())
}

fn pool_instances_from(value: Option<&str>) -> u32 {
    let Some(text) = value else {
        return DEFAULT_POOL_INSTANCES;
    };
    match text.trim().parse::<u32>() {
        Ok(n) if n > 0 => n,
        _ => {
            tracing::warn!(
                value = %text,
                "SEAM_POOL_INSTANCES is not a whole number above 0; using {DEFAULT_POOL_INSTANCES}"
            );
            DEFAULT_POOL_INSTANCES
        }
    }
}

/// `$SEAM_CACHE_DIR`, else `$XDG_CACHE_HOME/seam`, else `~/.cache/seam`.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SEAM_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(dir).join("seam"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("seam"))
}

/// Engine-level failures.
#[derive(Debug, Error)]
pub enum EngineError {
    /// The engine could not be configured.
    #[error("cannot configure the wasm engine: {0}")]
    Config(String),
    /// A task the host ran off the async workers (a compile) panicked or was cancelled.
    #[error("the {what} task failed: {source}")]
    Task {
        /// What it was doing.
        what: &'static str,
        /// The runtime's error.
        source: tokio::task::JoinError,
    },
    /// A component file could not be read.
    #[error("cannot read component `{path}`: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file whose bytes were checked (a component pulled from a registry) changed before it
    /// was compiled.
    #[error(
        "`{path}` changed after its bytes were checked and before they were compiled: refused \
         (load it again to check it anew)"
    )]
    ChangedSinceChecked {
        /// The file.
        path: PathBuf,
    },
    /// The bytes are not a valid component.
    #[error("`{path}` is not a valid WebAssembly component: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The parser's or compiler's explanation.
        reason: String,
    },
    /// The component is a component, but not of a Seam world.
    #[error(
        "`{path}` is not a Seam plugin: it exports [{exports}], expected one of {}",
        crate::versions::expected_exports()
    )]
    WrongWorld {
        /// The file.
        path: PathBuf,
        /// What it exports.
        exports: String,
    },
    /// The component exports a Seam world of a version this host does not link.
    #[error(
        "`{path}` is built for {}@{found}; this host supports {}",
        crate::versions::PACKAGE,
        crate::versions::supported_versions()
    )]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version it was built against.
        found: String,
    },
    /// The component is of the other world than its config entry expects.
    #[error("`{path}` is a {found} component, but the entry expects a {expected}")]
    KindMismatch {
        /// The file.
        path: PathBuf,
        /// What the entry's `kind` says.
        expected: PluginKind,
        /// What the component exports.
        found: PluginKind,
    },
}

/// Bytes of a linear memory's dirtied pages a pool slot keeps across instances: more than a
/// small Rust component touches in one run (its stack top, data and a little heap), and small
/// enough that a full pool of idle slots holds at most a few hundred MiB. Pages dirtied beyond
/// it are given back to the kernel as without warm slots.
const KEEP_RESIDENT_MEMORY: usize = 256 << 10;
/// The same for a table slot.
const KEEP_RESIDENT_TABLE: usize = 64 << 10;
/// Core instances the pool allows per component instance slot (a count, not a reservation).
const CORE_INSTANCES_PER_COMPONENT: u32 = 32;

/// The wasmtime configuration for `options`; `warm_slots` keeps what a run dirtied resident in
/// its pool slot (needs PAGEMAP_SCAN, so `Engine::new` fails without it).
fn engine_config(options: &EngineOptions, warm_slots: bool) -> Config {
    let mut config = Config::new();
    config.strategy(match options.compiler {
        Compiler::Tiered | Compiler::Cranelift => Strategy::Cranelift,
        Compiler::Winch => Strategy::Winch,
    });
    config.epoch_interruption(true);
    config.wasm_component_model(true);
    if options.pooling {
        let mut pool = PoolingAllocationConfig::default();
        let instances = options.pool_instances.max(1);
        pool.total_component_instances(instances);
        // A wasip2 Rust component has 3 core instances, a componentize-js one 4 and a
        // componentize-py one 14 (libc, libpython, their shims). The pool only counts core
        // instances (their state is allocated per instance), so a generous multiple costs
        // nothing, where 4 per slot capped live Python runs at under a third of the pool.
        pool.total_core_instances(instances.saturating_mul(CORE_INSTANCES_PER_COMPONENT));
        // Each component has one or two memories and a few tables; these slots do reserve
        // address space and metadata, so they stay tight.
        pool.total_memories(instances.saturating_mul(2));
        pool.total_tables(instances.saturating_mul(4));
        pool.total_stacks(instances);
        pool.max_memory_size(options.pool_memory_bytes);
        pool.table_elements(options.pool_table_elements);
        if warm_slots {
            // Without this, freeing a slot madvises its memory away, and the next run in it
            // takes a copy-on-write fault (and a TLB shootdown across cores) on every page it
            // writes: most of a run's cost. With it, the kernel reports exactly the pages a
            // run dirtied (PAGEMAP_SCAN) and only those are reset, by copying the image back.
            pool.pagemap_scan(Enabled::Yes);
            pool.linear_memory_keep_resident(KEEP_RESIDENT_MEMORY);
            pool.table_keep_resident(KEEP_RESIDENT_TABLE);
        }
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        // Each pool slot reserves this much address space. The 4 GiB default lets the
        // compiler drop bounds checks, but a thousand slots would then reserve terabytes
        // and several hosts in one process exhaust the address space; plugins are capped
        // far below 4 GiB anyway.
        config.memory_reservation(options.pool_memory_bytes as u64);
    }
    config
}

/// The engine's error, with what to change when the pool did not fit the OS's limits: each
/// pooled instance needs a few memory mappings (its stack's guard page, its memories and tables
/// once in use), and Linux allows 65,530 per process unless `vm.max_map_count` is raised.
fn explain_pool_error(e: &wasmtime::Error, options: &EngineOptions) -> String {
    let message = format!("{e:#}");
    if !out_of_mappings(e) {
        return message;
    }
    let instances = u64::from(options.pool_instances);
    format!(
        "{message}: a pool of {instances} instances needs about {} memory mappings (4 per \
         instance, when all are live); raise the OS's limit (`sysctl -w vm.max_map_count={}`) \
         or make the pool smaller (`SEAM_POOL_INSTANCES`)",
        instances * 4,
        (instances * 4 + 65_530).next_power_of_two()
    )
}

/// Whether the OS refused the pool a mapping (`ENOMEM` from `mmap` or `mprotect`): wasmtime
/// keeps the OS's error, a `rustix` errno, at the root of the error it returns.
fn out_of_mappings(e: &wasmtime::Error) -> bool {
    e.downcast_ref::<rustix::io::Errno>() == Some(&rustix::io::Errno::NOMEM)
        || e.downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error)
            == Some(libc::ENOMEM)
}

/// Stops the ticker thread when the engine goes away.
struct EpochTicker(Arc<AtomicBool>);

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The engine of Winch's code while a tiered host waits for Cranelift's: the host's settings
/// with the baseline compiler and instances allocated on demand (the pool's slots are the main
/// engine's, and this one serves only until the swap; the sandbox's limits are the stores').
fn baseline_config(options: &EngineOptions) -> Config {
    let baseline = EngineOptions {
        compiler: Compiler::Winch,
        pooling: false,
        ..options.clone()
    };
    let mut config = engine_config(&baseline, false);
    // As the pool's slots reserve, so that guests see the same memory bounds on either tier.
    config.memory_reservation(options.pool_memory_bytes as u64);
    config
}

/// One engine per host (two when tiered), with its epoch ticker.
pub struct SeamEngine {
    /// The engine every plugin's code runs on (Cranelift's, or Winch's when forced).
    pub engine: Engine,
    /// Winch's engine, for a tiered host's first compiles of large components.
    pub baseline: Option<Engine>,
    _ticker: EpochTicker,
}

impl SeamEngine {
    /// The engine (and a tiered host's second one) for `options`, with its epoch ticker started.
    pub fn new(options: &EngineOptions) -> Result<Self, EngineError> {
        // Warm slots need PAGEMAP_SCAN (Linux 6.7+); where the kernel lacks it, the engine is
        // made again with the plain pool.
        let engine = match Engine::new(&engine_config(options, true)) {
            Ok(engine) => engine,
            Err(_) if options.pooling => Engine::new(&engine_config(options, false))
                .map_err(|e| EngineError::Config(explain_pool_error(&e, options)))?,
            Err(e) => return Err(EngineError::Config(format!("{e:#}"))),
        };

        let baseline = match options.compiler {
            Compiler::Tiered => Some(
                Engine::new(&baseline_config(options))
                    .map_err(|e| EngineError::Config(format!("the Winch engine: {e:#}")))?,
            ),
            Compiler::Cranelift | Compiler::Winch => None,
        };

        let stop = Arc::new(AtomicBool::new(false));
        {
            // Both engines' guests are interrupted and timed by the same ticks.
            let engines: Vec<Engine> = std::iter::once(engine.clone())
                .chain(baseline.clone())
                .collect();
            let stop = stop.clone();
            let tick = options.epoch_tick;
            std::thread::Builder::new()
                .name("seam-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(tick);
                        for engine in &engines {
                            engine.increment_epoch();
                        }
                    }
                })
                .map_err(|e| EngineError::Config(format!("cannot start epoch ticker: {e}")))?;
        }

        Ok(Self {
            engine,
            baseline,
            _ticker: EpochTicker(stop),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::component::{Component, Linker};
    use wasmtime::Store;

    /// A component of `n` empty core modules, each instantiated once (a componentize-py guest
    /// has 14 core instances).
    fn component_of_core_instances(n: u8) -> Vec<u8> {
        let mut bytes = b"\0asm\x0d\0\x01\0".to_vec();
        for _ in 0..n {
            // Core module section: an empty module.
            bytes.extend([1, 8]);
            bytes.extend(b"\0asm\x01\0\0\0");
        }
        // Core instance section: instantiate module i with no arguments, for each i.
        let mut section = vec![n];
        for i in 0..n {
            section.extend([0, i, 0]);
        }
        bytes.extend([2, section.len() as u8]);
        bytes.extend(section);
        bytes
    }

    #[test]
    fn the_compiler_is_tiered_unless_the_environment_forces_one() {
        for (value, compiler) in [
            (None, Compiler::Tiered),
            (Some(""), Compiler::Tiered),
            (Some("tiered"), Compiler::Tiered),
            (Some("cranelift"), Compiler::Cranelift),
            (Some("winch"), Compiler::Winch),
            (Some("Cranelift"), Compiler::Tiered),
        ] {
            assert_eq!(Compiler::from_value(value), compiler, "{value:?}");
            assert_eq!(
                Compiler::from_value(Some(compiler.as_str())),
                compiler,
                "as_str spells what from_value reads"
            );
        }
    }

    #[test]
    fn the_pool_size_comes_from_the_environment_when_it_is_a_count() {
        assert_eq!(pool_instances_from(None), DEFAULT_POOL_INSTANCES);
        assert_eq!(pool_instances_from(Some(" 20000 ")), 20_000);
        for bad in ["", "0", "-3", "many", "1e5", "99999999999"] {
            assert_eq!(
                pool_instances_from(Some(bad)),
                DEFAULT_POOL_INSTANCES,
                "{bad}"
            );
        }
    }

    #[test]
    fn a_pool_the_os_cannot_map_names_the_limits_to_raise() {
        let options = EngineOptions {
            pool_instances: 100_000,
            ..EngineOptions::default()
        };
        // As wasmtime's pool reports it: the errno of `mprotect`, under its context.
        let e = wasmtime::Error::new(rustix::io::Errno::NOMEM)
            .context("failed to protect stack guard page");
        let text = explain_pool_error(&e, &options);
        assert!(
            text.starts_with("failed to protect stack guard page: Cannot allocate memory"),
            "{text}"
        );
        assert!(text.contains("400000 memory mappings"), "{text}");
        assert!(text.contains("sysctl -w vm.max_map_count=524288"), "{text}");
        assert!(text.contains("SEAM_POOL_INSTANCES"), "{text}");
        // The same errno as an `io::Error` is recognised too.
        let io = wasmtime::Error::new(std::io::Error::from_raw_os_error(libc::ENOMEM))
            .context("failed to create memory pool mapping");
        assert!(explain_pool_error(&io, &options).contains("SEAM_POOL_INSTANCES"));
        // Another failure is passed on as it is, whatever its words.
        let other = wasmtime::Error::msg("unsupported setting");
        assert_eq!(explain_pool_error(&other, &options), "unsupported setting");
        let other =
            wasmtime::Error::new(rustix::io::Errno::INVAL).context("Cannot allocate memory");
        assert!(!explain_pool_error(&other, &options).contains("SEAM_POOL_INSTANCES"));
    }

    #[tokio::test]
    async fn every_pool_slot_holds_a_component_of_many_core_instances() {
        let options = EngineOptions {
            cache_dir: None,
            pool_instances: 2,
            ..EngineOptions::default()
        };
        let seam = SeamEngine::new(&options).unwrap();
        let component = Component::new(&seam.engine, component_of_core_instances(20)).unwrap();
        let pre = Linker::<()>::new(&seam.engine)
            .instantiate_pre(&component)
            .unwrap();
        // Both slots at once, 40 core instances live.
        let mut stores = [(), ()].map(|()| Store::new(&seam.engine, ()));
        let [a, b] = &mut stores;
        let (first, second) = tokio::join!(
            pre.instantiate_async(&mut *a),
            pre.instantiate_async(&mut *b)
        );
        first.unwrap();
        second.unwrap();
    }
}
