//! `seam push COMPONENT oci://REGISTRY/REPO:TAG`: publish a component as a Wasm OCI artifact
//! (config `application/vnd.wasm.config.v0+json`, one `application/wasm` layer), which `wkg oci
//! pull` and `oras pull` read. Prints the digest reference to pin in a config.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use super::super::{interruptible, with_host, EXIT_OK};
use super::RegistryArgs;
use tokio_util::sync::CancellationToken;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The `.wasm` component.
    component: PathBuf,
    /// Where to push it: `oci://REGISTRY/REPOSITORY:TAG`.
    reference: String,
    /// A manifest annotation (repeatable), as `KEY=VALUE`. Annotations are metadata: no host
    /// reads a grant from one.
    #[arg(long = "annotation", value_name = "KEY=VALUE")]
    annotations: Vec<String>,
    #[command(flatten)]
    registry: RegistryArgs,
}

pub(crate) async fn run(args: Args, interrupt: &CancellationToken) -> Result<u8> {
    let reference = super::parse_reference(&args.reference)?;
    let settings = args.registry.settings(&reference)?;
    let mut annotations = BTreeMap::new();
    for pair in &args.annotations {
        let Some((key, value)) = pair.split_once('=') else {
            bail!("--annotation `{pair}` is not KEY=VALUE");
        };
        annotations.insert(key.to_string(), value.to_string());
    }
    // What it is, read the way a load reads it: a file that is not a Seam component is refused
    // before anything is pushed, and the artifact's config lists its imports and exports.
    let info = with_host(|host| async move {
        interruptible(host.inspect(&args.component, None), interrupt)
            .await?
            .with_context(|| format!("cannot push `{}`", args.component.display()))
    })
    .await?;
    let bytes = std::fs::read(&info.path)
        .with_context(|| format!("cannot read `{}`", info.path.display()))?;
    let pushed = seam_host::oci::publish::push(
        &settings,
        &reference,
        bytes,
        &info.imports,
        &info.exports,
        annotations,
    )
    .await?;
    errln!(
        "pushed `{}` ({} {}, {} bytes) to `{reference}`",
        info.path.display(),
        info.kind,
        info.version,
        pushed.size
    );
    outln!("{}", pushed.reference);
    Ok(EXIT_OK)
}
