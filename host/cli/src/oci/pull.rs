//! `seam pull CONFIG [--locked]`: fetch and check every `oci://` component a config names, as
//! a load would (the lock's digests, the signatures, the size limit), into the store, so that
//! loading it later needs no registry.

use std::path::PathBuf;

use anyhow::Result;

use super::super::{read_config, with_host, EXIT_ERROR, EXIT_OK};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The config file (TOML).
    config: PathBuf,
    /// Fail if the config's lock would change (an entry without a lock line, a stale line).
    #[arg(long)]
    locked: bool,
}

pub(crate) async fn run(args: Args) -> Result<u8> {
    let config = read_config(&args.config)?;
    if args.locked {
        super::ensure_locked(&config, &args.config)?;
    }
    let failures = with_host(|host| {
        let config = &config;
        async move {
            let mut failures = 0usize;
            let mut pulled = 0usize;
            for (entry, source) in config.oci_entries() {
                match host.oci().resolve(source).await {
                    Ok(resolved) => {
                        pulled += 1;
                        outln!(
                            "  {}  {}  {}",
                            entry.id,
                            resolved.reference,
                            super::describe(&resolved)
                        );
                    }
                    Err(e) => {
                        failures += 1;
                        errln!("error: plugin `{}`: {e}", entry.id);
                    }
                }
            }
            if let Some(dir) = host.oci().store_dir() {
                outln!("pulled {pulled} component(s) into `{}`", dir.display());
            }
            Ok(failures)
        }
    })
    .await?;
    Ok(if failures == 0 { EXIT_OK } else { EXIT_ERROR })
}
