//! `seam sign oci://... --key KEY.pem`: a cosign-compatible signature of the manifest a
//! reference names, stored where cosign stores one (tag `sha256-<hex>.sig` of the same
//! repository), so `cosign verify --key KEY.pub` and Seam's `[trust.keys]` both check it.

use std::path::PathBuf;

use anyhow::Result;
use seam_host::oci::signature::SigningKeyFile;

use super::super::EXIT_OK;
use super::RegistryArgs;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// What to sign: `oci://REGISTRY/REPOSITORY:TAG` (the digest it names now) or
    /// `...@sha256:DIGEST`.
    reference: String,
    /// The private key: unencrypted ECDSA P-256 in PKCS#8 PEM (`openssl genpkey -algorithm EC
    /// -pkeyopt ec_paramgen_curve:P-256 -out KEY.pem`).
    #[arg(long, value_name = "KEY.pem")]
    key: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
}

pub(crate) async fn run(args: Args) -> Result<u8> {
    let reference = super::parse_reference(&args.reference)?;
    let settings = args.registry.settings(&reference)?;
    let key = SigningKeyFile::from_file(&args.key)?;
    let signed = seam_host::oci::publish::sign(&settings, &reference, &key).await?;
    outln!(
        "{} `{}` with key {} (signatures at tag `{}`)",
        if signed.already {
            "already signed"
        } else {
            "signed"
        },
        signed.reference,
        signed.fingerprint,
        signed.tag
    );
    Ok(EXIT_OK)
}
