//! Talking to one registry, through `oci-client`: resolving a tag, fetching a manifest or a
//! blob by digest (checked against the digest, and a layer against the size limit before it is
//! kept), and pushing. HTTPS unless `[oci] http` lists the registry; roots are the system's plus
//! `[oci] ca_file` (or `$SEAM_OCI_CA_FILE`).

use std::time::Duration;

use futures::StreamExt as _;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;
use oci_client::Client;

use super::reference::{Digest, OciRef};
use super::settings::{OciSettings, SettingsFrom, CA_FILE_ENV};
use super::OciError;

/// The most bytes of a manifest read: registries themselves refuse manifests over 4 MiB.
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;

/// The most bytes of a signature payload read (cosign's are a few hundred).
pub const MAX_PAYLOAD_BYTES: u64 = 64 << 10;

/// The media types a component manifest may be pulled as.
const MANIFEST_TYPES: &[&str] = &[
    oci_client::manifest::OCI_IMAGE_MEDIA_TYPE,
    oci_client::manifest::IMAGE_MANIFEST_MEDIA_TYPE,
];

/// A client for the registry of one reference, with its credentials.
pub struct Registry {
    client: Client,
    auth: RegistryAuth,
    /// Where `auth` came from, `None` for anonymous access: what a refusal names.
    given: Option<String>,
    /// Who wrote the settings: how a refusal says to give credentials.
    from: SettingsFrom,
    registry: String,
}

impl Registry {
    /// A client for `reference`'s registry.
    pub fn connect(settings: &OciSettings, reference: &OciRef) -> Result<Self, OciError> {
        // `seam push`/`sign` reach a registry without a host, which would install it.
        seam_core::tls::install_crypto_provider();
        reference
            .check_grammar()
            .map_err(|e| OciError::Reference(Box::new(e)))?;
        let registry = reference.registry().to_string();
        let protocol = if settings.uses_http(&registry) {
            if !settings.insecure && !reference.is_loopback() {
                return Err(OciError::Insecure { registry });
            }
            ClientProtocol::Http
        } else {
            ClientProtocol::Https
        };
        let ca_file = settings
            .ca_file
            .clone()
            // Set but empty is unset (`SEAM_OCI_CA_FILE= seam ...`), not a file named "".
            .or_else(|| {
                std::env::var_os(CA_FILE_ENV)
                    .filter(|v| !v.is_empty())
                    .map(std::path::PathBuf::from)
            });
        let mut extra_root_certificates = Vec::new();
        if let Some(path) = ca_file {
            let data = std::fs::read(&path).map_err(|e| OciError::CaFile {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            extra_root_certificates.push(Certificate {
                encoding: CertificateEncoding::Pem,
                data,
            });
        }
        let config = ClientConfig {
            protocol,
            extra_root_certificates,
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(60)),
            user_agent: concat!("seam/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        };
        let client = Client::try_from(config).map_err(|e| OciError::Registry {
            reference: reference.to_string(),
            registry: registry.clone(),
            reason: format!("cannot set up the client: {}", one_line(&e)),
        })?;
        let (auth, given) = super::auth::credentials(settings, &registry)?;
        Ok(Self {
            client,
            auth,
            given,
            from: settings.from,
            registry,
        })
    }

    /// The registry refused `reference`: the credentials given, or access without any.
    fn unauthorized(&self, reference: String, registry: String) -> OciError {
        OciError::Unauthorized {
            reference,
            registry,
            given: self.given.clone(),
            from: self.from,
        }
    }

    /// What `error`, met on `reference`, means to a user.
    fn error(&self, reference: &OciRef, error: OciDistributionError) -> OciError {
        let reference = reference.to_string();
        let registry = self.registry.clone();
        match error {
            OciDistributionError::RequestError(e) if e.is_connect() || e.is_timeout() => {
                OciError::Unreachable {
                    reference,
                    registry,
                    reason: one_line(&e),
                }
            }
            OciDistributionError::UnauthorizedError { .. }
            | OciDistributionError::AuthenticationFailure(_) => {
                self.unauthorized(reference, registry)
            }
            OciDistributionError::ImageManifestNotFoundError(_) => OciError::NotFound {
                reference,
                registry,
            },
            OciDistributionError::RegistryError { envelope, .. }
                if envelope.errors.iter().any(|e| {
                    matches!(
                        e.code,
                        OciErrorCode::ManifestUnknown
                            | OciErrorCode::NameUnknown
                            | OciErrorCode::BlobUnknown
                    )
                }) =>
            {
                OciError::NotFound {
                    reference,
                    registry,
                }
            }
            OciDistributionError::RegistryError { envelope, .. }
                if envelope.errors.iter().any(|e| {
                    matches!(e.code, OciErrorCode::Unauthorized | OciErrorCode::Denied)
                }) =>
            {
                self.unauthorized(reference, registry)
            }
            OciDistributionError::ServerError { code: 404, .. } => OciError::NotFound {
                reference,
                registry,
            },
            OciDistributionError::ServerError {
                code: 401 | 403, ..
            } => self.unauthorized(reference, registry),
            other => OciError::Registry {
                reference,
                registry,
                reason: one_line(&other),
            },
        }
    }

    /// The manifest digest `reference`'s tag points at now.
    pub async fn resolve(&self, reference: &OciRef) -> Result<Digest, OciError> {
        let digest = self
            .client
            .fetch_manifest_digest(&reference.to_client(), &self.auth)
            .await
            .map_err(|e| self.error(reference, e))?;
        digest
            .parse()
            .map_err(|e: super::reference::BadDigest| OciError::Registry {
                reference: reference.to_string(),
                registry: self.registry.clone(),
                reason: format!("it named the manifest by {e}"),
            })
    }

    /// The bytes of manifest `digest` of `reference`'s repository, checked against the digest.
    pub async fn manifest(&self, reference: &OciRef, digest: Digest) -> Result<Vec<u8>, OciError> {
        let at = reference.at(digest);
        let pulled = self
            .client
            .pull_manifest_raw(&at.to_client(), &self.auth, MANIFEST_TYPES)
            .await;
        let bytes = match pulled {
            Ok((bytes, _)) => bytes,
            // The client checks the body against the digest asked for too; either way the
            // refusal names both digests.
            Err(OciDistributionError::DigestError(
                oci_client::errors::DigestError::VerificationError { actual, .. },
            )) => {
                return Err(OciError::Tampered {
                    reference: reference.to_string(),
                    what: "a manifest",
                    expected: digest,
                    actual,
                    lock: None,
                })
            }
            Err(e) => return Err(self.error(&at, e)),
        };
        if bytes.len() > MAX_MANIFEST_BYTES {
            return Err(OciError::BadManifest {
                reference: at.to_string(),
                reason: format!(
                    "it is {} bytes, more than the {MAX_MANIFEST_BYTES} a manifest may be",
                    bytes.len()
                ),
            });
        }
        let actual = Digest::of(&bytes);
        if actual != digest {
            return Err(OciError::Tampered {
                reference: reference.to_string(),
                what: "a manifest",
                expected: digest,
                actual: actual.to_string(),
                lock: None,
            });
        }
        Ok(bytes.to_vec())
    }

    /// The manifest of the cosign signatures of manifest `digest`, with its digest; `None` if
    /// the registry has none.
    pub async fn signatures(
        &self,
        reference: &OciRef,
        digest: &Digest,
    ) -> Result<Option<(Digest, Vec<u8>)>, OciError> {
        let tagged = reference.tagged(&digest.signature_tag());
        let signatures = match self.resolve(&tagged).await {
            Ok(signatures) => signatures,
            Err(OciError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let bytes = self.manifest(&tagged, signatures).await?;
        Ok(Some((signatures, bytes)))
    }

    /// The blob `digest` of `reference`'s repository, declared `size` bytes: refused before a
    /// byte is kept if it is larger than `limit` (`what` and `key` name the limit), read only up
    /// to its size, and checked against the digest.
    pub async fn blob(
        &self,
        reference: &OciRef,
        digest: &Digest,
        size: u64,
        limit: Limit<'_>,
    ) -> Result<Vec<u8>, OciError> {
        if size > limit.bytes {
            return Err(limit.refuse(reference, size));
        }
        let descriptor = oci_client::manifest::OciDescriptor {
            digest: digest.to_string(),
            size: size as i64,
            ..Default::default()
        };
        let mut stream = self
            .client
            .pull_blob_stream(&reference.to_client(), &descriptor)
            .await
            .map_err(|e| self.error(reference, e))?;
        let mut bytes = Vec::with_capacity(size.min(limit.bytes) as usize);
        let mut hasher = <sha2::Sha256 as sha2::Digest>::new();
        while let Some(chunk) = stream.next().await {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                // The client's own digest check at the end of the stream: the refusal below
                // names both digests, from what was read.
                Err(e)
                    if e.get_ref()
                        .is_some_and(|inner| inner.is::<oci_client::errors::DigestError>()) =>
                {
                    break
                }
                Err(e) => {
                    return Err(OciError::Registry {
                        reference: reference.to_string(),
                        registry: self.registry.clone(),
                        reason: format!("the blob {digest} broke off: {}", one_line(&e)),
                    })
                }
            };
            // A registry that sends more than it declared, or than the limit, is cut off
            // before the excess is kept.
            let total = bytes.len() as u64 + chunk.len() as u64;
            if total > limit.bytes {
                return Err(limit.refuse(reference, total));
            }
            if total > size {
                return Err(OciError::Tampered {
                    reference: reference.to_string(),
                    what: limit.what,
                    expected: *digest,
                    actual: format!("more than the {size} bytes its manifest declares"),
                    lock: None,
                });
            }
            sha2::Digest::update(&mut hasher, &chunk);
            bytes.extend_from_slice(&chunk);
        }
        let actual = Digest::from_bytes(sha2::Digest::finalize(hasher).into());
        if actual != *digest {
            return Err(OciError::Tampered {
                reference: reference.to_string(),
                what: limit.what,
                expected: *digest,
                actual: actual.to_string(),
                lock: None,
            });
        }
        Ok(bytes)
    }

    /// Pushes a blob (its digest computed here).
    pub async fn push_blob(&self, reference: &OciRef, bytes: Vec<u8>) -> Result<Digest, OciError> {
        let digest = Digest::of(&bytes);
        if self
            .client
            .blob_exists(&reference.to_client(), &digest.to_string())
            .await
            .unwrap_or(false)
        {
            return Ok(digest);
        }
        self.client
            .push_blob(&reference.to_client(), bytes, &digest.to_string())
            .await
            .map_err(|e| self.error(reference, e))?;
        Ok(digest)
    }

    /// Pushes `manifest` to `reference`'s tag; returns the digest of the bytes pushed.
    pub async fn push_manifest(
        &self,
        reference: &OciRef,
        manifest: &OciImageManifest,
    ) -> Result<Digest, OciError> {
        let bytes = serde_json::to_vec(manifest).map_err(|e| OciError::BadManifest {
            reference: reference.to_string(),
            reason: e.to_string(),
        })?;
        let digest = Digest::of(&bytes);
        let content_type =
            http::HeaderValue::from_static(oci_client::manifest::OCI_IMAGE_MEDIA_TYPE);
        self.client
            .push_manifest_raw(&reference.to_client(), bytes, content_type)
            .await
            .map_err(|e| self.error(reference, e))?;
        Ok(digest)
    }

    /// Authenticates for pushing to `reference`'s repository (once, before the first push).
    pub async fn authenticate_push(&self, reference: &OciRef) -> Result<(), OciError> {
        self.client
            .auth(
                &reference.to_client(),
                &self.auth,
                oci_client::RegistryOperation::Push,
            )
            .await
            .map(|_| ())
            .map_err(|e| self.error(reference, e))
    }
}

/// A size limit on a blob: its bytes, and what is limited, for the refusal.
#[derive(Debug, Clone, Copy)]
pub struct Limit<'a> {
    pub bytes: u64,
    /// `the component layer`, `a signature payload`.
    pub what: &'static str,
    /// The setting that raises it (`[oci] max_layer_mb`), or `None` for a fixed limit.
    pub key: Option<&'a str>,
}

impl Limit<'_> {
    fn refuse(&self, reference: &OciRef, size: u64) -> OciError {
        OciError::TooLarge {
            reference: reference.to_string(),
            what: self.what,
            size,
            limit: self.bytes,
            key: self.key.map(str::to_string),
        }
    }
}

/// An error and its causes, on one line.
pub fn one_line(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}
