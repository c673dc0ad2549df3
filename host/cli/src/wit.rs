//! `seam wit`: writes the WIT package this host supports, for plugin authors.

use std::path::PathBuf;

use anyhow::{Context, Result};

/// Arguments of `seam wit`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Folder to write into (a guest project's `wit/`); created if missing.
    #[arg(long, default_value = "wit")]
    out: PathBuf,
    /// Package version (default: the latest this host supports).
    #[arg(long)]
    version: Option<String>,
}

pub(crate) fn run(args: Args) -> Result<u8> {
    let written = seam_host::versions::write_package(&args.out, args.version.as_deref())
        .with_context(|| format!("cannot write the WIT into `{}`", args.out.display()))?;
    for path in written {
        outln!("{}", path.display());
    }
    Ok(super::EXIT_OK)
}
