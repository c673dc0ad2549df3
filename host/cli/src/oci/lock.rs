//! `seam lock CONFIG [--locked]`: resolve every `oci://` entry at its registry (a tag to the
//! digest it names now), pull and check it as a load does (digest, size, signature), and write
//! what each resolved to, and who signed it, to the config's lock file.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use seam_host::oci::{lock_path, Lock, LockEntry, Signer};

use super::super::{read_config, with_host, EXIT_OK};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The config file (TOML); its lock is `NAME.lock` beside `NAME.toml`.
    config: PathBuf,
    /// Write nothing, and fail if the lock would change.
    #[arg(long)]
    locked: bool,
}

pub(crate) async fn run(args: Args) -> Result<u8> {
    let config = read_config(&args.config)?;
    let path = lock_path(&args.config);
    let old = config
        .lock
        .as_ref()
        .map(|l| l.entries.as_slice())
        .unwrap_or_default();
    let locked = args.locked;
    let entries = with_host(|host| {
        let config = &config;
        let path = &path;
        async move {
            // `--locked` asks whether the lock would change: that is answered from the digests
            // alone, before a new digest is pulled and checked (a moved tag's new manifest may
            // be unsigned, which would otherwise be reported instead).
            if locked {
                let moved = moved(&host, config, old).await?;
                if !moved.is_empty() {
                    bail!(
                        "the lock file `{}` would change (--locked): {}",
                        path.display(),
                        moved.join("; ")
                    );
                }
            }
            let mut entries = Vec::new();
            for (entry, source) in config.oci_entries() {
                let resolved = host
                    .oci()
                    .resolve_fresh(source)
                    .await
                    .with_context(super::plugin(&entry.id))?;
                entries.push(LockEntry {
                    id: entry.id.clone(),
                    reference: source.reference.to_string(),
                    digest: resolved.digest,
                    size: resolved.size,
                    signer: resolved.signer.map(|s| Signer {
                        name: s.name,
                        fingerprint: s.fingerprint,
                    }),
                    file: path.clone(),
                    line: 0,
                });
            }
            Ok(entries)
        }
    })
    .await?;
    let changes = changes(old, &entries);
    if changes.is_empty() && (config.lock.is_some() || entries.is_empty()) {
        if entries.is_empty() {
            outln!(
                "`{}` loads nothing from a registry: nothing to lock",
                args.config.display()
            );
        } else {
            outln!(
                "`{}` is up to date ({} component(s))",
                path.display(),
                entries.len()
            );
        }
        return Ok(EXIT_OK);
    }
    if args.locked {
        bail!(
            "the lock file `{}` would change (--locked): {}",
            path.display(),
            changes.join("; ")
        );
    }
    let lock = Lock::write(&path, &entries)?;
    outln!("wrote `{}`:", path.display());
    for entry in &lock.entries {
        let signer = match &entry.signer {
            Some(s) => format!("signed by `{}` ({})", s.name, s.fingerprint),
            None => "unsigned (verify = false)".into(),
        };
        outln!(
            "  {}  {}  {} ({} bytes), {signer}",
            entry.id,
            entry.reference,
            entry.digest,
            entry.size
        );
    }
    Ok(EXIT_OK)
}

/// How the digests `config`'s entries name now (a tag's, asked of its registry) differ from
/// the lock `old`, one line per entry, worded as [`changes`] words them; the size and signer,
/// known only once a digest is pulled, are left to it.
async fn moved(
    host: &seam_host::Host,
    config: &seam_host::Config,
    old: &[LockEntry],
) -> Result<Vec<String>> {
    let mut moved = Vec::new();
    for (entry, source) in config.oci_entries() {
        let digest = host
            .oci()
            .current_digest(source)
            .await
            .with_context(super::plugin(&entry.id))?;
        match old.iter().find(|o| o.id == entry.id) {
            None => moved.push(format!("plugin `{}` would be locked at {digest}", entry.id)),
            Some(o) if o.digest != digest => moved.push(format!(
                "plugin `{}`: {} locks {}, the registry now has {digest}",
                entry.id,
                o.place(),
                o.digest
            )),
            Some(o) if o.reference != source.reference.to_string() => moved.push(format!(
                "plugin `{}`: {} would change (reference, size or signer)",
                entry.id,
                o.place()
            )),
            Some(_) => {}
        }
    }
    for o in old {
        if !config.oci_entries().any(|(e, _)| e.id == o.id) {
            moved.push(format!(
                "{} locks plugin `{}`, which the config does not load from a registry",
                o.place(),
                o.id
            ));
        }
    }
    Ok(moved)
}

/// What writing `new` over `old` changes, one line per entry.
fn changes(old: &[LockEntry], new: &[LockEntry]) -> Vec<String> {
    let mut changes = Vec::new();
    for entry in new {
        match old.iter().find(|o| o.id == entry.id) {
            None => changes.push(format!(
                "plugin `{}` would be locked at {}",
                entry.id, entry.digest
            )),
            Some(o) if !o.same_lock(entry) => changes.push(if o.digest != entry.digest {
                format!(
                    "plugin `{}`: {} locks {}, the registry now has {}",
                    entry.id,
                    o.place(),
                    o.digest,
                    entry.digest
                )
            } else {
                format!(
                    "plugin `{}`: {} would change (reference, size or signer)",
                    entry.id,
                    o.place()
                )
            }),
            Some(_) => {}
        }
    }
    for o in old {
        if !new.iter().any(|e| e.id == o.id) {
            changes.push(format!(
                "{} locks plugin `{}`, which the config does not load from a registry",
                o.place(),
                o.id
            ));
        }
    }
    changes
}
