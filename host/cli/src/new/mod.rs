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

impl Lang {
    /// Its name, in words.
    fn name(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
        }
    }

    /// Whether its toolchain can build a provider with an async `run` today, in words.
    fn async_support(self) -> &'static str {
        match self {
            Lang::Rust => "supported",
            Lang::Python => {
                "componentize-py 0.25.1 builds an `async def run` against the 0.5.0 WIT (`seam \
                 wit --version 0.5.0`); this kit has no template for it yet"
            }
            Lang::Js => {
                "componentize-js 0.23.0 cannot build a component with an async export yet; keep \
                 the blocking template (seam:plugin@0.4.0)"
            }
        }
    }
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
    /// A provider whose `run` is async (the latest contract and WASI 0.3), which one instance
    /// can serve many runs of at once (`share_instance`). Rust only.
    #[arg(long = "async")]
    asynchronous: bool,
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
    let project = match (args.asynchronous, args.kind, args.lang) {
        (false, kind, lang) => templates::project(lang, kind, &args.name),
        (true, Kind::Provider, Lang::Rust) => templates::async_provider(&args.name),
        (true, Kind::Provider, lang) => bail!(
            "`--async` makes a Rust provider; for {}: {}",
            lang.name(),
            lang.async_support()
        ),
        (true, kind, _) => bail!(
            "`--async` makes a provider, whose `run` may be async; a {} has no async export",
            kind.name()
        ),
    };
    for (path, text) in &project.files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create `{}`", parent.display()))?;
        }
        std::fs::write(&path, text)
            .with_context(|| format!("cannot write `{}`", path.display()))?;
    }
    let wit = seam_host::versions::write_package(&dir.join("wit"), Some(project.version.as_str()))
        .with_context(|| format!("cannot write the WIT into `{}`", dir.display()))?;
    for (path, _) in &project.files {
        outln!("{}", dir.join(path).display());
    }
    for path in wit {
        outln!("{}", path.display());
    }
    outln!("\n{STEPS_HEADER}");
    for step in steps(&project, args.kind, &dir, &seam_command()) {
        outln!("    {step}");
    }
    Ok(EXIT_OK)
}

/// The line above the printed steps; the CLI tests find the steps by it.
const STEPS_HEADER: &str = "Next steps, from this folder (paste them as they are):";

/// The shell lines that build and check the project in `dir`, to be pasted in order into one
/// shell in the folder `seam new` ran in: the first `cd` moves into the project, and every
/// later line is relative to it, as in the project's README.
fn steps(project: &templates::Project, kind: Kind, dir: &Path, seam: &str) -> Vec<String> {
    let mut steps = Vec::new();
    if let Some(toolchain) = project.toolchain {
        steps.push(format!("{toolchain}   # once per machine"));
    }
    steps.push(format!("cd {}", shell_word(&dir.to_string_lossy())));
    if let Some(setup) = project.setup {
        steps.push(format!("{setup}   # once"));
    }
    steps.push(project.build.clone());
    steps.push(format!(
        "{seam} test {}{}",
        shell_word(&project.wasm),
        test_config(kind)
    ));
    steps
}

/// How the printed steps should call `seam`: as it was called when that was a bare name (found
/// on PATH, so it is found again), else by its absolute path, since a relative one such as
/// `target/debug/seam` no longer resolves once the steps `cd` into the project.
fn seam_command() -> String {
    let invoked = std::env::args_os().next().unwrap_or_default();
    let exe = std::env::current_exe().ok();
    shell_word(&seam_program(Path::new(&invoked), exe.as_deref()))
}

fn seam_program(invoked: &Path, exe: Option<&Path>) -> String {
    let bare = invoked.components().count() == 1 && !invoked.as_os_str().is_empty();
    match exe {
        Some(exe) if !bare => exe.to_string_lossy().into_owned(),
        _ => invoked
            .to_str()
            .filter(|name| !name.is_empty())
            .unwrap_or("seam")
            .to_string(),
    }
}

/// `word` as one shell word: unchanged when it needs no quoting, else single-quoted.
fn shell_word(word: &str) -> String {
    shlex::try_quote(word).map_or_else(|_| word.to_string(), |quoted| quoted.into_owned())
}

/// The `--config` that `seam test` needs for a generated plugin of `kind`.
fn test_config(kind: Kind) -> &'static str {
    match kind {
        Kind::Tool => " --config '{\"toolName\": \"ask\", \"provider\": \"helper\"}'",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steps_call_seam_as_it_can_be_found_after_the_cd() {
        let exe = Path::new("/opt/seam dir/bin/seam");
        // A bare name was found on PATH, and will be again.
        assert_eq!(seam_program(Path::new("seam"), Some(exe)), "seam");
        // A relative path would not resolve inside the project: the absolute one is printed.
        for invoked in ["target/debug/seam", "./seam"] {
            assert_eq!(
                seam_program(Path::new(invoked), Some(exe)),
                "/opt/seam dir/bin/seam"
            );
        }
        assert_eq!(
            shell_word(&seam_program(Path::new("./seam"), Some(exe))),
            "'/opt/seam dir/bin/seam'"
        );
    }

    #[test]
    fn the_steps_cd_into_the_project_before_anything_runs_there() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js] {
            let project = templates::project(lang, Kind::Tool, "my tool");
            let steps = steps(&project, Kind::Tool, Path::new("some dir/my tool"), "seam");
            let cd = steps
                .iter()
                .position(|s| s == "cd 'some dir/my tool'")
                .unwrap_or_else(|| panic!("{lang:?}: no quoted cd in {steps:?}"));
            // Only the machine-wide toolchain line may come before it.
            assert!(cd <= usize::from(project.toolchain.is_some()), "{steps:?}");
            assert!(steps.last().unwrap().starts_with("seam test "), "{steps:?}");
            assert!(steps.last().unwrap().ends_with(test_config(Kind::Tool)));
        }
    }
}
