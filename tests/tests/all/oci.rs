//! Components from registries, at the library's level: a signature made by the real cosign (a
//! public sigstore test vector, `tests/fixtures/cosign/`) verifies with Seam's check, and the
//! check refuses it for another key or another manifest; the payload Seam signs is cosign's,
//! byte for byte. (The registry tests run through the `seam` binary: `host/cli/tests/oci.rs`.)

use std::path::PathBuf;

use seam_host::oci::signature::{check, payload, PublicKey, SignatureError};
use seam_host::oci::Digest;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/cosign")
        .join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).expect("the cosign fixture")
}

/// The manifest digest the vector's payload names.
const SIGNED: &str = "sha256:f3cfc9d0dbf931d3db4685ec659b7ac68e2a578219da4aae65427886e649b06b";

#[test]
fn a_signature_cosign_made_verifies_and_only_for_its_key_and_manifest() {
    let key = PublicKey::from_file(&fixture("cosign.pub")).expect("cosign's public key reads");
    let other = PublicKey::from_file(&fixture("other.pub")).expect("the other key reads");
    let payload_bytes = std::fs::read(fixture("payload.json")).unwrap();
    let signature = read("signature.b64");
    let signed: Digest = SIGNED.parse().unwrap();

    check(&key, &payload_bytes, &signature, &signed).expect("cosign's signature verifies");
    assert_eq!(
        check(&other, &payload_bytes, &signature, &signed),
        Err(SignatureError::Mismatch)
    );
    let elsewhere = Digest::of(b"another manifest");
    assert_eq!(
        check(&key, &payload_bytes, &signature, &elsewhere),
        Err(SignatureError::OtherManifest {
            signed: SIGNED.to_string(),
            wanted: elsewhere,
        })
    );
    // One byte of the payload changed, and the signature no longer holds.
    let mut edited = payload_bytes.clone();
    edited[10] ^= 1;
    assert_eq!(
        check(&key, &edited, &signature, &signed),
        Err(SignatureError::Mismatch)
    );
    // What Seam writes for that image is what cosign signed.
    assert_eq!(
        payload("registry-testing.svc.lan/busybox", &signed),
        payload_bytes
    );
    assert!(key.fingerprint().starts_with("sha256:"));
    assert_ne!(key.fingerprint(), other.fingerprint());
}
