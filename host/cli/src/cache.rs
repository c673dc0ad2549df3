//! `seam cache ls|prune|clear` and `seam compile CONFIG`: the compile cache, looked at, trimmed
//! and warmed ahead of time.

use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use anyhow::{Context, Result};
use seam_host::{cache_entries, clear_cache, prune_cache, CacheEntry, EngineOptions};

use super::{interruptible, read_config, with_host, EXIT_ERROR, EXIT_OK};
use tokio_util::sync::CancellationToken;

/// Arguments of `seam cache`.
#[derive(Debug, clap::Args)]
pub(crate) struct CacheArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// List the cached artifacts, most recently used first, with the total and the cap.
    Ls,
    /// Remove the least recently used artifacts until the rest fit the cap.
    Prune {
        /// The cap in MiB (default: `$SEAM_CACHE_MAX_MB`, else 1024).
        #[arg(long, value_name = "MB")]
        max_mb: Option<u64>,
    },
    /// Remove every cached artifact.
    Clear,
}

/// Arguments of `seam compile`.
#[derive(Debug, clap::Args)]
pub(crate) struct CompileArgs {
    /// The config file (TOML) whose components to compile.
    config: PathBuf,
}

fn cache_dir() -> Result<PathBuf> {
    EngineOptions::default()
        .cache_dir
        .context("no compile cache directory: set SEAM_CACHE_DIR (or XDG_CACHE_HOME or HOME)")
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

fn age(entry: &CacheEntry) -> String {
    match SystemTime::now().duration_since(entry.last_used) {
        Ok(d) if d.as_secs() < 120 => format!("{} s ago", d.as_secs()),
        Ok(d) if d.as_secs() < 7200 => format!("{} min ago", d.as_secs() / 60),
        Ok(d) if d.as_secs() < 172_800 => format!("{} h ago", d.as_secs() / 3600),
        Ok(d) => format!("{} days ago", d.as_secs() / 86_400),
        Err(_) => "just now".into(),
    }
}

pub(crate) fn run_cache(args: CacheArgs) -> Result<u8> {
    let dir = cache_dir()?;
    let cap = EngineOptions::default().cache_max_bytes;
    match args.action {
        Action::Ls => {
            let entries = cache_entries(&dir)
                .with_context(|| format!("cannot read the cache `{}`", dir.display()))?;
            for e in &entries {
                let name = e.path.file_name().unwrap_or_default().to_string_lossy();
                outln!("{name}  {}  used {}", mib(e.bytes), age(e));
            }
            let total: u64 = entries.iter().map(|e| e.bytes).sum();
            outln!(
                "{} artifacts, {} of {} in {}",
                entries.len(),
                mib(total),
                mib(cap),
                dir.display()
            );
        }
        Action::Prune { max_mb } => {
            let max = max_mb.map_or(cap, |mb| mb.saturating_mul(1 << 20));
            let removed = prune_cache(&dir, max, None)
                .with_context(|| format!("cannot prune the cache `{}`", dir.display()))?;
            let freed: u64 = removed.iter().map(|e| e.bytes).sum();
            outln!(
                "removed {} artifacts ({}); the cache fits {}",
                removed.len(),
                mib(freed),
                mib(max)
            );
        }
        Action::Clear => {
            let removed = clear_cache(&dir)
                .with_context(|| format!("cannot clear the cache `{}`", dir.display()))?;
            let freed: u64 = removed.iter().map(|e| e.bytes).sum();
            outln!("removed {} artifacts ({})", removed.len(), mib(freed));
        }
    }
    Ok(EXIT_OK)
}

/// Compiles every enabled entry's component into the cache, one at a time, saying which were
/// already there and how long each took.
pub(crate) async fn run_compile(args: CompileArgs, interrupt: &CancellationToken) -> Result<u8> {
    let config = read_config(&args.config)?;
    with_host(|host| async move {
        let mut failed = 0;
        let mut seen = std::collections::HashSet::new();
        for entry in config.plugins.iter().filter(|e| !e.disabled) {
            if let Some(what) = entry.source.not_compiled() {
                outln!("{}: {what}", entry.id);
                continue;
            }
            let Some(path) = entry.source.component_file() else {
                continue;
            };
            // Several entries may share one component: compile it once.
            if !seen.insert(path.to_path_buf()) {
                continue;
            }
            let t = Instant::now();
            match interruptible(host.precompile(path), interrupt).await? {
                Ok(cached) => outln!(
                    "{}: {} in {} ms ({})",
                    entry.id,
                    if cached { "cached" } else { "compiled" },
                    t.elapsed().as_millis(),
                    path.display()
                ),
                Err(e) => {
                    failed += 1;
                    errln!("error: plugin `{}`: {e}", entry.id);
                }
            }
        }
        Ok(if failed == 0 { EXIT_OK } else { EXIT_ERROR })
    })
    .await
}
