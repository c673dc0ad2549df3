//! `seam dev CONFIG [--then "delegate --provider P --prompt X"]`: one host kept up while a
//! plugin is being written. It watches the config and every component file, and on a change
//! reconfigures with [`Reload::Swap`]: unchanged entries are untouched, changed ones (a new
//! definition, a rebuilt file) are swapped in once they load, runs going on a replaced provider
//! finish, and a broken rebuild leaves the last good version serving. After each (re)load it
//! prints what changed and the `check` report, then runs the `--then` command on the same host.
//! It compiles with Winch unless `$SEAM_COMPILER` says otherwise: every rebuild is a first load.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use notify::{RecursiveMode, Watcher};
use seam_host::{Compiler, Config, Host, HostOptions, LoadReport, Reload};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{call, chain, check, delegate, interruptible, read_config, with_host_options, EXIT_OK};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The config file (TOML).
    config: PathBuf,
    /// A command run on the host after each (re)load, written as for `seam` but without the
    /// config: `delegate --provider P --prompt X` or `call --tool T --args JSON`.
    #[arg(long, value_name = "COMMAND")]
    then: Option<String>,
    /// How long the files must be quiet before a reload, in milliseconds: a build writes its
    /// output in several steps.
    #[arg(long, value_name = "MS", default_value_t = 200)]
    settle_ms: u64,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArg,
}

/// The `--then` command, parsed once, up front.
enum Then {
    Delegate(delegate::Args),
    Call(call::Args),
}

/// The command line `seam dev` accepts after `--then`: the config is `dev`'s own.
#[derive(Debug, clap::Parser)]
#[command(name = "seam dev --then", no_binary_name = true)]
enum ThenCommand {
    /// Run one subagent on a provider.
    Delegate(delegate::Args),
    /// Call one mounted tool.
    Call(call::Args),
}

fn parse_then(config: &Path, text: &str) -> Result<Then> {
    let Some(words) = shlex::split(text) else {
        bail!("`--then {text}`: unbalanced quotes");
    };
    let Some((command, rest)) = words.split_first() else {
        bail!("`--then` is empty: give `delegate ...` or `call ...`");
    };
    let mut argv = vec![command.clone(), config.to_string_lossy().into_owned()];
    argv.extend(rest.iter().cloned());
    use clap::Parser as _;
    match ThenCommand::try_parse_from(argv) {
        Ok(ThenCommand::Delegate(args)) => Ok(Then::Delegate(args)),
        Ok(ThenCommand::Call(args)) => Ok(Then::Call(args)),
        Err(e) => bail!("`--then {text}`: {}", e.to_string().trim_end()),
    }
}

pub(crate) async fn run(args: Args, interrupt: CancellationToken) -> Result<u8> {
    let then = args
        .then
        .as_deref()
        .map(|text| parse_then(&args.config, text))
        .transpose()?;
    let config_path = std::path::absolute(&args.config)
        .with_context(|| format!("cannot resolve `{}`", args.config.display()))?;
    let config = read_config(&config_path)?;
    let settle = Duration::from_millis(args.settle_ms);
    let mut options = HostOptions::default();
    if std::env::var_os("SEAM_COMPILER").is_none() {
        // Each rebuild is compiled afresh: Winch compiles a Python or JavaScript guest about
        // four times faster than Cranelift, which matters more here than how fast it runs.
        options.engine.compiler = Compiler::Winch;
    }
    outln!(
        "compiling with {} (SEAM_COMPILER)",
        options.engine.compiler.as_str()
    );

    with_host_options(options, |host| async move {
        args.metrics.start(&host, &interrupt).await?;
        let (tx, mut changes) = mpsc::unbounded_channel();
        let mut watcher = notify::recommended_watcher(move |event| {
            // The receiver only goes when `dev` ends.
            let _ = tx.send(event);
        })
        .context("cannot watch files")?;
        let mut watched = Watched::default();

        let report = interruptible(host.load(&config), &interrupt).await?;
        outln!("loaded {}", describe(&report));
        let mut config = config;
        // After a config that does not parse, nothing changed: no report, no command.
        let mut changed = true;
        loop {
            if changed {
                watched.follow(&mut watcher, &config_path, &config);
                for problem in check::report(&host, &args.config, false, None).await? {
                    errln!("error: {problem}");
                }
                if let Some(then) = &then {
                    run_then(&host, then, &interrupt).await;
                }
                outln!(
                    "watching {} and {} component file(s); Ctrl-C to stop",
                    args.config.display(),
                    watched.files.len() - 1
                );
            }
            tokio::select! {
                () = interrupt.cancelled() => break,
                () = watched.next_change(&mut changes, settle) => {}
            }
            match read_config(&config_path) {
                Ok(new) => config = new,
                Err(e) => {
                    errln!("error: {}; still serving the last good config", chain(&e));
                    changed = false;
                    continue;
                }
            }
            let report =
                interruptible(host.reconfigure_with(&config, Reload::Swap), &interrupt).await?;
            outln!("\nreloaded {}", describe(&report));
            changed = true;
        }
        Ok(EXIT_OK)
    })
    .await
}

/// What a (re)load did, on one line: `m (reloaded), t (kept), x (last good kept)`.
fn describe(report: &LoadReport) -> String {
    let mut parts = Vec::new();
    for (ids, what) in [
        (&report.loaded, "loaded"),
        (&report.reloaded, "reloaded"),
        (&report.retried, "retried"),
        (&report.unloaded, "unloaded"),
        (
            &report.kept_last_good,
            "broken: the last good version serves",
        ),
        (&report.kept, "unchanged"),
    ] {
        if !ids.is_empty() {
            parts.push(format!("{}: {what}", ids.join(", ")));
        }
    }
    if parts.is_empty() {
        "nothing".into()
    } else {
        parts.join("; ")
    }
}

async fn run_then(host: &Host, then: &Then, interrupt: &CancellationToken) {
    // Ctrl-C cancels the command, then ends `dev`.
    let outcome = match then {
        Then::Delegate(args) => delegate::run_on(host, args, interrupt.child_token()).await,
        Then::Call(args) => call::run_on(host, args, interrupt.child_token()).await,
    };
    match outcome {
        Ok(code) if code != EXIT_OK => errln!("(the command exited {code})"),
        Ok(_) => {}
        Err(e) => errln!("error: {}", chain(&e)),
    }
}

/// The files `dev` reacts to, and the folders it watches to see them: a build often replaces
/// a file (writes a new one, renames it over the old), which a watch on the file would miss.
#[derive(Default)]
pub(crate) struct Watched {
    files: HashSet<PathBuf>,
    dirs: HashSet<PathBuf>,
}

impl Watched {
    /// Watches the config and the components of `config`'s enabled entries.
    pub(crate) fn follow(
        &mut self,
        watcher: &mut impl Watcher,
        config_path: &Path,
        config: &Config,
    ) {
        let mut files = HashSet::from([config_path.to_path_buf()]);
        for entry in config.plugins.iter().filter(|e| !e.disabled) {
            let file = entry.source.watched_file();
            if let Some(path) = file.and_then(|f| std::path::absolute(f).ok()) {
                files.insert(path);
            }
        }
        let dirs: HashSet<PathBuf> = files
            .iter()
            .filter_map(|f| f.parent().map(Path::to_path_buf))
            .collect();
        for gone in self.dirs.difference(&dirs) {
            let _ = watcher.unwatch(gone);
        }
        for dir in dirs.difference(&self.dirs) {
            if let Err(e) = watcher.watch(dir, RecursiveMode::NonRecursive) {
                errln!(
                    "warning: cannot watch `{}` ({e}); changes there are not seen",
                    dir.display()
                );
            }
        }
        self.files = files;
        self.dirs = dirs;
    }

    /// Waits for a change to one of the files, then until they have been quiet for `settle`.
    pub(crate) async fn next_change(
        &self,
        changes: &mut mpsc::UnboundedReceiver<notify::Result<notify::Event>>,
        settle: Duration,
    ) {
        let relevant = |event: &notify::Result<notify::Event>| match event {
            Ok(event) => {
                !event.kind.is_access() && event.paths.iter().any(|p| self.files.contains(p))
            }
            // A watch error (an overflow, say): look again rather than miss a change.
            Err(_) => true,
        };
        loop {
            match changes.recv().await {
                Some(event) if relevant(&event) => break,
                Some(_) => {}
                None => std::future::pending::<()>().await,
            }
        }
        loop {
            match tokio::time::timeout(settle, changes.recv()).await {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return,
            }
        }
    }
}
