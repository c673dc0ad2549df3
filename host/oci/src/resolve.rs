//! The path of a load: from an entry's `oci://` reference to a checked component file in the
//! store, pulling only what the store lacks.
//!
//! 1. **The digest.** A locked tag is its locked digest (the registry is not asked, so it loads
//!    offline); a digest reference is its digest; an unlocked tag is resolved at the registry.
//!    When the entry has a lock line, whatever the reference names must be the locked digest:
//!    a config edited to name another digest (or a tag that names another) is refused until
//!    `seam lock` locks it.
//! 2. **The manifest**, from the store or the registry, checked against the digest.
//! 3. **The signature** (unless `verify = false`): a cosign signature by a required key whose
//!    payload names this manifest digest, from the store or the registry. Before the layer, so
//!    an unsigned component's bytes are never even downloaded.
//! 4. **The layer**: refused if the manifest declares it larger than `[oci] max_layer_mb`,
//!    read no further than its declared size, checked against its digest, stored.
//!
//! Only then does the loader compile the file.

use std::path::PathBuf;

use oci_client::manifest::OciImageManifest;

use super::lock::{LockEntry, Signer};
use super::reference::{Digest, OciRef};
use super::registry::{Limit, Registry, MAX_PAYLOAD_BYTES};
use super::settings::{OciSource, Verify};
use super::signature::{check, SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE};
use super::store::BlobStore;
use super::{OciError, LEGACY_WASM_LAYER_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE};

/// A component had from a registry, checked and in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The component's bytes, in the store.
    pub path: PathBuf,
    /// The reference at its manifest digest.
    pub reference: OciRef,
    /// The manifest digest.
    pub digest: Digest,
    /// The component layer's digest.
    pub layer: Digest,
    /// The component layer's size in bytes.
    pub size: u64,
    /// The BLAKE3 of the layer's bytes as they were checked: what the compile cache names the
    /// component's artifact by, so that a load does not hash the layer a second time.
    pub blake3: [u8; 32],
    /// The key its signature verified against (`None` for `verify = false`).
    pub signer: Option<Signer>,
}

/// Why a host has no store for pulled components.
#[derive(Debug, thiserror::Error)]
enum NoStore {
    #[error("the host has no cache directory to keep pulled components in (set $SEAM_CACHE_DIR)")]
    NoCacheDir,
    #[error(
        "the cache directory `{}` was refused (see the warning), and pulled components are kept \
         inside it",
        .0.display()
    )]
    Refused(std::path::PathBuf),
    #[error(transparent)]
    Open(OciError),
}

/// Pulls and checks components, into the store beside a host's compile cache.
#[derive(Debug)]
pub struct Oci {
    store: Result<BlobStore, NoStore>,
}

impl Oci {
    /// The store inside `cache_dir` (the compile cache directory in use), or why there is none.
    pub fn new(cache_dir: Result<&std::path::Path, Option<&std::path::Path>>) -> Self {
        let store = match cache_dir {
            Ok(dir) => BlobStore::open(dir).map_err(NoStore::Open),
            Err(None) => Err(NoStore::NoCacheDir),
            Err(Some(dir)) => Err(NoStore::Refused(dir.to_path_buf())),
        };
        Self { store }
    }

    /// The store's directory, if there is a store.
    pub fn store_dir(&self) -> Option<&std::path::Path> {
        self.store.as_ref().ok().map(BlobStore::dir)
    }

    fn store(&self, reference: &OciRef) -> Result<&BlobStore, OciError> {
        self.store.as_ref().map_err(|reason| OciError::NoStore {
            reference: reference.to_string(),
            reason: reason.to_string(),
        })
    }

    /// What a load of `source` compiles: the locked digest, or the written one, or what the tag
    /// resolves to; checked, and pulled if the store lacks it.
    pub async fn resolve(&self, source: &OciSource) -> Result<Resolved, OciError> {
        let reference = &source.reference;
        let locked = source.locked.as_ref();
        let mut registry = Connection::new(source);
        let digest = match (reference.digest(), locked) {
            (None, Some(lock)) if lock.reference == reference.to_string() => lock.digest,
            (Some(digest), None) => digest,
            (None, None) => registry.get()?.resolve(reference).await?,
            (written, Some(lock)) => {
                let (found, how) = match written {
                    Some(digest) => (digest, "names"),
                    None => (registry.get()?.resolve(reference).await?, "resolves to"),
                };
                if found != lock.digest {
                    return Err(OciError::LockMismatch {
                        reference: reference.to_string(),
                        how,
                        found,
                        lock: format!(
                            "{} locks {} (`{}`)",
                            lock.place(),
                            lock.digest,
                            lock.reference
                        ),
                    });
                }
                found
            }
        };
        self.fetch(source, digest, locked, &mut registry).await
    }

    /// [`Oci::resolve`] as `seam lock` needs it: a tag is resolved at the registry whatever the
    /// lock says (the lock is what is being written).
    pub async fn resolve_fresh(&self, source: &OciSource) -> Result<Resolved, OciError> {
        let mut registry = Connection::new(source);
        let digest = self.current_digest(source).await?;
        self.fetch(source, digest, None, &mut registry).await
    }

    /// The digest `source`'s reference names now: its digest, or what its tag resolves to at
    /// the registry.
    pub async fn current_digest(&self, source: &OciSource) -> Result<Digest, OciError> {
        match source.reference.digest() {
            Some(digest) => Ok(digest),
            None => {
                Connection::new(source)
                    .get()?
                    .resolve(&source.reference)
                    .await
            }
        }
    }

    async fn fetch(
        &self,
        source: &OciSource,
        digest: Digest,
        locked: Option<&LockEntry>,
        registry: &mut Connection<'_>,
    ) -> Result<Resolved, OciError> {
        let reference = &source.reference;
        let store = self.store(reference)?;
        let at = reference.at(digest);
        let manifest_bytes = match store.read(&digest) {
            Some(bytes) => bytes,
            None => {
                let bytes = registry
                    .get()?
                    .manifest(reference, digest)
                    .await
                    .map_err(|e| e.locked_by(locked))?;
                store.write(&digest, &bytes)?;
                bytes
            }
        };
        let manifest = parse_manifest(&at, &manifest_bytes)?;
        let (layer, size) = component_layer(&at, &manifest)?;
        let limit = Limit {
            bytes: source.settings.max_layer_bytes,
            what: "the component layer",
            key: Some("[oci] max_layer_mb"),
        };
        if size > limit.bytes {
            return Err(OciError::TooLarge {
                reference: reference.to_string(),
                what: limit.what,
                size,
                limit: limit.bytes,
                key: limit.key.map(str::to_string),
            });
        }
        let signer = self.verify(source, store, &at, &digest, registry).await?;
        let (path, blake3) = match store.verified_path(&layer) {
            Some(found) => found,
            None => {
                let bytes = registry
                    .get()?
                    .blob(reference, &layer, size, limit)
                    .await
                    .map_err(|e| e.locked_by(locked))?;
                store.write(&layer, &bytes)?
            }
        };
        tracing::debug!(reference = %at, layer = %layer, size, "component checked");
        Ok(Resolved {
            path,
            reference: at,
            digest,
            layer,
            size,
            blake3,
            signer,
        })
    }

    /// The signer of manifest `digest`, as `source.verify` requires: from the signatures last
    /// verified (in the store), else from the registry.
    async fn verify(
        &self,
        source: &OciSource,
        store: &BlobStore,
        at: &OciRef,
        digest: &Digest,
        registry: &mut Connection<'_>,
    ) -> Result<Option<Signer>, OciError> {
        let Verify::Keys(_) = &source.verify else {
            return Ok(None);
        };
        let mut stored_failure = None;
        if let Some(signatures) = store.signatures_of(digest) {
            if let Some(bytes) = store.read(&signatures) {
                match self
                    .check_signatures(source, store, None, at, &bytes, digest)
                    .await
                {
                    Ok(signer) => return Ok(Some(signer)),
                    // Maybe the registry has a newer signature (by a key added since).
                    Err(e) => stored_failure = Some(e),
                }
            }
        }
        let fetched = match registry.get() {
            Ok(client) => client.signatures(&source.reference, digest).await,
            Err(e) => Err(e),
        };
        let (signatures, bytes) = match fetched {
            Ok(Some(found)) => found,
            Ok(None) => {
                return Err(OciError::Unsigned {
                    reference: at.to_string(),
                    tag: digest.signature_tag(),
                    keys: source.verify.keys_label(),
                })
            }
            Err(e) => return Err(stored_failure.unwrap_or(e)),
        };
        store.write(&signatures, &bytes)?;
        let client = registry.get()?;
        let signer = self
            .check_signatures(source, store, Some(client), at, &bytes, digest)
            .await?;
        store.set_signatures_of(digest, &signatures)?;
        Ok(Some(signer))
    }

    /// The first signature of signature manifest `bytes` that a required key made over
    /// `digest`; payloads from the store, else from `registry`.
    async fn check_signatures(
        &self,
        source: &OciSource,
        store: &BlobStore,
        registry: Option<&Registry>,
        at: &OciRef,
        bytes: &[u8],
        digest: &Digest,
    ) -> Result<Signer, OciError> {
        let Verify::Keys(keys) = &source.verify else {
            unreachable!("only called when a signature is required");
        };
        let signatures_ref = at.tagged(&digest.signature_tag());
        let manifest = parse_manifest(&signatures_ref, bytes)?;
        let mut reasons = Vec::new();
        let mut count = 0;
        for layer in manifest
            .layers
            .iter()
            .filter(|l| l.media_type == SIMPLE_SIGNING_MEDIA_TYPE)
        {
            count += 1;
            let Some(signature) = layer
                .annotations
                .as_ref()
                .and_then(|a| a.get(SIGNATURE_ANNOTATION))
            else {
                reasons.push(format!(
                    "signature {count} has no `{SIGNATURE_ANNOTATION}` annotation"
                ));
                continue;
            };
            let Ok(payload_digest) = layer.digest.parse::<Digest>() else {
                reasons.push(format!(
                    "signature {count}'s payload is named by `{}`, not a SHA-256 digest",
                    layer.digest
                ));
                continue;
            };
            let payload = match (store.read(&payload_digest), registry) {
                (Some(payload), _) => payload,
                (None, Some(client)) => {
                    let limit = Limit {
                        bytes: MAX_PAYLOAD_BYTES,
                        what: "a signature payload",
                        key: None,
                    };
                    let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
                    let payload = client
                        .blob(&source.reference, &payload_digest, size, limit)
                        .await?;
                    store.write(&payload_digest, &payload)?;
                    payload
                }
                (None, None) => {
                    reasons.push(format!("signature {count}'s payload is not in the store"));
                    continue;
                }
            };
            for key in keys {
                match check(&key.key, &payload, signature, digest) {
                    Ok(()) => {
                        return Ok(Signer {
                            name: key.name.clone(),
                            fingerprint: key.key.fingerprint().to_string(),
                        })
                    }
                    Err(e) => reasons.push(format!("signature {count}, key `{}`: {e}", key.name)),
                }
            }
        }
        if count == 0 {
            return Err(OciError::Unsigned {
                reference: at.to_string(),
                tag: digest.signature_tag(),
                keys: source.verify.keys_label(),
            });
        }
        Err(OciError::BadSignature {
            reference: at.to_string(),
            keys: source.verify.keys_label(),
            count,
            reasons: reasons.join("; "),
        })
    }
}

/// A registry client made on first use: a load the store can serve never connects.
struct Connection<'a> {
    source: &'a OciSource,
    client: Option<Registry>,
}

impl<'a> Connection<'a> {
    fn new(source: &'a OciSource) -> Self {
        Self {
            source,
            client: None,
        }
    }

    fn get(&mut self) -> Result<&Registry, OciError> {
        if self.client.is_none() {
            self.client = Some(Registry::connect(
                &self.source.settings,
                &self.source.reference,
            )?);
        }
        Ok(self.client.as_ref().expect("just connected"))
    }
}

fn parse_manifest(at: &OciRef, bytes: &[u8]) -> Result<OciImageManifest, OciError> {
    serde_json::from_slice(bytes).map_err(|e| OciError::BadManifest {
        reference: at.to_string(),
        reason: format!("its manifest is not an OCI image manifest: {e}"),
    })
}

/// The component layer of a Wasm artifact manifest: its digest and size.
fn component_layer(at: &OciRef, manifest: &OciImageManifest) -> Result<(Digest, u64), OciError> {
    let bad = |reason: String| OciError::BadManifest {
        reference: at.to_string(),
        reason,
    };
    let wasm: Vec<_> = manifest
        .layers
        .iter()
        .filter(|l| {
            l.media_type == WASM_LAYER_MEDIA_TYPE || l.media_type == LEGACY_WASM_LAYER_MEDIA_TYPE
        })
        .collect();
    let [layer] = wasm[..] else {
        let types: Vec<&str> = manifest
            .layers
            .iter()
            .map(|l| l.media_type.as_str())
            .collect();
        return Err(bad(format!(
            "it has {} `{WASM_LAYER_MEDIA_TYPE}` layers, not one (its layers: {})",
            wasm.len(),
            if types.is_empty() {
                "none".to_string()
            } else {
                types.join(", ")
            }
        )));
    };
    let digest = layer
        .digest
        .parse::<Digest>()
        .map_err(|e| bad(format!("its layer is named by {e}")))?;
    let size = u64::try_from(layer.size)
        .map_err(|_| bad(format!("its layer's size is {}", layer.size)))?;
    Ok((digest, size))
}
