//! cosign-compatible keyed signatures: ECDSA P-256 with SHA-256 over a "simple signing"
//! payload that names the manifest digest.
//!
//! cosign stores the signatures of manifest `sha256:<hex>` in the same repository, as an image
//! manifest at tag `sha256-<hex>.sig` with one layer per signature: the layer's blob is the
//! payload, its media type [`SIMPLE_SIGNING_MEDIA_TYPE`], and its annotation
//! [`SIGNATURE_ANNOTATION`] the base64 of the DER signature over the payload's bytes. A
//! signature counts when it verifies against a trusted key *and* its payload names the manifest
//! being loaded: a valid signature of another manifest proves nothing about this one.
//!
//! Keys are PEM: public keys as SubjectPublicKeyInfo (`BEGIN PUBLIC KEY`, what `cosign
//! generate-key-pair` writes to `cosign.pub`), private keys as unencrypted PKCS#8 (`BEGIN
//! PRIVATE KEY`, what `openssl genpkey` writes). A key's fingerprint is the SHA-256 of its DER
//! SubjectPublicKeyInfo, as `sha256:<hex>`.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use p256::ecdsa::{DerSignature, SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePublicKey, LineEnding};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::reference::Digest;

/// The media type of a signature layer (a simple-signing payload).
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";

/// The layer annotation that holds the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";

/// What the `type` of a payload must say.
pub const PAYLOAD_TYPE: &str = "cosign container image signature";

/// A trusted public key, from a PEM file.
#[derive(Clone)]
pub struct PublicKey {
    key: VerifyingKey,
    fingerprint: String,
}

impl PartialEq for PublicKey {
    fn eq(&self, other: &Self) -> bool {
        self.fingerprint == other.fingerprint
    }
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({})", self.fingerprint)
    }
}

/// A key file that cannot be used.
#[derive(Debug, Error)]
pub enum KeyError {
    /// It could not be read.
    #[error("cannot read key file `{path}`: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It is not a key of the kind wanted.
    #[error("key file `{path}` is not {wanted}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What it should be.
        wanted: &'static str,
        /// The decoder's explanation.
        reason: String,
    },
}

/// A public key that does not decode (or encode back to DER for its fingerprint).
#[derive(Debug, Error)]
#[error("{0}")]
pub struct BadKey(#[from] p256::pkcs8::spki::Error);

impl PublicKey {
    /// Reads an ECDSA P-256 public key (PEM SubjectPublicKeyInfo) from `path`.
    pub fn from_file(path: &Path) -> Result<Self, KeyError> {
        let text = std::fs::read_to_string(path).map_err(|source| KeyError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_pem(&text).map_err(|e| KeyError::Parse {
            path: path.to_path_buf(),
            wanted: "an ECDSA P-256 public key in PEM (`BEGIN PUBLIC KEY`)",
            reason: e.to_string(),
        })
    }

    /// Parses an ECDSA P-256 public key (PEM SubjectPublicKeyInfo).
    pub fn from_pem(text: &str) -> Result<Self, BadKey> {
        let key = VerifyingKey::from_public_key_pem(text.trim())?;
        Self::from_key(key)
    }

    fn from_key(key: VerifyingKey) -> Result<Self, BadKey> {
        let der = key.to_public_key_der()?;
        Ok(Self {
            fingerprint: Digest::of(der.as_bytes()).to_string(),
            key,
        })
    }

    /// `sha256:<hex>` of the DER SubjectPublicKeyInfo.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The key as PEM (`BEGIN PUBLIC KEY`), to hand to `cosign verify --key`.
    pub fn to_pem(&self) -> String {
        self.key
            .to_public_key_pem(LineEnding::LF)
            .unwrap_or_default()
    }

    /// Whether `signature` (base64 of a DER ECDSA signature) is this key's over `payload`.
    pub fn verify(&self, payload: &[u8], signature: &str) -> Result<(), SignatureError> {
        let der = base64::engine::general_purpose::STANDARD
            .decode(signature.trim())
            .map_err(|e| SignatureError::Encoding(e.to_string()))?;
        let signature = DerSignature::try_from(der.as_slice())
            .map_err(|e| SignatureError::Encoding(format!("not a DER ECDSA signature: {e}")))?;
        self.key
            .verify(payload, &signature)
            .map_err(|_| SignatureError::Mismatch)
    }
}

/// Why one signature does not count.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SignatureError {
    /// The annotation is not base64 of a DER signature.
    #[error("its signature is malformed ({0})")]
    Encoding(String),
    /// It is not this key's signature over the payload.
    #[error("its signature does not verify against the key")]
    Mismatch,
    /// The payload is not a simple-signing document.
    #[error("its payload is not a cosign simple-signing document ({0})")]
    Payload(String),
    /// The payload signs another manifest.
    #[error("it verifies, but signs {signed}, not {wanted}")]
    OtherManifest {
        /// The digest the payload names.
        signed: String,
        /// The manifest being loaded.
        wanted: Digest,
    },
}

/// A private key, to sign with.
pub struct SigningKeyFile {
    key: SigningKey,
    public: PublicKey,
}

impl SigningKeyFile {
    /// Reads an unencrypted PKCS#8 PEM ECDSA P-256 private key (`BEGIN PRIVATE KEY`).
    pub fn from_file(path: &Path) -> Result<Self, KeyError> {
        let text = std::fs::read_to_string(path).map_err(|source| KeyError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let parse_error = |reason: String| KeyError::Parse {
            path: path.to_path_buf(),
            wanted: "an unencrypted ECDSA P-256 private key in PKCS#8 PEM (`BEGIN PRIVATE KEY`; \
                     `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256` makes one)",
            reason,
        };
        let key =
            SigningKey::from_pkcs8_pem(text.trim()).map_err(|e| parse_error(e.to_string()))?;
        let public =
            PublicKey::from_key(*key.verifying_key()).map_err(|e| parse_error(e.to_string()))?;
        Ok(Self { key, public })
    }

    /// Its public half.
    pub fn public(&self) -> &PublicKey {
        &self.public
    }

    /// The base64 of the DER signature over `payload`.
    pub fn sign(&self, payload: &[u8]) -> String {
        let signature: DerSignature = self.key.sign(payload);
        base64::engine::general_purpose::STANDARD.encode(signature.as_bytes())
    }
}

/// The simple-signing payload: what a signature is over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    /// What the signature is about.
    pub critical: Critical,
    /// Anything else the signer added (cosign writes `null`).
    pub optional: Option<serde_json::Value>,
}

/// The part of a payload a verifier must understand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Critical {
    /// The repository signed.
    pub identity: Identity,
    /// The manifest signed.
    pub image: Image,
    /// Always [`PAYLOAD_TYPE`].
    #[serde(rename = "type")]
    pub kind: String,
}

/// `critical.identity`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// `REGISTRY/REPOSITORY`.
    #[serde(rename = "docker-reference")]
    pub docker_reference: String,
}

/// `critical.image`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// `sha256:<hex>` of the manifest.
    #[serde(rename = "docker-manifest-digest")]
    pub docker_manifest_digest: String,
}

/// The payload cosign writes for manifest `digest` of repository `docker_reference`, byte for
/// byte: compact JSON, keys in this order, `"optional":null`.
pub fn payload(docker_reference: &str, digest: &Digest) -> Vec<u8> {
    let payload = Payload {
        critical: Critical {
            identity: Identity {
                docker_reference: docker_reference.to_string(),
            },
            image: Image {
                docker_manifest_digest: digest.to_string(),
            },
            kind: PAYLOAD_TYPE.to_string(),
        },
        optional: None,
    };
    serde_json::to_vec(&payload).unwrap_or_default()
}

/// Checks one signature of manifest `wanted`: `signature` must be `key`'s over `payload`, and
/// `payload` a simple-signing document naming `wanted`. The repository it names is not checked,
/// as cosign does not: the signature is about the bytes, wherever they are kept.
pub fn check(
    key: &PublicKey,
    payload: &[u8],
    signature: &str,
    wanted: &Digest,
) -> Result<(), SignatureError> {
    key.verify(payload, signature)?;
    let document: Payload =
        serde_json::from_slice(payload).map_err(|e| SignatureError::Payload(e.to_string()))?;
    if document.critical.kind != PAYLOAD_TYPE {
        return Err(SignatureError::Payload(format!(
            "its type is `{}`",
            document.critical.kind
        )));
    }
    if document.critical.image.docker_manifest_digest != wanted.to_string() {
        return Err(SignatureError::OtherManifest {
            signed: document.critical.image.docker_manifest_digest,
            wanted: *wanted,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_is_cosigns_bytes() {
        let digest: Digest =
            "sha256:f3cfc9d0dbf931d3db4685ec659b7ac68e2a578219da4aae65427886e649b06b"
                .parse()
                .unwrap();
        assert_eq!(
            String::from_utf8(payload("registry-testing.svc.lan/busybox", &digest)).unwrap(),
            "{\"critical\":{\"identity\":{\"docker-reference\":\"registry-testing.svc.lan/busybox\"},\
             \"image\":{\"docker-manifest-digest\":\"sha256:f3cfc9d0dbf931d3db4685ec659b7ac68e2a578219da4aae65427886e649b06b\"},\
             \"type\":\"cosign container image signature\"},\"optional\":null}"
        );
    }
}
