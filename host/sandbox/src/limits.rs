//! Resource limits of a plugin: what one store may use (memory, tables, instances, CPU) and what
//! the host allows its runs (wall-clock time, concurrency, output size).
//!
//! Every limit hit ends only the run or call that hit it, with a [`LimitHit`] that names the
//! plugin and the limit by its config key.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

const MIB: usize = 1 << 20;

/// Resource limits applied to a plugin. [`HostOptions::limits`](crate::HostOptions) holds the
/// host-wide defaults; a config entry's `[plugin.limits]` table overrides them one by one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest size of one linear memory, in bytes (`memory_mb`).
    pub memory_bytes: usize,
    /// Most elements of one table (`table_elements`).
    pub table_elements: usize,
    /// Most component and core instances in one store (`instances`).
    pub instances: usize,
    /// CPU time one call into the component (a run, a tool call, a describe) may use, counted in
    /// epoch ticks while guest code executes (`cpu_ms_per_call`).
    pub cpu_per_call: Duration,
    /// CPU time one `describe` or `bind` may use (`describe_cpu_ms`): these run on every
    /// command that loads the plugin, so their budget is small.
    pub describe_cpu: Duration,
    /// Wall-clock time one run or tool call may take once it is running (`run_timeout_ms`).
    pub run_timeout: Duration,
    /// Runs of one provider (or calls of one tool) running at once (`max_concurrent_runs`).
    pub max_concurrent_runs: usize,
    /// What happens to a run started beyond `max_concurrent_runs` (`on_concurrency`).
    pub on_concurrency: OnConcurrency,
    /// Largest result (output blocks plus structured answer) and largest request that may cross
    /// the boundary, in bytes (`max_output_bytes`).
    pub max_output_bytes: usize,
    /// Host memory the plugin may make the host hold through its imports, in bytes
    /// (`host_memory_mb`): messages queued to a child, runs a tool call holds, their requests.
    pub host_memory_bytes: usize,
    /// Runs one tool call may hold at once, started and not yet disposed (`max_runs_per_call`).
    pub max_runs_per_call: usize,
    /// Messages queued to one child and not yet delivered (`max_queued_messages`).
    pub max_queued_messages: usize,
    /// Bytes the plugin may write through its writable `dirs` grants, over all its stores and
    /// for as long as its entry is loaded (`max_write_mb`). A file grown by `set-size` or by
    /// writing past its end counts the growth; deleting files gives nothing back.
    pub max_write_bytes: u64,
    /// Files (and directories and links) the plugin may create through its writable `dirs`
    /// grants, over all its stores and for as long as its entry is loaded (`max_files`).
    pub max_files: u64,
    /// Wall-clock time one outgoing HTTP request may take, from connecting to the last byte of
    /// its response (`http_timeout_ms`); the run's own `run_timeout_ms` bounds it too.
    pub http_timeout: Duration,
    /// Bytes of request and response bodies one outgoing HTTP request may carry
    /// (`max_http_mb`); past it, the body fails with the wasi:http size error.
    pub max_http_bytes: u64,
    /// Connections the plugin may hold open at once, over all its stores
    /// (`max_http_connections`): wasi:http requests in flight (until their connection closes)
    /// and sockets. Each is a descriptor of the host's.
    pub max_http_connections: usize,
}

/// Default of `max_write_mb`.
pub const DEFAULT_MAX_WRITE_MB: u64 = 64;

/// Default of `max_files`.
pub const DEFAULT_MAX_FILES: u64 = 1_000;
/// Default of `http_timeout_ms`.
pub const DEFAULT_HTTP_TIMEOUT_MS: u64 = 60_000;
/// Default of `max_http_mb`.
pub const DEFAULT_MAX_HTTP_MB: u64 = 16;
/// Default of `max_http_connections`: more than an agent's parallel model calls need, far fewer
/// than the host's descriptors.
pub const DEFAULT_MAX_HTTP_CONNECTIONS: usize = 32;

/// Default of `host_memory_mb`: enough for a fan-out tool's requests and a child's queued
/// prompts, small enough that the attacks of the hostile suite stay far below 100 MB.
pub const DEFAULT_HOST_MEMORY_MB: usize = 32;

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 * MIB,
            table_elements: 20_000,
            instances: 64,
            cpu_per_call: Duration::from_secs(10),
            describe_cpu: Duration::from_secs(1),
            run_timeout: Duration::from_secs(600),
            max_concurrent_runs: 64,
            on_concurrency: OnConcurrency::Wait,
            max_output_bytes: MIB,
            host_memory_bytes: DEFAULT_HOST_MEMORY_MB * MIB,
            max_runs_per_call: 64,
            max_queued_messages: 64,
            max_write_bytes: DEFAULT_MAX_WRITE_MB << 20,
            max_files: DEFAULT_MAX_FILES,
            http_timeout: Duration::from_millis(DEFAULT_HTTP_TIMEOUT_MS),
            max_http_bytes: DEFAULT_MAX_HTTP_MB << 20,
            max_http_connections: DEFAULT_MAX_HTTP_CONNECTIONS,
        }
    }
}

impl Limits {
    /// One line for people, for example `64 MiB memory, 10000 ms CPU per call, ...`.
    pub fn summary(&self) -> String {
        format!(
            "{} MiB memory, {} table elements, {} instances, {} ms CPU per call, {} ms CPU per \
             describe, {} ms per run, {} runs at once ({}), {} output bytes, {} MiB host memory, \
             {} runs per call, {} queued messages, {} MiB written, {} files created, {} ms per \
             HTTP request, {} MiB per HTTP request, {} connections",
            self.memory_bytes / MIB,
            self.table_elements,
            self.instances,
            millis(self.cpu_per_call),
            millis(self.describe_cpu),
            millis(self.run_timeout),
            self.max_concurrent_runs,
            self.on_concurrency.as_str(),
            self.max_output_bytes,
            self.host_memory_bytes / MIB,
            self.max_runs_per_call,
            self.max_queued_messages,
            self.max_write_bytes >> 20,
            self.max_files,
            millis(self.http_timeout),
            self.max_http_bytes >> 20,
            self.max_http_connections
        )
    }
}

/// Shown by `seam check` under the config keys.
impl Serialize for Limits {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Limits", 17)?;
        st.serialize_field(key::MEMORY_MB, &(self.memory_bytes / MIB))?;
        st.serialize_field(key::TABLE_ELEMENTS, &self.table_elements)?;
        st.serialize_field(key::INSTANCES, &self.instances)?;
        st.serialize_field(key::CPU_MS_PER_CALL, &millis(self.cpu_per_call))?;
        st.serialize_field(key::DESCRIBE_CPU_MS, &millis(self.describe_cpu))?;
        st.serialize_field(key::RUN_TIMEOUT_MS, &millis(self.run_timeout))?;
        st.serialize_field(key::MAX_CONCURRENT_RUNS, &self.max_concurrent_runs)?;
        st.serialize_field(key::ON_CONCURRENCY, &self.on_concurrency)?;
        st.serialize_field(key::MAX_OUTPUT_BYTES, &self.max_output_bytes)?;
        st.serialize_field(key::HOST_MEMORY_MB, &(self.host_memory_bytes / MIB))?;
        st.serialize_field(key::MAX_RUNS_PER_CALL, &self.max_runs_per_call)?;
        st.serialize_field(key::MAX_QUEUED_MESSAGES, &self.max_queued_messages)?;
        st.serialize_field(key::MAX_WRITE_MB, &(self.max_write_bytes >> 20))?;
        st.serialize_field(key::MAX_FILES, &self.max_files)?;
        st.serialize_field(key::HTTP_TIMEOUT_MS, &millis(self.http_timeout))?;
        st.serialize_field(key::MAX_HTTP_MB, &(self.max_http_bytes >> 20))?;
        st.serialize_field(key::MAX_HTTP_CONNECTIONS, &self.max_http_connections)?;
        st.end()
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What happens to a run started while its provider is at `max_concurrent_runs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnConcurrency {
    /// The run waits (cancellable) until a running one ends; its time budget starts then.
    Wait,
    /// The run fails before its child exists: `started` rejects with `START_FAILED` naming
    /// `max_concurrent_runs` (no lifecycle events).
    Refuse,
}

impl OnConcurrency {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Wait => "wait",
            Self::Refuse => "refuse",
        }
    }
}

/// A config entry's `[plugin.limits]`: each key overrides one host-wide default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitOverrides {
    /// `memory_mb`.
    pub memory_mb: Option<u64>,
    /// `table_elements`.
    pub table_elements: Option<u64>,
    /// `instances`.
    pub instances: Option<u64>,
    /// `cpu_ms_per_call`.
    pub cpu_ms_per_call: Option<u64>,
    /// `describe_cpu_ms`.
    pub describe_cpu_ms: Option<u64>,
    /// `run_timeout_ms`.
    pub run_timeout_ms: Option<u64>,
    /// `max_concurrent_runs`.
    pub max_concurrent_runs: Option<u64>,
    /// `on_concurrency`.
    pub on_concurrency: Option<OnConcurrency>,
    /// `max_output_bytes`.
    pub max_output_bytes: Option<u64>,
    /// `host_memory_mb`.
    pub host_memory_mb: Option<u64>,
    /// `max_runs_per_call`.
    pub max_runs_per_call: Option<u64>,
    /// `max_queued_messages`.
    pub max_queued_messages: Option<u64>,
    /// `max_write_mb`.
    pub max_write_mb: Option<u64>,
    /// `max_files`.
    pub max_files: Option<u64>,
    /// `http_timeout_ms`.
    pub http_timeout_ms: Option<u64>,
    /// `max_http_mb`.
    pub max_http_mb: Option<u64>,
    /// `max_http_connections`.
    pub max_http_connections: Option<u64>,
}

/// The keys of `[plugin.limits]`, the one place they are spelled.
pub mod key {
    /// `memory_mb`.
    pub const MEMORY_MB: &str = "memory_mb";
    /// `table_elements`.
    pub const TABLE_ELEMENTS: &str = "table_elements";
    /// `instances`.
    pub const INSTANCES: &str = "instances";
    /// `cpu_ms_per_call`.
    pub const CPU_MS_PER_CALL: &str = "cpu_ms_per_call";
    /// `describe_cpu_ms`.
    pub const DESCRIBE_CPU_MS: &str = "describe_cpu_ms";
    /// `run_timeout_ms`.
    pub const RUN_TIMEOUT_MS: &str = "run_timeout_ms";
    /// `max_concurrent_runs`.
    pub const MAX_CONCURRENT_RUNS: &str = "max_concurrent_runs";
    /// `on_concurrency`.
    pub const ON_CONCURRENCY: &str = "on_concurrency";
    /// `max_output_bytes`.
    pub const MAX_OUTPUT_BYTES: &str = "max_output_bytes";
    /// `host_memory_mb`.
    pub const HOST_MEMORY_MB: &str = "host_memory_mb";
    /// `max_runs_per_call`.
    pub const MAX_RUNS_PER_CALL: &str = "max_runs_per_call";
    /// `max_queued_messages`.
    pub const MAX_QUEUED_MESSAGES: &str = "max_queued_messages";
    /// `max_write_mb`.
    pub const MAX_WRITE_MB: &str = "max_write_mb";
    /// `max_files`.
    pub const MAX_FILES: &str = "max_files";
    /// `http_timeout_ms`.
    pub const HTTP_TIMEOUT_MS: &str = "http_timeout_ms";
    /// `max_http_mb`.
    pub const MAX_HTTP_MB: &str = "max_http_mb";
    /// `max_http_connections`.
    pub const MAX_HTTP_CONNECTIONS: &str = "max_http_connections";
}

/// The keys of `[plugin.limits]`.
pub const LIMIT_KEYS: &[&str] = &[
    key::MEMORY_MB,
    key::TABLE_ELEMENTS,
    key::INSTANCES,
    key::CPU_MS_PER_CALL,
    key::DESCRIBE_CPU_MS,
    key::RUN_TIMEOUT_MS,
    key::MAX_CONCURRENT_RUNS,
    key::ON_CONCURRENCY,
    key::MAX_OUTPUT_BYTES,
    key::HOST_MEMORY_MB,
    key::MAX_RUNS_PER_CALL,
    key::MAX_QUEUED_MESSAGES,
    key::MAX_WRITE_MB,
    key::MAX_FILES,
    key::HTTP_TIMEOUT_MS,
    key::MAX_HTTP_MB,
    key::MAX_HTTP_CONNECTIONS,
];

/// Largest `memory_mb` a config may ask for; the engine's pool slot may be smaller still.
pub const MAX_MEMORY_MB: u64 = 4096;

impl LimitOverrides {
    /// `base` with every given key applied.
    pub fn apply(&self, base: &Limits) -> Limits {
        let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        Limits {
            memory_bytes: self
                .memory_mb
                .map(|mb| size(mb).saturating_mul(MIB))
                .unwrap_or(base.memory_bytes),
            table_elements: self.table_elements.map(size).unwrap_or(base.table_elements),
            instances: self.instances.map(size).unwrap_or(base.instances),
            cpu_per_call: self
                .cpu_ms_per_call
                .map(Duration::from_millis)
                .unwrap_or(base.cpu_per_call),
            describe_cpu: self
                .describe_cpu_ms
                .map(Duration::from_millis)
                .unwrap_or(base.describe_cpu),
            run_timeout: self
                .run_timeout_ms
                .map(Duration::from_millis)
                .unwrap_or(base.run_timeout),
            max_concurrent_runs: self
                .max_concurrent_runs
                .map(size)
                .unwrap_or(base.max_concurrent_runs),
            on_concurrency: self.on_concurrency.unwrap_or(base.on_concurrency),
            max_output_bytes: self
                .max_output_bytes
                .map(size)
                .unwrap_or(base.max_output_bytes),
            host_memory_bytes: self
                .host_memory_mb
                .map(|mb| size(mb).saturating_mul(MIB))
                .unwrap_or(base.host_memory_bytes),
            max_runs_per_call: self
                .max_runs_per_call
                .map(size)
                .unwrap_or(base.max_runs_per_call),
            max_queued_messages: self
                .max_queued_messages
                .map(size)
                .unwrap_or(base.max_queued_messages),
            max_write_bytes: self
                .max_write_mb
                .map(|mb| mb.saturating_mul(1 << 20))
                .unwrap_or(base.max_write_bytes),
            max_files: self.max_files.unwrap_or(base.max_files),
            http_timeout: self
                .http_timeout_ms
                .map(Duration::from_millis)
                .unwrap_or(base.http_timeout),
            max_http_bytes: self
                .max_http_mb
                .map(|mb| mb.saturating_mul(1 << 20))
                .unwrap_or(base.max_http_bytes),
            max_http_connections: self
                .max_http_connections
                .map(size)
                .unwrap_or(base.max_http_connections),
        }
    }
}

/// Which limit was hit, with the value in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limit {
    /// A linear memory would have grown past the cap.
    Memory {
        /// The cap, in bytes.
        max: usize,
        /// The size asked for, in bytes.
        desired: usize,
    },
    /// A table would have grown past the cap.
    TableElements {
        /// The cap.
        max: usize,
        /// The size asked for.
        desired: usize,
    },
    /// The call used up its CPU budget.
    Cpu {
        /// The budget.
        budget: Duration,
    },
    /// A `describe` or `bind` used up its CPU budget.
    DescribeCpu {
        /// The budget.
        budget: Duration,
    },
    /// The run or tool call took longer than its wall-clock budget.
    RunTimeout {
        /// The budget.
        budget: Duration,
    },
    /// The provider was at its concurrency cap and the entry refuses excess runs.
    Concurrency {
        /// The cap.
        max: usize,
    },
    /// A result or request was larger than the cap.
    Output {
        /// The cap, in bytes.
        max: usize,
        /// The size seen, in bytes.
        size: usize,
    },
    /// An import would have made the host hold more of the plugin's data than its budget.
    HostMemory {
        /// The budget, in bytes.
        max: usize,
        /// Bytes already held for the plugin.
        used: usize,
        /// Bytes the import asked to keep.
        asked: usize,
    },
    /// A tool call tried to hold more runs at once than allowed.
    RunsPerCall {
        /// The cap.
        max: usize,
    },
    /// More messages were queued to one child than allowed.
    QueuedMessages {
        /// The cap.
        max: usize,
    },
    /// A write through a writable grant would have passed the plugin's disk quota.
    WriteBytes {
        /// The quota, in bytes.
        max: u64,
        /// Bytes already written.
        used: u64,
        /// Bytes the write asked for.
        asked: u64,
    },
    /// Creating a file through a writable grant would have passed the plugin's file quota.
    Files {
        /// The quota.
        max: u64,
    },
    /// A request or socket would have passed the plugin's open connections.
    HttpConnections {
        /// The cap.
        max: usize,
    },
}

impl Limit {
    /// The config key of this limit, under `[plugin.limits]`.
    pub fn key(&self) -> &'static str {
        match self {
            Self::Memory { .. } => key::MEMORY_MB,
            Self::TableElements { .. } => key::TABLE_ELEMENTS,
            Self::Cpu { .. } => key::CPU_MS_PER_CALL,
            Self::DescribeCpu { .. } => key::DESCRIBE_CPU_MS,
            Self::RunTimeout { .. } => key::RUN_TIMEOUT_MS,
            Self::Concurrency { .. } => key::MAX_CONCURRENT_RUNS,
            Self::Output { .. } => key::MAX_OUTPUT_BYTES,
            Self::HostMemory { .. } => key::HOST_MEMORY_MB,
            Self::RunsPerCall { .. } => key::MAX_RUNS_PER_CALL,
            Self::QueuedMessages { .. } => key::MAX_QUEUED_MESSAGES,
            Self::WriteBytes { .. } => key::MAX_WRITE_MB,
            Self::Files { .. } => key::MAX_FILES,
            Self::HttpConnections { .. } => key::MAX_HTTP_CONNECTIONS,
        }
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Memory { max, desired } => write!(
                f,
                "a linear memory may hold at most {} MiB; the guest asked for {} bytes",
                max / MIB,
                desired
            ),
            Self::TableElements { max, desired } => write!(
                f,
                "a table may hold at most {max} elements; the guest asked for {desired}"
            ),
            Self::Cpu { budget } => write!(
                f,
                "one call may use at most {} ms of CPU time",
                millis(*budget)
            ),
            Self::DescribeCpu { budget } => write!(
                f,
                "describe or bind may use at most {} ms of CPU time",
                millis(*budget)
            ),
            Self::RunTimeout { budget } => {
                write!(f, "one run may take at most {} ms", millis(*budget))
            }
            Self::Concurrency { max } => write!(
                f,
                "at most {max} runs may run at once, and excess runs are refused"
            ),
            Self::Output { max, size } => write!(
                f,
                "at most {max} bytes may cross the boundary; the guest sent {size}"
            ),
            Self::HostMemory { max, used, asked } => write!(
                f,
                "the host may hold at most {} MiB for the plugin; it holds {used} bytes and \
                 was asked to keep {asked} more",
                max / MIB
            ),
            Self::RunsPerCall { max } => write!(
                f,
                "one tool call may hold at most {max} runs that are not disposed"
            ),
            Self::QueuedMessages { max } => {
                write!(f, "at most {max} messages may wait for one child")
            }
            Self::WriteBytes { max, used, asked } => write!(
                f,
                "the plugin may write at most {} MiB through its grants; it wrote {used} bytes \
                 and asked for {asked} more",
                max >> 20
            ),
            Self::Files { max } => write!(
                f,
                "the plugin may create at most {max} files through its grants"
            ),
            Self::HttpConnections { max } => write!(
                f,
                "the plugin may hold at most {max} connections (HTTP requests and sockets) open \
                 at once"
            ),
        }
    }
}

/// A plugin hit one of its limits. The run or call that hit it ends; nothing else does.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("plugin `{plugin}` hit its limit `{}`: {limit}", limit.key())]
pub struct LimitHit {
    /// The plugin id.
    pub plugin: String,
    /// The limit.
    pub limit: Limit,
}

impl LimitHit {
    pub fn new(plugin: &str, limit: Limit) -> Self {
        Self {
            plugin: plugin.to_string(),
            limit,
        }
    }

    /// A hit of `plugin`'s `limit`, logged at `warn` with the limit's key: every limit the host
    /// enforces is reported this one way.
    pub fn logged(plugin: &str, limit: Limit) -> Self {
        let hit = Self::new(plugin, limit);
        tracing::warn!(plugin, limit = hit.limit.key(), "{hit}");
        hit
    }
}

/// Longest line of guest output logged; the rest of the line is cut.
pub const MAX_LINE: usize = 4096;
/// Bytes of output (stdout, stderr and `host.log` together) one store may log.
pub const LOG_BUDGET: usize = 256 * 1024;

impl From<LimitHit> for seam_core::subagent::RunFailure {
    fn from(hit: LimitHit) -> Self {
        seam_core::subagent::RunFailure::LimitHit {
            limit: hit.limit.key().to_string(),
            detail: hit.limit.to_string(),
            plugin: hit.plugin,
        }
    }
}
