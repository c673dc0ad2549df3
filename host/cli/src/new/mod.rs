//! `seam new provider|tool|observer NAME --lang rust|python|js [--dir DIR]`: a plugin project
//! that builds outside this repository with one command, with the WIT of this host, a README
//! and an example `seam.toml`.
//!
//! The projects' files are templates under `host/cli/templates/`, embedded in the binary; the
//! literal `{{NAME}}` in them becomes the project's name. A Rust project also gets the guest SDK
//! (`guests/sdk`, crate `seam-plugin`) written beside it, bound to the same WIT.

mod templates;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::EXIT_OK;

/// The plugin kind to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Kind {
    Provider,
    Tool,
    Observer,
}

impl Kind {
    fn name(self) -> &'static str {
        seam_host::PluginKind::from(self).as_str()
    }
}

impl From<Kind> for seam_host::PluginKind {
    fn from(kind: Kind) -> Self {
        match kind {
            Kind::Provider => Self::Provider,
            Kind::Tool => Self::Tool,
            Kind::Observer => Self::Observer,
        }
    }
}

/// The language of the generated project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Lang {
    Rust,
    Python,
    Js,
}

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// What to generate.
    kind: Kind,
    /// The project's name: lowercase letters, digits, `-` and `_`, starting with a letter.
    name: String,
    /// The language.
    #[arg(long, value_enum, default_value = "rust")]
    lang: Lang,
    /// Where to create the project (default: `./NAME`); it must not exist yet.
    #[arg(long)]
    dir: Option<PathBuf>,
}

pub(crate) fn run(args: Args) -> Result<u8> {
    let valid = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
    if args.name.is_empty()
        || !args.name.chars().all(valid)
        || !args.name.starts_with(|c: char| c.is_ascii_lowercase())
    {
        bail!(
            "`{}` is not a project name: use lowercase letters, digits, `-` and `_`, starting \
             with a letter",
            args.name
        );
    }
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    if dir.exists() {
        bail!("`{}` already exists; choose another --dir", dir.display());
    }
    let project = templates::project(args.lang, args.kind, &args.name);
    for (path, text) in &project.files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create `{}`", parent.display()))?;
        }
        std::fs::write(&path, text)
            .with_context(|| format!("cannot write `{}`", path.display()))?;
    }
    let wit = seam_host::versions::write_package(&dir.join("wit"), None)
        .with_context(|| format!("cannot write the WIT into `{}`", dir.display()))?;
    for (path, _) in &project.files {
        outln!("{}", dir.join(path).display());
    }
    for path in wit {
        outln!("{}", path.display());
    }
    if let Some(setup) = project.setup {
        outln!("\nset up (once): {setup}");
    }
    outln!("build it: cd {} && {}", dir.display(), project.build);
    outln!(
        "check it: seam test {}{}",
        Path::new(&dir).join(&project.wasm).display(),
        test_config(args.kind)
    );
    Ok(EXIT_OK)
}

/// The `--config` that `seam test` needs for a generated plugin of `kind`.
fn test_config(kind: Kind) -> &'static str {
    match kind {
        Kind::Tool => " --config '{\"toolName\": \"ask\", \"provider\": \"helper\"}'",
        _ => "",
    }
}
