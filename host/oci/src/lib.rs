//! Components from OCI registries: `component = "oci://REGISTRY/REPO:TAG"` (or `@sha256:…`).
//!
//! A pulled component is checked before a byte of it is compiled: the manifest's bytes against
//! the digest that names it (the locked one, the written one, or the one the tag resolved to),
//! the layer's against the manifest, the layer's size against `[oci] max_layer_mb`, and the
//! manifest digest against a cosign signature by a key of `[trust.keys]` (unless the entry says
//! `verify = false`). What passes is kept in a content-addressed store beside the compile cache
//! (`<cache dir>/oci/blobs/sha256/<hex>`, checked again on every read), so a digest reference
//! or a locked tag loads offline once pulled. The component then gets exactly its entry's
//! grants: nothing in a manifest or its annotations is read as a grant.
//!
//! - [`reference`]: `oci://` references and SHA-256 digests;
//! - [`settings`]: `[oci]`, `[trust]` and an entry's `verify`;
//! - [`lock`]: the lock file and how a config disagrees with it;
//! - [`signature`]: cosign's simple-signing payloads, keys, signing and checking;
//! - `store`: the content-addressed store;
//! - `auth`, `registry`: credentials and the registry client (`oci-client`);
//! - [`resolve`]: the path of a load, from a reference to a checked component file;
//! - [`publish`]: `seam push` and `seam sign`.

mod auth;
pub mod lock;
pub mod publish;
pub mod reference;
mod registry;
pub mod resolve;
pub mod settings;
pub mod signature;
mod store;

use std::path::PathBuf;

use thiserror::Error;

pub use lock::{lock_path, Lock, LockEntry, LockError, Signer, Staleness};
pub use reference::{Digest, OciRef};
pub use resolve::{Oci, Resolved};
pub use settings::{OciSettings, OciSource, SettingsFrom, Trust, TrustKey, Verify};

/// The config media type of a Wasm OCI artifact (the CNCF Wasm OCI artifact layout, which
/// `wkg oci` and `oras` read).
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";

/// The media type of a Wasm OCI artifact's one layer: the component's bytes.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";

/// The layer media type older tools (`wasm-to-oci`) wrote; read, never written.
const LEGACY_WASM_LAYER_MEDIA_TYPE: &str = "application/vnd.wasm.content.layer.v1+wasm";

/// Why a component could not be had from a registry, or was refused. Each names the reference.
#[derive(Debug, Clone, Error)]
pub enum OciError {
    /// The registry could not be reached (down, refused, timed out).
    #[error(
        "cannot reach registry `{registry}` for `{reference}`: {reason} (a digest reference or a \
         locked tag loads without it once pulled)"
    )]
    Unreachable {
        /// The reference.
        reference: String,
        /// The registry host.
        registry: String,
        /// The client's explanation.
        reason: String,
    },
    /// The registry wants credentials it was not given, or refused the ones it was given.
    #[error("{}", unauthorized(.reference, .registry, .given.as_deref(), *.from))]
    Unauthorized {
        /// The reference.
        reference: String,
        /// The registry host.
        registry: String,
        /// Where the credentials it refused came from (`` `$USER` and `$PASS`
        /// ([oci.auth."REGISTRY"]) ``, the Docker config file), or `None` if none were given.
        given: Option<String>,
        /// Who wrote the settings: how credentials are given.
        from: SettingsFrom,
    },
    /// The registry has no such tag, manifest or blob.
    #[error("`{reference}` is not in registry `{registry}`")]
    NotFound {
        /// The reference.
        reference: String,
        /// The registry host.
        registry: String,
    },
    /// Any other registry failure.
    #[error("registry `{registry}`, `{reference}`: {reason}")]
    Registry {
        /// The reference.
        reference: String,
        /// The registry host.
        registry: String,
        /// What went wrong.
        reason: String,
    },
    /// The reference is not one the distribution grammar allows (checked before a registry is
    /// asked anything).
    #[error(transparent)]
    Reference(Box<reference::BadReference>),
    /// A registry over plain HTTP that is not on loopback, without `insecure = true`.
    #[error(
        "registry `{registry}` is not on loopback: plain HTTP to it needs `insecure = true` in \
         [oci] (or `--insecure`)"
    )]
    Insecure {
        /// The registry host.
        registry: String,
    },
    /// The CA file could not be read.
    #[error(
        "cannot read the registry CA file `{path}` ([oci] ca_file or $SEAM_OCI_CA_FILE): {reason}"
    )]
    CaFile {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The credentials could not be read.
    #[error("credentials for registry `{registry}`: {reason}")]
    Credentials {
        /// The registry host.
        registry: String,
        /// What is wrong.
        reason: String,
    },
    /// What the registry sent is not what its digest names.
    #[error(
        "`{reference}`{lock}: the registry sent {what} whose SHA-256 is {actual}, not {expected}: \
         refused (the registry's copy was swapped or damaged)",
        lock = lock.as_deref().map(|l| format!(" (locked by {l})")).unwrap_or_default()
    )]
    Tampered {
        /// The reference.
        reference: String,
        /// `a manifest`, `the component layer`, `a signature payload`.
        what: &'static str,
        /// The digest asked for.
        expected: Digest,
        /// The digest of what came (or why it cannot be one).
        actual: String,
        /// The lock line that named `expected`, if one did.
        lock: Option<String>,
    },
    /// What the config names is another digest than its lock's.
    #[error(
        "`{reference}` {how} {found}, but {lock}: refused (run `seam lock` to lock the new digest)"
    )]
    LockMismatch {
        /// The reference as written.
        reference: String,
        /// `names` (a digest reference) or `resolves to` (a tag, at the registry).
        how: &'static str,
        /// The digest the config names.
        found: Digest,
        /// The lock line and what it locks: `` `seam.lock` line 7 locks sha256:… (`oci://…`) ``.
        lock: String,
    },
    /// A layer or payload larger than its limit, refused before it is stored.
    #[error(
        "`{reference}`: {what} is {size} bytes, more than the limit of {limit} bytes{raise}: \
         refused before it was stored",
        raise = key.as_deref().map(|k| format!(" ({k})")).unwrap_or_default()
    )]
    TooLarge {
        /// The reference.
        reference: String,
        /// What is too large.
        what: &'static str,
        /// Its size (declared, or read so far).
        size: u64,
        /// The limit.
        limit: u64,
        /// The setting that raises the limit.
        key: Option<String>,
    },
    /// The manifest is not a Wasm component artifact.
    #[error("`{reference}` is not a Wasm component artifact: {reason}")]
    BadManifest {
        /// The reference.
        reference: String,
        /// What is wrong.
        reason: String,
    },
    /// No signature at all, where one is required.
    #[error(
        "`{reference}` is not signed (the registry has no signature at tag `{tag}`), and the \
         config requires a signature by {keys}: refused"
    )]
    Unsigned {
        /// The reference, at its digest.
        reference: String,
        /// cosign's signature tag for it.
        tag: String,
        /// The keys required.
        keys: String,
    },
    /// Signatures, none by a required key over this manifest.
    #[error(
        "`{reference}`: none of its {count} signature(s) is by {keys} over this manifest: \
         refused ({reasons})"
    )]
    BadSignature {
        /// The reference, at its digest.
        reference: String,
        /// The keys required.
        keys: String,
        /// How many signatures it has.
        count: usize,
        /// Why each one does not count.
        reasons: String,
    },
    /// The store cannot be used.
    #[error("OCI store `{dir}`: {reason}")]
    Store {
        /// Its directory.
        dir: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// There is no store to pull into.
    #[error("cannot pull `{reference}`: {reason}")]
    NoStore {
        /// The reference.
        reference: String,
        /// Why there is no store.
        reason: String,
    },
    /// A push that cannot be done as asked.
    #[error("cannot push to `{reference}`: {reason}")]
    Push {
        /// The reference.
        reference: String,
        /// Why.
        reason: String,
    },
}

/// What [`OciError::Unauthorized`] says: that the credentials were refused, naming where they
/// came from, or that none were given and how to give them.
fn unauthorized(
    reference: &str,
    registry: &str,
    given: Option<&str>,
    from: SettingsFrom,
) -> String {
    match given {
        Some(given) => format!(
            "registry `{registry}` refused the credentials in {given} for `{reference}`: check \
             them, and that they may reach this repository"
        ),
        None => format!(
            "registry `{registry}` refused access to `{reference}`: it asks for credentials and \
             none were given: {}",
            from.hint(registry)
        ),
    }
}

impl OciError {
    /// The same error, naming the lock line that chose the digest (for a refused download).
    pub fn locked_by(self, locked: Option<&LockEntry>) -> Self {
        match (self, locked) {
            (
                OciError::Tampered {
                    reference,
                    what,
                    expected,
                    actual,
                    lock: None,
                },
                Some(entry),
            ) => OciError::Tampered {
                reference,
                what,
                expected,
                actual,
                lock: Some(entry.place()),
            },
            (other, _) => other,
        }
    }
}
