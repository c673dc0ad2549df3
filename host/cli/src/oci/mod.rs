//! The commands of components from registries: `seam lock`, `seam pull`, `seam push`, `seam
//! sign`, and what `seam check`, `seam run` and `seam inspect` do with `oci://` references
//! (`--locked`, the lock's staleness, the registry flags).

pub(crate) mod lock;
pub(crate) mod pull;
pub(crate) mod push;
pub(crate) mod sign;

use std::path::PathBuf;

use anyhow::{bail, Result};
use seam_host::oci::settings::EnvCredentials;
use seam_host::oci::{OciRef, OciSettings, SettingsFrom, Staleness};
use seam_host::{Config, Host};

/// How `seam push`, `seam sign` and `seam inspect oci://...` reach a registry (a config's
/// `[oci]` table says it for the commands that read one).
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct RegistryArgs {
    /// Speak plain HTTP to the registry (allowed for a loopback one; any other also needs
    /// --insecure).
    #[arg(long)]
    http: bool,
    /// Allow plain HTTP to a registry that is not on loopback.
    #[arg(long, requires = "http")]
    insecure: bool,
    /// More trusted roots (PEM), for a registry whose certificate a private CA signed
    /// (default: $SEAM_OCI_CA_FILE).
    #[arg(long, value_name = "FILE")]
    ca_file: Option<PathBuf>,
    /// The environment variable holding the registry user name (with --password-env; without
    /// both, the Docker config file's credentials for the registry, if any).
    #[arg(long, value_name = "VAR", requires = "password_env")]
    username_env: Option<String>,
    /// The environment variable holding the registry password or token.
    #[arg(long, value_name = "VAR", requires = "username_env")]
    password_env: Option<String>,
}

impl RegistryArgs {
    /// The settings for reaching `reference`'s registry.
    pub(crate) fn settings(&self, reference: &OciRef) -> Result<OciSettings> {
        let mut settings = OciSettings {
            insecure: self.insecure,
            ca_file: self.ca_file.clone(),
            from: SettingsFrom::Flags,
            ..OciSettings::default()
        };
        if self.http {
            settings.http.push(reference.registry().to_string());
        }
        if let (Some(username_env), Some(password_env)) = (&self.username_env, &self.password_env) {
            settings.auth.insert(
                reference.registry().to_string(),
                EnvCredentials {
                    username_env: username_env.clone(),
                    password_env: password_env.clone(),
                },
            );
        }
        settings.validate().map_err(|e| {
            anyhow::anyhow!(
                "{}",
                e.to_string()
                    .replace("key `http`", "--http")
                    .replace("`insecure = true`", "--insecure")
            )
        })?;
        Ok(settings)
    }
}

/// Parses an `oci://` reference given on the command line.
pub(crate) fn parse_reference(text: &str) -> Result<OciRef> {
    let reference = OciRef::parse(text)?;
    reference.check_grammar()?;
    Ok(reference)
}

/// Fails when the config's lock would change (`--locked`): an `oci://` entry without a lock
/// line, a line for another reference or digest, a line for no entry.
pub(crate) fn ensure_locked(config: &Config, config_path: &std::path::Path) -> Result<()> {
    let stale = config.staleness();
    if stale.is_empty() {
        return Ok(());
    }
    bail!(
        "the lock file `{}` would change (--locked): {}; run `seam lock {}` to update it",
        seam_host::oci::lock_path(config_path).display(),
        list(&stale),
        config_path.display()
    )
}

/// The `oci://` references of `config` that the distribution grammar refuses, as problems. A
/// load checks the grammar only when it asks a registry (a pulled digest needs none); a check
/// checks every reference.
pub(crate) fn grammar_problems(config: &Config) -> Vec<String> {
    config
        .oci_entries()
        .filter_map(|(entry, source)| {
            let e = source.reference.check_grammar().err()?;
            Some(format!("plugin `{}`: key `component`: {e}", entry.id))
        })
        .collect()
}

/// Staleness, as one line.
pub(crate) fn list(stale: &[Staleness]) -> String {
    stale
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// How the lock of `config` disagrees with it and with the registries: [`Config::staleness`],
/// then each locked tag whose registry now resolves it to another digest. A registry that
/// cannot be asked is a note, not staleness.
pub(crate) async fn staleness_online(
    host: &Host,
    config: &Config,
) -> (Vec<Staleness>, Vec<String>) {
    let mut stale = config.staleness();
    let mut notes = Vec::new();
    for (entry, source) in config.oci_entries() {
        // Only a locked tag can move; a line for another reference is stale already.
        let (Some(locked), None) = (&source.locked, source.reference.digest()) else {
            continue;
        };
        if locked.reference != source.reference.to_string() {
            continue;
        }
        match host.oci().current_digest(source).await {
            Ok(digest) if digest != locked.digest => stale.push(Staleness::Moved {
                id: entry.id.clone(),
                digest,
                locked: locked.clone(),
            }),
            Ok(_) => {}
            Err(e) => notes.push(format!(
                "plugin `{}`: cannot check whether its tag moved: {e}",
                entry.id
            )),
        }
    }
    (stale, notes)
}

/// `plugin `id``, as context for an error.
pub(crate) fn plugin(id: &str) -> impl FnOnce() -> String + '_ {
    move || format!("plugin `{id}`")
}

/// What a resolved component is, in a few words: `sha256:… (N bytes), signed by `alice`
/// (sha256:…)` or `…, unsigned (verify = false)`.
pub(crate) fn describe(resolved: &seam_host::oci::Resolved) -> String {
    let signer = match &resolved.signer {
        Some(s) => format!("signed by `{}` ({})", s.name, s.fingerprint),
        None => "not signature-checked (verify = false)".to_string(),
    };
    format!("{} ({} bytes), {signer}", resolved.digest, resolved.size)
}
