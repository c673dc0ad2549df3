//! `seam`: the command line. Argument parsing, logging, the runtime, Ctrl-C, and exit codes.
//!
//! Exit codes: 0 success; 1 any error (bad arguments, bad config, a plugin that fails to load,
//! a run that cannot start); 2 a run that ended with a stop reason other than `completed`, or a
//! tool call that returned an error result; 130 interrupted by Ctrl-C (SIGINT); 143 ended by
//! SIGTERM. Whatever ends the command, every process a provider started, and everything those
//! started, is ended and reaped before it exits.

/// `println!` that does not panic when stdout is closed (piped into `head`, say): output that
/// nobody reads is dropped.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// `eprintln!` that does not panic when stderr is closed.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

mod a2a;
mod acp;
mod approvals;
mod cache;
mod call;
mod cassette;
mod check;
mod conformance;
mod delegate;
mod dev;
mod http_guard;
mod inspect;
mod mcp;
mod metrics;
mod new;
mod oci;
mod pictures;
mod recording;
mod replay;
mod run;
mod sessions;
mod trace;
mod tree;
mod ui;
mod wit;
mod worker;

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use seam_host::{Config, Host, HostOptions, ListenerId, LoadReport};
use tokio_util::sync::CancellationToken;

/// A run makes about a hundred small allocations, many freed on another thread than the one
/// that made them; mimalloc serves them in about a third of glibc's instructions (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Everything went as asked.
pub(crate) const EXIT_OK: u8 = 0;
/// Something could not be done.
pub(crate) const EXIT_ERROR: u8 = 1;
/// The run or tool call finished, but not successfully.
pub(crate) const EXIT_UNSUCCESSFUL: u8 = 2;
/// Interrupted by Ctrl-C.
pub(crate) const EXIT_INTERRUPTED: u8 = 130;
/// Ended by SIGTERM.
pub(crate) const EXIT_TERMINATED: u8 = 143;

/// What `seam --help` says about the environment.
const ENVIRONMENT: &str = "Environment:
  SEAM_CACHE_DIR     where compiled components are cached (default $XDG_CACHE_HOME/seam or ~/.cache/seam)
  SEAM_CACHE_MAX_MB  most MiB the cache keeps, least recently used evicted first (default 1024)
  SEAM_OCI_CA_FILE   more trusted roots (PEM) for registries, when a config's [oci] has no ca_file
  DOCKER_CONFIG      where the Docker config file with registry credentials is (default ~/.docker)
  SEAM_COMPILER      tiered (the default: winch first for a large guest, cranelift in the background
                     and swapped in), cranelift or winch: winch compiles large guests faster, for
                     development
  SEAM_POOL_INSTANCES  most component instances alive at once in the host's pool (default 1000)
  SEAM_CONTAINMENT   how the processes of ACP agents are contained: cgroup (a cgroup v2 each, the
                     default where one can be made) or subreaper
  XDG_STATE_HOME     where `seam run` keeps its sessions without `[sessions] store`
                     (default ~/.local/state; the file is seam/sessions.db)
  RUST_LOG           log filter, to stderr (default warn; seam_host=debug shows what plugins log)";

/// Seam: a host in which subagent providers and tools are WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "seam", version, about, long_about = None, after_help = ENVIRONMENT)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show what a component is (provider, tool or observer), what it imports and exports, and what it
    /// declares with a given config.
    Inspect(inspect::Args),
    /// Load a config and report every plugin; exit 1 if anything fails to load or mount.
    Check(check::Args),
    /// Load a config and run one subagent on a provider; print its output.
    Delegate(delegate::Args),
    /// Load a config and call one mounted tool; print its result.
    Call(call::Args),
    /// Load a config and let a top-level agent answer a prompt with the mounted tools.
    Run(run::Args),
    /// List, show, and remove the sessions `seam run` kept; print a session's event stream or
    /// delegation tree.
    Sessions(sessions::Args),
    /// List the requests for approval kept in a session store, and allow or deny one from here.
    Approvals(approvals::Args),
    /// Run a recorded session (or a cassette) again with its recorded model replies and the
    /// components for real; report the first place it diverges.
    Replay(replay::Args),
    /// Write the WIT package this host supports (for a plugin's `wit/` folder).
    Wit(wit::Args),
    /// Create a plugin project (provider, tool or observer) that builds outside this repository.
    New(new::Args),
    /// Check that a component behaves as the contract says: describe, run, cancel, dispose.
    Test(conformance::Args),
    /// Look at, trim or empty the compile cache.
    Cache(cache::CacheArgs),
    /// Compile every component of a config into the cache ahead of time.
    Compile(cache::CompileArgs),
    /// Serve the config's top-level agent over the Agent Client Protocol on stdio (for an editor
    /// that speaks ACP).
    Acp(acp::Args),
    /// Serve the config's top-level agent as an A2A 1.0 agent over HTTP (JSON-RPC, with its
    /// agent card): a context is a top-level session, a task one of its turns.
    A2a(a2a::Args),
    /// Serve the console: a local web page where a person watches the sessions of the config's
    /// store live, and steers, interrupts, approves and replays their trees.
    Ui(ui::Args),
    /// Serve the config's providers to a NATS cluster until SIGTERM or Ctrl-C, then drain.
    Worker(worker::Args),
    /// Serve every mounted tool (Wasm tools, subagent tools, background control tools) to an
    /// MCP client, over stdio or streamable HTTP.
    Mcp(mcp::Args),
    /// Resolve every `oci://` component of a config at its registry, check it, and write the
    /// config's lock file (`seam.lock` beside `seam.toml`).
    Lock(oci::lock::Args),
    /// Fetch and check every `oci://` component of a config into the store, so that loading it
    /// needs no registry.
    Pull(oci::pull::Args),
    /// Publish a component to a registry as a Wasm OCI artifact.
    Push(oci::push::Args),
    /// Sign a component in a registry with a key, as cosign signs (cosign verifies it).
    Sign(oci::sign::Args),
    /// Keep a host up on a config, reloading what changes (the config, a rebuilt component)
    /// and running a command after each reload.
    Dev(dev::Args),
}

impl Command {
    /// The name of the command's root span, for a command that ends on its own (`seam run`);
    /// `None` for a server (`acp`, `worker`, `mcp`, `dev`), whose requests are traces of their
    /// own rather than parts of one trace as long as the process.
    fn traced_as(&self) -> Option<&'static str> {
        Some(match self {
            Command::Inspect(_) => "seam inspect",
            Command::Check(_) => "seam check",
            Command::Delegate(_) => "seam delegate",
            Command::Call(_) => "seam call",
            Command::Run(_) => "seam run",
            Command::Replay(_) => "seam replay",
            Command::Test(_) => "seam test",
            Command::Compile(_) => "seam compile",
            Command::Lock(_) => "seam lock",
            Command::Pull(_) => "seam pull",
            Command::Push(_) => "seam push",
            Command::Sign(_) => "seam sign",
            Command::Sessions(_)
            | Command::Approvals(_)
            | Command::Wit(_)
            | Command::New(_)
            | Command::Cache(_)
            | Command::Acp(_)
            | Command::A2a(_)
            | Command::Ui(_)
            | Command::Worker(_)
            | Command::Mcp(_)
            | Command::Dev(_) => return None,
        })
    }
}

/// Parses the arguments, runs the command, and maps the outcome to an exit code.
fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // `--help` and `--version` arrive here too, as "errors" that go to stdout.
            let code = if e.use_stderr() { EXIT_ERROR } else { EXIT_OK };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    init_tracing();
    // Before the runtime: the OTLP exporter's blocking client makes a runtime of its own.
    let telemetry = match seam_host::telemetry::Telemetry::install_from_env() {
        Ok(t) => t,
        Err(e) => return report_error(&anyhow::Error::new(e)),
    };
    // One command, one trace: what it loads and runs lies under a root span named for it.
    if let (Some(telemetry), Some(name)) = (&telemetry, cli.command.traced_as()) {
        telemetry.begin_command(name);
    }

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
    {
        Ok(rt) => rt,
        Err(e) => return report_error(&e),
    };
    let (code, failed) = runtime.block_on(async move {
        let (interrupt, signalled) = watch_signals();
        // A server whose normal end is a signal: it winds down and exits 0.
        let ends_on_signal = matches!(cli.command, Command::A2a(_) | Command::Ui(_));
        let outcome = match cli.command {
            Command::Inspect(args) => inspect::run(args, &interrupt).await,
            Command::Check(args) => check::run(args, &interrupt).await,
            Command::Delegate(args) => delegate::run(args, interrupt.clone()).await,
            Command::Call(args) => call::run(args, interrupt.clone()).await,
            Command::Run(args) => run::run(args, interrupt.clone()).await,
            Command::Wit(args) => wit::run(args),
            Command::Sessions(args) => sessions::run(args),
            Command::Approvals(args) => approvals::run(args),
            Command::Replay(args) => replay::run(args, interrupt.clone()).await,
            Command::Cache(args) => cache::run_cache(args),
            Command::Test(args) => conformance::run(args, &interrupt).await,
            Command::New(args) => new::run(args),
            Command::Compile(args) => cache::run_compile(args, &interrupt).await,
            Command::Dev(args) => dev::run(args, interrupt.clone()).await,
            Command::Acp(args) => acp::run(args, interrupt.clone()).await,
            Command::A2a(args) => a2a::run(args, interrupt.clone()).await,
            Command::Ui(args) => ui::run(args, interrupt.clone()).await,
            Command::Worker(args) => worker::run(args, interrupt.clone()).await,
            Command::Mcp(args) => mcp::run(args, interrupt.clone()).await,
            Command::Lock(args) => oci::lock::run(args).await,
            Command::Pull(args) => oci::pull::run(args).await,
            Command::Push(args) => oci::push::run(args, &interrupt).await,
            Command::Sign(args) => oci::sign::run(args).await,
        };
        if interrupt.is_cancelled() && !(ends_on_signal && outcome.is_ok()) {
            errln!("interrupted");
            return (exit_code_for(&signalled), Some("interrupted".to_string()));
        }
        match outcome {
            Ok(code) => (code, None),
            Err(e) => {
                let message = chain(&e);
                errln!("error: {message}");
                (EXIT_ERROR, Some(message))
            }
        }
    });
    // Plugins are unloaded by then; a blocking task still compiling must not hold up the exit.
    runtime.shutdown_background();
    // Each command has ended its processes; this catches any whose ending was cut short.
    seam_host::process::shutdown();
    if let Some(telemetry) = telemetry {
        telemetry.end_command(code, failed.as_deref());
        telemetry.shutdown(std::time::Duration::from_secs(5));
    }
    ExitCode::from(code)
}

fn report_error(e: &anyhow::Error) -> ExitCode {
    errln!("error: {}", chain(e));
    ExitCode::from(EXIT_ERROR)
}

/// The error and its causes on one line, `outer: inner: ...`. A cause whose text the message
/// already contains is skipped: several library errors repeat their source in their own text.
pub(crate) fn chain(e: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if message.contains(&text) {
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    message
}

/// Logs go to stderr; `RUST_LOG` filters them. The default is `warn`, except for the loader's
/// warnings about plugins that fail to load: the commands report those themselves.
fn init_tracing() {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("warn,seam_host::loader=error"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .without_time()
        .init();
}

/// Which signal cancelled the command: 0 none yet, else its number.
type Signalled = std::sync::Arc<std::sync::atomic::AtomicI32>;

const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;

/// The exit code for a command that a signal cancelled.
fn exit_code_for(signalled: &Signalled) -> u8 {
    if signalled.load(std::sync::atomic::Ordering::SeqCst) == SIGTERM {
        EXIT_TERMINATED
    } else {
        EXIT_INTERRUPTED
    }
}

/// The next SIGINT or SIGTERM, by number.
async fn next_signal(
    int: &mut tokio::signal::unix::Signal,
    term: &mut tokio::signal::unix::Signal,
) -> i32 {
    tokio::select! {
        _ = int.recv() => SIGINT,
        _ = term.recv() => SIGTERM,
    }
}

/// A token cancelled by the first Ctrl-C (SIGINT) or SIGTERM; a second one exits at once, after
/// killing every process a provider started.
fn watch_signals() -> (CancellationToken, Signalled) {
    use tokio::signal::unix::{signal, SignalKind};
    let token = CancellationToken::new();
    let signalled = Signalled::default();
    let (cancel, record) = (token.clone(), signalled.clone());
    tokio::spawn(async move {
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        let first = next_signal(&mut int, &mut term).await;
        record.store(first, std::sync::atomic::Ordering::SeqCst);
        errln!("cancelling (press Ctrl-C again to exit at once)");
        cancel.cancel();
        next_signal(&mut int, &mut term).await;
        seam_host::process::shutdown();
        std::process::exit(i32::from(exit_code_for(&record)));
    });
    (token, signalled)
}

/// Creates a host, runs `body` with it, and unloads every plugin whatever `body` returned.
pub(crate) async fn with_host<T, F, Fut>(body: F) -> Result<T>
where
    F: FnOnce(Host) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    with_host_options(HostOptions::default(), body).await
}

/// [`with_host`], with `options`.
pub(crate) async fn with_host_options<T, F, Fut>(options: HostOptions, body: F) -> Result<T>
where
    F: FnOnce(Host) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    with_host_in(Host::new(options), body).await
}

/// [`with_host`] on a host that keeps its sessions in `store`.
pub(crate) async fn with_host_store<T, F, Fut>(
    store: std::sync::Arc<dyn seam_host::session_store::SessionStore>,
    body: F,
) -> Result<T>
where
    F: FnOnce(Host) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    with_host_in(Host::with_store(HostOptions::default(), store), body).await
}

/// The session store `config` names (`[sessions]`), opened before anything runs: a store that
/// cannot be written fails the command first.
pub(crate) fn config_store(
    config: &seam_host::Config,
) -> Result<std::sync::Arc<dyn seam_host::session_store::SessionStore>> {
    let opened = sessions::open(
        config.sessions.store.as_ref(),
        &config.sessions,
        config.cluster.as_ref(),
    )?;
    Ok(opened.store)
}

async fn with_host_in<T, F, Fut>(host: Result<Host, seam_host::EngineError>, body: F) -> Result<T>
where
    F: FnOnce(Host) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let host = host.context("cannot create the host")?;
    let outcome = body(host.clone()).await;
    host.unload_all().await;
    // Whatever the store still has queued is written before the process exits.
    if let Err(e) = host.events().store().flush() {
        errln!("warning: the session store could not write its last records: {e}");
    }
    outcome
}

/// Reads the config at `path`, loads it into a fresh host (warning about each plugin that
/// failed), runs `body` on the host, and unloads every plugin whatever `body` returned.
pub(crate) async fn with_loaded<T, F, Fut>(
    path: &Path,
    interrupt: &CancellationToken,
    body: F,
) -> Result<T>
where
    F: FnOnce(Host) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let config = read_config(path)?;
    with_host(|host| async move {
        load_for_use(&host, &config, interrupt).await?;
        body(host).await
    })
    .await
}

/// Reads and validates a config file.
pub(crate) fn read_config(path: &Path) -> Result<Config> {
    Ok(Config::from_file(path)?)
}

/// Loads `config` into `host`, printing each plugin that failed as a warning.
pub(crate) async fn load_for_use(
    host: &Host,
    config: &Config,
    interrupt: &CancellationToken,
) -> Result<LoadReport> {
    let report = load_plugins(host, config, interrupt).await?;
    join_cluster(host, config, interrupt).await?;
    Ok(report)
}

/// Loads `config`'s plugins into `host`, printing each that failed as a warning; joins no
/// cluster.
pub(crate) async fn load_plugins(
    host: &Host,
    config: &Config,
    interrupt: &CancellationToken,
) -> Result<LoadReport> {
    let report = interruptible(host.load(config), interrupt).await?;
    for failure in &report.failed {
        errln!("warning: {failure}");
    }
    Ok(report)
}

/// Joins the config's `[cluster]`, if it has one, as a front-end: the providers its workers
/// serve become the host's. A worker joins none (it serves its own providers).
pub(crate) async fn join_cluster(
    host: &Host,
    config: &Config,
    interrupt: &CancellationToken,
) -> Result<()> {
    let Some(cluster) = &config.cluster else {
        return Ok(());
    };
    let providers = interruptible(host.join_cluster(cluster), interrupt)
        .await?
        .with_context(|| {
            format!(
                "cannot join cluster `{}` ([cluster] in the config)",
                cluster.name
            )
        })?;
    tracing::info!(cluster = %cluster.name, providers = ?providers, "joined the cluster");
    Ok(())
}

/// `work`, unless Ctrl-C comes first: then an error at once, even in the middle of a long
/// compile. The process exits right after (a compile still going is dropped with it), so
/// nothing half-loaded outlives the command.
pub(crate) async fn interruptible<T>(
    work: impl Future<Output = T>,
    interrupt: &CancellationToken,
) -> Result<T> {
    tokio::select! {
        out = work => Ok(out),
        () = interrupt.cancelled() => anyhow::bail!("interrupted while loading the plugins"),
    }
}

/// Prints every event as a JSON line on stderr until unsubscribed.
pub(crate) fn print_events(host: &Host) -> ListenerId {
    host.events().subscribe(|event| {
        let mut err = std::io::stderr().lock();
        writeln!(err, "{}", event.to_json())?;
        Ok(())
    })
}

/// The working directory, as the top-level caller's.
pub(crate) fn working_directory() -> Result<String> {
    let cwd: PathBuf = std::env::current_dir().context("cannot read the working directory")?;
    Ok(cwd.to_string_lossy().into_owned())
}
