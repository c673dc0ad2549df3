//! `seam inspect COMPONENT [--config JSON] [--json]`; COMPONENT is a file or an `oci://`
//! reference (pulled and checked into the store first, its signature against `--key` if given).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use seam_host::sandbox::Granted;
use seam_host::{ComponentInfo, Limits, ProviderDescriptor};

use super::{interruptible, with_host, EXIT_ERROR, EXIT_OK};
use tokio_util::sync::CancellationToken;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The `.wasm` component, or `oci://REGISTRY/REPOSITORY:TAG` (or `@sha256:DIGEST`) for one
    /// in a registry.
    component: PathBuf,
    /// For an `oci://` component: the public key (PEM) its signature must verify against.
    /// Without it the signature is not checked (and the output says so).
    #[arg(long, value_name = "KEY.pub")]
    key: Option<PathBuf>,
    #[command(flatten)]
    registry: crate::oci::RegistryArgs,
    /// The plugin config to describe it with, as a JSON object (default `{}`). With this flag, a
    /// config the component refuses makes the command exit 1.
    #[arg(long, value_name = "JSON")]
    config: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) async fn run(args: Args, interrupt: &CancellationToken) -> Result<u8> {
    let config = match &args.config {
        None => None,
        Some(text) => {
            let value: serde_json::Value =
                serde_json::from_str(text).context("`--config` is not valid JSON")?;
            if !value.is_object() {
                bail!("`--config` must be a JSON object");
            }
            Some(value)
        }
    };
    let given = config.is_some();
    let written = args.component.to_string_lossy().into_owned();
    let source = if written.starts_with(seam_host::oci::reference::SCHEME) {
        Some(oci_source(&written, &args)?)
    } else {
        None
    };
    let (info, pulled) = with_host(|host| async move {
        let (path, pulled) = match &source {
            Some(source) => {
                let resolved = interruptible(host.oci().resolve(source), interrupt)
                    .await?
                    .with_context(|| format!("cannot inspect `{written}`"))?;
                (resolved.path.clone(), Some(resolved))
            }
            None => (args.component.clone(), None),
        };
        let info = interruptible(host.inspect(&path, config), interrupt)
            .await?
            .with_context(|| format!("cannot inspect `{written}`"))?;
        Ok((info, pulled))
    })
    .await?;

    if args.json {
        let mut value = serde_json::to_value(&info).context("cannot serialise the report")?;
        if let Some(fields) = value.as_object_mut() {
            fields.insert(
                "world".into(),
                seam_host::versions::world_name(info.kind).into(),
            );
            fields.insert("grants".into(), serde_json::to_value(Granted::default())?);
            if let Some(pulled) = &pulled {
                fields.insert("reference".into(), pulled.reference.to_string().into());
                fields.insert("digest".into(), pulled.digest.to_string().into());
                fields.insert(
                    "signer".into(),
                    pulled
                        .signer
                        .as_ref()
                        .map(|s| serde_json::json!({"name": s.name, "fingerprint": s.fingerprint}))
                        .into(),
                );
            }
            fields.insert("limits".into(), serde_json::to_value(Limits::default())?);
        }
        let text = serde_json::to_string_pretty(&value).context("cannot serialise the report")?;
        outln!("{text}");
    } else {
        if let Some(pulled) = &pulled {
            outln!("reference: {}", pulled.reference);
            outln!(
                "signature: {}",
                match &pulled.signer {
                    Some(s) => format!("verified against `{}` ({})", s.name, s.fingerprint),
                    None => "not checked (pass --key KEY.pub to check it)".into(),
                }
            );
        }
        print_human(&info, given);
    }
    Ok(
        if info.link_error.is_some() || (given && info.config_error.is_some()) {
            EXIT_ERROR
        } else {
            EXIT_OK
        },
    )
}

/// What `seam inspect oci://...` pulls: the reference, checked against `--key` if given, with
/// the registry flags.
fn oci_source(written: &str, args: &Args) -> Result<seam_host::oci::OciSource> {
    let reference = crate::oci::parse_reference(written)?;
    let settings = args.registry.settings(&reference)?;
    let verify = match &args.key {
        Some(path) => seam_host::oci::Verify::Keys(vec![seam_host::oci::TrustKey {
            // Unquoted: messages quote a key's name themselves (`TrustKey::label`).
            name: path.display().to_string(),
            path: path.clone(),
            key: seam_host::oci::signature::PublicKey::from_file(path)?,
        }]),
        None => seam_host::oci::Verify::Unsigned,
    };
    Ok(seam_host::oci::OciSource {
        reference,
        verify,
        locked: None,
        settings: std::sync::Arc::new(settings),
    })
}

fn print_human(info: &ComponentInfo, config_given: bool) {
    if let Some(error) = &info.link_error {
        outln!("this host cannot run it: {error}");
    }
    outln!("component: {}", info.path.display());
    outln!(
        "kind:      {} (world {}, seam:plugin@{})",
        info.kind,
        seam_host::versions::world_name(info.kind),
        info.version
    );
    // `inspect` reads the component with no config entry, so with nothing granted.
    outln!(
        "grants:    {} (grants come from a config entry; see `seam check`)",
        Granted::default().summary()
    );
    outln!("limits:    {}", Limits::default().summary());
    outln!("imports:");
    for name in &info.imports {
        outln!("  {name}");
    }
    outln!("exports:");
    for name in &info.exports {
        outln!("  {name}");
    }
    if info.link_error.is_some() {
        return;
    }
    if let Some(error) = &info.config_error {
        if config_given {
            outln!("config error: {error}");
        } else {
            outln!("config error: {error} (described with config {{}}; pass one with --config)");
        }
        return;
    }
    if let Some(provider) = &info.provider {
        print_provider(provider);
    }
    if let Some(tool_name) = &info.tool_name {
        outln!("declares:");
        outln!("  tool name:               {tool_name}");
        match &info.binds_to {
            Some(provider) => outln!("  follows provider:        {provider}"),
            None => outln!("  follows provider:        (none: always mounted)"),
        }
    }
}

fn print_provider(d: &ProviderDescriptor) {
    let capabilities = list(&[
        ("output-schema", d.capabilities.output_schema),
        ("depth-limit", d.capabilities.depth_limit),
        ("tool-filter", d.capabilities.tool_filter),
        ("persona", d.capabilities.persona),
    ]);
    let features = list(&[
        ("steering", d.features.steering),
        ("resume", d.features.resume),
    ]);
    outln!("declares:");
    outln!("  provider name:           {}", d.name);
    outln!("  capabilities:            {capabilities}");
    outln!("  runtime features:        {features}");
    outln!(
        "  inherits parent context: {}",
        if d.inherits_parent_context {
            "yes"
        } else {
            "no"
        }
    );
}

/// The names whose flag is set, or `none`.
fn list(flags: &[(&str, bool)]) -> String {
    let on: Vec<&str> = flags
        .iter()
        .filter(|(_, set)| *set)
        .map(|(name, _)| *name)
        .collect();
    if on.is_empty() {
        "none".into()
    } else {
        on.join(", ")
    }
}
