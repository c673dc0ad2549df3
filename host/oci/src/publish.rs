//! Publishing: `seam push` (a component as a Wasm OCI artifact) and `seam sign` (a cosign
//! signature of it, stored where cosign stores one, so `cosign verify --key` reads it).
//!
//! The artifact is the CNCF Wasm OCI layout, which `wkg oci pull` and `oras pull` read: an
//! OCI image manifest whose config has media type [`WASM_CONFIG_MEDIA_TYPE`] (a JSON document
//! saying `architecture: wasm`, `os: wasip2`, the layer digests and the component's imports and
//! exports) and whose one layer, [`WASM_LAYER_MEDIA_TYPE`], is the component's bytes.

use std::collections::BTreeMap;

use oci_client::manifest::{OciDescriptor, OciImageManifest, IMAGE_CONFIG_MEDIA_TYPE};
use serde::Serialize;

use super::reference::{Digest, OciRef};
use super::registry::Registry;
use super::settings::OciSettings;
use super::signature::{payload, SigningKeyFile, SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE};
use super::{OciError, WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE};

/// The config document of a Wasm component artifact.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WasmConfig<'a> {
    created: String,
    architecture: &'static str,
    os: &'static str,
    layer_digests: Vec<String>,
    component: ComponentTypes<'a>,
}

#[derive(Serialize)]
struct ComponentTypes<'a> {
    exports: &'a [String],
    imports: &'a [String],
}

/// What `seam push` pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// The reference at the new manifest's digest.
    pub reference: OciRef,
    /// The manifest digest.
    pub digest: Digest,
    /// The component layer's digest.
    pub layer: Digest,
    /// The component's size in bytes.
    pub size: u64,
}

/// Pushes `component` (a component's bytes, whose `imports` and `exports` the caller read from
/// it) to `reference`'s tag, with `annotations` on the manifest.
pub async fn push(
    settings: &OciSettings,
    reference: &OciRef,
    component: Vec<u8>,
    imports: &[String],
    exports: &[String],
    annotations: BTreeMap<String, String>,
) -> Result<Pushed, OciError> {
    if reference.tag().is_none() || reference.digest().is_some() {
        return Err(OciError::Push {
            reference: reference.to_string(),
            reason: "push to a tag (`oci://REGISTRY/REPOSITORY:TAG`); the digest is what the \
                     push makes"
                .into(),
        });
    }
    let registry = Registry::connect(settings, reference)?;
    registry.authenticate_push(reference).await?;
    let size = component.len() as u64;
    let layer = registry.push_blob(reference, component).await?;
    let config = WasmConfig {
        created: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        architecture: "wasm",
        os: "wasip2",
        layer_digests: vec![layer.to_string()],
        component: ComponentTypes { exports, imports },
    };
    let config = serde_json::to_vec(&config).map_err(|e| OciError::Push {
        reference: reference.to_string(),
        reason: e.to_string(),
    })?;
    let config_size = config.len();
    let config_digest = registry.push_blob(reference, config).await?;
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(oci_client::manifest::OCI_IMAGE_MEDIA_TYPE.to_string()),
        config: descriptor(
            WASM_CONFIG_MEDIA_TYPE,
            &config_digest,
            config_size as u64,
            None,
        ),
        layers: vec![descriptor(WASM_LAYER_MEDIA_TYPE, &layer, size, None)],
        subject: None,
        artifact_type: None,
        annotations: (!annotations.is_empty()).then_some(annotations),
    };
    let digest = registry.push_manifest(reference, &manifest).await?;
    Ok(Pushed {
        reference: reference.at(digest),
        digest,
        layer,
        size,
    })
}

fn descriptor(
    media_type: &str,
    digest: &Digest,
    size: u64,
    annotations: Option<BTreeMap<String, String>>,
) -> OciDescriptor {
    OciDescriptor {
        media_type: media_type.to_string(),
        digest: digest.to_string(),
        size: size as i64,
        urls: None,
        annotations,
        ..Default::default()
    }
}

/// What `seam sign` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// The reference at the manifest digest signed.
    pub reference: OciRef,
    /// The tag the signatures are at (`sha256-<hex>.sig`).
    pub tag: String,
    /// The signing key's fingerprint.
    pub fingerprint: String,
    /// Whether the same signature was there already (nothing was pushed).
    pub already: bool,
}

/// Signs the manifest `reference` names (its digest, or what its tag resolves to) with `key`,
/// adding the signature to the cosign signature manifest of that digest.
pub async fn sign(
    settings: &OciSettings,
    reference: &OciRef,
    key: &SigningKeyFile,
) -> Result<Signed, OciError> {
    let registry = Registry::connect(settings, reference)?;
    let digest = match reference.digest() {
        Some(digest) => digest,
        None => registry.resolve(reference).await?,
    };
    // What is signed must exist and be what its digest says.
    registry.manifest(reference, digest).await?;
    let tag = digest.signature_tag();
    let signatures_ref = reference.tagged(&tag);
    let payload = payload(&reference.repository_path(), &digest);
    let payload_digest = Digest::of(&payload);
    let signature = key.sign(&payload);
    let mut layers = match registry.signatures(reference, &digest).await? {
        Some((_, bytes)) => serde_json::from_slice::<OciImageManifest>(&bytes)
            .map_err(|e| OciError::BadManifest {
                reference: signatures_ref.to_string(),
                reason: format!("its signature manifest is not an OCI image manifest: {e}"),
            })?
            .layers
            .into_iter()
            .filter(|l| l.media_type == SIMPLE_SIGNING_MEDIA_TYPE)
            .collect(),
        None => Vec::new(),
    };
    let done = Signed {
        reference: reference.at(digest),
        tag: tag.clone(),
        fingerprint: key.public().fingerprint().to_string(),
        already: true,
    };
    // ECDSA signatures here are deterministic (RFC 6979): signing again gives the same bytes.
    if layers.iter().any(|l| {
        l.digest == payload_digest.to_string()
            && l.annotations
                .as_ref()
                .and_then(|a| a.get(SIGNATURE_ANNOTATION))
                == Some(&signature)
    }) {
        return Ok(done);
    }
    registry.authenticate_push(&signatures_ref).await?;
    let payload_size = payload.len() as u64;
    registry.push_blob(&signatures_ref, payload).await?;
    layers.push(descriptor(
        SIMPLE_SIGNING_MEDIA_TYPE,
        &payload_digest,
        payload_size,
        Some(BTreeMap::from([(
            SIGNATURE_ANNOTATION.to_string(),
            signature,
        )])),
    ));
    // The config cosign writes: an image config whose root filesystem is the payloads.
    let config = serde_json::json!({
        "architecture": "",
        "os": "",
        "config": {},
        "rootfs": {
            "type": "layers",
            "diff_ids": layers.iter().map(|l| l.digest.clone()).collect::<Vec<_>>(),
        },
    });
    let config = serde_json::to_vec(&config).map_err(|e| OciError::Push {
        reference: signatures_ref.to_string(),
        reason: e.to_string(),
    })?;
    let config_size = config.len() as u64;
    let config_digest = registry.push_blob(&signatures_ref, config).await?;
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(oci_client::manifest::OCI_IMAGE_MEDIA_TYPE.to_string()),
        config: descriptor(IMAGE_CONFIG_MEDIA_TYPE, &config_digest, config_size, None),
        layers,
        subject: None,
        artifact_type: None,
        annotations: None,
    };
    registry.push_manifest(&signatures_ref, &manifest).await?;
    Ok(Signed {
        already: false,
        ..done
    })
}
