//! The config's `[oci]` table (how registries are reached), its `[trust]` table (the keys a
//! pulled component may be signed by), and what one `component = "oci://..."` entry asks for.
//!
//! ```toml
//! [oci]
//! max_layer_mb = 256                    # a bigger layer is refused before it is stored
//! http = ["127.0.0.1:5000"]             # registries spoken to over plain HTTP
//! insecure = false                      # must be true for a non-loopback registry in `http`
//! ca_file = "certs/registry-ca.pem"     # more roots (PEM) for registries with a private CA
//! [oci.auth."registry.example.com"]     # credentials from the CLI's environment, never a plugin's
//! username_env = "REGISTRY_USER"
//! password_env = "REGISTRY_PASSWORD"
//!
//! [trust.keys]
//! alice = "keys/alice.pub"              # ECDSA P-256 public keys (PEM), as cosign makes them
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use super::lock::LockEntry;
use super::reference::{registry_is_loopback, OciRef};
use super::signature::PublicKey;
use seam_sandbox::EntryError;

/// Default of `[oci] max_layer_mb`.
pub const DEFAULT_MAX_LAYER_MB: u64 = 256;

/// The environment variable naming a CA file (PEM) trusted for registries, besides `[oci]
/// ca_file` (used when the config has none, and by `seam push`/`sign`/`inspect`).
pub const CA_FILE_ENV: &str = "SEAM_OCI_CA_FILE";

/// `[oci]`: how registries are reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciSettings {
    /// `max_layer_mb`, in bytes: a component layer bigger than this is refused before it is
    /// stored.
    pub max_layer_bytes: u64,
    /// `http`: registries spoken to over plain HTTP (loopback ones, or any with `insecure`).
    pub http: Vec<String>,
    /// `insecure`: allows non-loopback registries in `http`.
    pub insecure: bool,
    /// `ca_file`: more trusted roots (PEM), for a registry whose certificate a private CA
    /// signed.
    pub ca_file: Option<PathBuf>,
    /// `[oci.auth."REGISTRY"]`: where a registry's credentials are read from.
    pub auth: BTreeMap<String, EnvCredentials>,
    /// Who wrote these settings: what a message tells the user to change.
    pub from: SettingsFrom,
}

/// Who wrote a command's [`OciSettings`], for what its messages tell the user to change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SettingsFrom {
    /// A config's `[oci]` table (`[oci.auth."REGISTRY"]` names the credentials).
    #[default]
    Config,
    /// A command's flags (`seam push`, `sign`, `inspect oci://…`): `--username-env` and
    /// `--password-env` name the credentials.
    Flags,
}

impl SettingsFrom {
    /// Where the variables `[oci.auth."REGISTRY"]` or the flags named were named.
    pub fn naming(self, registry: &str) -> String {
        match self {
            SettingsFrom::Config => format!("[oci.auth.\"{registry}\"]"),
            SettingsFrom::Flags => "--username-env, --password-env".to_string(),
        }
    }

    /// How to give `registry` credentials.
    pub fn hint(self, registry: &str) -> String {
        match self {
            SettingsFrom::Config => format!(
                "give them in `[oci.auth.\"{registry}\"]` or in the Docker config file \
                 (`docker login {registry}`)"
            ),
            SettingsFrom::Flags => format!(
                "pass --username-env VAR --password-env VAR (the environment variables that hold \
                 them), or put them in the Docker config file (`docker login {registry}`)"
            ),
        }
    }
}

impl Default for OciSettings {
    fn default() -> Self {
        Self {
            max_layer_bytes: DEFAULT_MAX_LAYER_MB << 20,
            http: Vec::new(),
            insecure: false,
            ca_file: None,
            auth: BTreeMap::new(),
            from: SettingsFrom::Config,
        }
    }
}

/// A registry's credentials, as the names of the host's environment variables that hold them.
/// The values are read when the registry is contacted; no plugin ever sees them (a plugin's
/// environment is only what its `env` grant lists).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvCredentials {
    /// The variable holding the user name.
    pub username_env: String,
    /// The variable holding the password or token.
    pub password_env: String,
}

impl OciSettings {
    /// Whether `registry` is spoken to over plain HTTP.
    pub fn uses_http(&self, registry: &str) -> bool {
        self.http.iter().any(|r| r == registry)
    }

    /// Checks the settings: `max_layer_mb` is at least 1, and a non-loopback registry over HTTP
    /// needs `insecure`. The error names the `[oci]` key.
    pub fn validate(&self) -> Result<(), EntryError> {
        if self.max_layer_bytes == 0 {
            return Err(EntryError::new(
                "max_layer_mb",
                "key `max_layer_mb` must be at least 1 (MiB)".into(),
            ));
        }
        if let Some(registry) = self
            .http
            .iter()
            .find(|r| !self.insecure && !registry_is_loopback(r))
        {
            return Err(EntryError::new(
                "http",
                format!(
                    "key `http`: `{registry}` is not a loopback registry: plain HTTP to it needs \
                     `insecure = true` (anyone on the path could swap what it serves; signatures \
                     still protect a signed component)"
                ),
            ));
        }
        Ok(())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOci {
    max_layer_mb: Option<u64>,
    #[serde(default)]
    http: Vec<String>,
    #[serde(default)]
    insecure: bool,
    ca_file: Option<PathBuf>,
    #[serde(default)]
    auth: BTreeMap<String, EnvCredentials>,
}

/// Reads `[oci]`; relative paths are the config folder's (`base`).
pub fn parse_oci(value: toml::Value, base: &Path) -> Result<OciSettings, EntryError> {
    let raw: RawOci = value
        .try_into()
        .map_err(|e: toml::de::Error| EntryError::new("oci", e.message().to_string()))?;
    let settings = OciSettings {
        max_layer_bytes: raw
            .max_layer_mb
            .unwrap_or(DEFAULT_MAX_LAYER_MB)
            .saturating_mul(1 << 20),
        http: raw.http,
        insecure: raw.insecure,
        ca_file: raw.ca_file.map(|p| base.join(p)),
        auth: raw.auth,
        from: SettingsFrom::Config,
    };
    settings.validate()?;
    Ok(settings)
}

/// A key of `[trust.keys]`.
#[derive(Debug, Clone, PartialEq)]
pub struct TrustKey {
    /// Its name in `[trust.keys]` (what `verify` names).
    pub name: String,
    /// The PEM file it was read from.
    pub path: PathBuf,
    /// The key.
    pub key: PublicKey,
}

impl TrustKey {
    /// `` `alice` (sha256:…) ``: how messages name it.
    pub fn label(&self) -> String {
        format!("`{}` ({})", self.name, self.key.fingerprint())
    }
}

/// `[trust]`: the keys, in name order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trust {
    /// `[trust.keys]`.
    pub keys: Vec<TrustKey>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTrust {
    #[serde(default)]
    keys: BTreeMap<String, PathBuf>,
}

/// Reads `[trust]`, and every key file it names (relative to `base`).
pub fn parse_trust(value: toml::Value, base: &Path) -> Result<Trust, EntryError> {
    let raw: RawTrust = value
        .try_into()
        .map_err(|e: toml::de::Error| EntryError::new("trust", e.message().to_string()))?;
    let mut keys = Vec::with_capacity(raw.keys.len());
    for (name, path) in raw.keys {
        let path = base.join(path);
        let key = PublicKey::from_file(&path)
            .map_err(|e| EntryError::new("keys", format!("key `keys.{name}`: {e}")))?;
        keys.push(TrustKey { name, path, key });
    }
    Ok(Trust { keys })
}

/// What signature a pulled component must carry.
#[derive(Debug, Clone, PartialEq)]
pub enum Verify {
    /// One by any of these keys (never empty).
    Keys(Vec<TrustKey>),
    /// None: `verify = false`.
    Unsigned,
}

impl Verify {
    /// How messages name what is required: `key `alice` (sha256:…)` or `one of keys …`.
    pub fn keys_label(&self) -> String {
        match self {
            Verify::Unsigned => "no key (`verify = false`)".into(),
            Verify::Keys(keys) if keys.len() == 1 => format!("key {}", keys[0].label()),
            Verify::Keys(keys) => format!(
                "one of keys {}",
                keys.iter()
                    .map(TrustKey::label)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// What a `component = "oci://..."` entry pulls, how it is checked, and how registries are
/// reached: everything the loader needs, so that a changed key, lock line or setting reloads
/// the entry.
#[derive(Debug, Clone, PartialEq)]
pub struct OciSource {
    /// The reference as written.
    pub reference: OciRef,
    /// The signature it must carry.
    pub verify: Verify,
    /// Its line in the lock file, if the lock has one for this entry and this reference.
    pub locked: Option<LockEntry>,
    /// `[oci]`.
    pub settings: Arc<OciSettings>,
}

/// Reads an entry's `verify` (a key name, `true` for any key of `[trust.keys]`, `false` for
/// none) against the config's `[trust]`.
pub fn entry_verify(
    value: Option<&toml::Value>,
    trust: &Trust,
    reference: &OciRef,
) -> Result<Verify, EntryError> {
    let key_error = |message: String| EntryError::new("verify", message);
    match value {
        Some(toml::Value::Boolean(false)) => Ok(Verify::Unsigned),
        Some(toml::Value::String(name)) => match trust.keys.iter().find(|k| k.name == *name) {
            Some(key) => Ok(Verify::Keys(vec![key.clone()])),
            None => Err(key_error(format!(
                "key `verify`: `{name}` is not a key of [trust.keys]{}",
                if trust.keys.is_empty() {
                    " (the config has none)".to_string()
                } else {
                    format!(
                        " (it has {})",
                        trust
                            .keys
                            .iter()
                            .map(|k| format!("`{}`", k.name))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ))),
        },
        None | Some(toml::Value::Boolean(true)) if !trust.keys.is_empty() => {
            Ok(Verify::Keys(trust.keys.clone()))
        }
        None | Some(toml::Value::Boolean(true)) => Err(key_error(format!(
            "key `verify`: `{reference}` comes from a registry, so it must be verified against a \
             key: name one under [trust.keys] (and `verify = \"NAME\"` here), or set \
             `verify = false` to load it unsigned"
        ))),
        Some(_) => Err(key_error(
            "key `verify` must be the name of a key of [trust.keys], or `false`".into(),
        )),
    }
}
