//! `seam check CONFIG [--json]`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use seam_host::entries::Summary;
use seam_host::kinds::Declared;
use seam_host::{Host, PluginInfo, PluginState};
use serde_json::json;

use super::{interruptible, read_config, with_host, EXIT_ERROR, EXIT_OK};
use tokio_util::sync::CancellationToken;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The config file (TOML).
    config: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Fail if the config's lock file would change: an `oci://` entry without a lock line, a
    /// stale line, or a locked tag that now names another digest.
    #[arg(long)]
    locked: bool,
}

/// A mounted tool, as `check` reports it.
struct ToolLine {
    name: String,
    plugin: String,
    description: String,
    parameters: serde_json::Value,
}

pub(crate) async fn run(args: Args, interrupt: &CancellationToken) -> Result<u8> {
    let config = read_config(&args.config)?;
    if args.locked {
        crate::oci::ensure_locked(&config, &args.config)?;
    }
    let path = args.config.clone();
    let (problems, stale, notes) = with_host(|host| async move {
        interruptible(host.load(&config), interrupt).await?;
        let (stale, notes) = crate::oci::staleness_online(&host, &config).await;
        let mut problems = report(&host, &path, args.json, Some(&stale)).await?;
        problems.extend(crate::oci::grammar_problems(&config));
        if args.locked && !stale.is_empty() {
            problems.push(format!(
                "the lock file would change (--locked): {}",
                crate::oci::list(&stale)
            ));
        }
        Ok((problems, stale, notes))
    })
    .await?;
    for note in &notes {
        errln!("note: {note}");
    }
    if !stale.is_empty() && !args.locked {
        errln!(
            "warning: the lock file `{}` is stale: {}; run `seam lock {}`",
            seam_host::oci::lock_path(&args.config).display(),
            crate::oci::list(&stale),
            args.config.display()
        );
    }
    if problems.is_empty() {
        return Ok(EXIT_OK);
    }
    for problem in &problems {
        errln!("error: {problem}");
    }
    let n = problems.len();
    errln!(
        "error: `{}` has {n} problem{}",
        args.config.display(),
        if n == 1 { "" } else { "s" }
    );
    Ok(EXIT_ERROR)
}

/// Prints the report of `host`, which has `config` loaded, and returns its problems.
pub(crate) async fn report(
    host: &Host,
    config: &Path,
    json: bool,
    stale: Option<&[seam_host::oci::Staleness]>,
) -> Result<Vec<String>> {
    let plugins = host.plugins().await;
    let tools = mounted_tools(host);
    let problems = problems(host, &plugins).await;
    if json {
        let doc = json!({
            "config": config,
            "ok": problems.is_empty(),
            "lock_stale": stale.map(|s| s.iter().map(ToString::to_string).collect::<Vec<_>>()),
            "plugins": plugins.iter().map(plugin_json).collect::<Vec<_>>(),
            "tools": tools.iter().map(|t| json!({
                "name": t.name,
                "plugin": t.plugin,
                "description": t.description,
                "parameters": t.parameters,
            })).collect::<Vec<_>>(),
            "errors": problems,
        });
        let text = serde_json::to_string_pretty(&doc).context("cannot serialise the report")?;
        outln!("{text}");
    } else {
        print_human(config, &plugins, &tools);
    }
    Ok(problems)
}

/// Plugins that failed, then tools left waiting for a provider, in config order.
async fn problems(host: &Host, plugins: &[PluginInfo]) -> Vec<String> {
    let mut problems: Vec<String> = plugins
        .iter()
        .filter_map(|p| match (&p.state, &p.stale) {
            (PluginState::Failed(message), _) => Some(message.clone()),
            (_, Some(message)) => Some(format!(
                "{message} (the last good version of `{}` keeps serving)",
                p.id
            )),
            _ => None,
        })
        .collect();
    for waiting in host.tools().unmounted().await {
        let (plugin, tool) = (&waiting.plugin, &waiting.tool_name);
        problems.push(match &waiting.provider {
            Some(provider) => format!(
                "plugin `{plugin}`: tool `{tool}` waits for provider `{provider}`, which no \
                 plugin registers"
            ),
            None => format!("plugin `{plugin}`: tool `{tool}` is not mounted"),
        });
    }
    problems
}

fn mounted_tools(host: &Host) -> Vec<ToolLine> {
    host.tool_descriptors()
        .into_iter()
        .map(|d| ToolLine {
            plugin: host
                .tools()
                .get(&d.name)
                .map(|m| m.plugin)
                .unwrap_or_default(),
            name: d.name,
            description: d.description,
            parameters: d.parameters,
        })
        .collect()
}

fn state_name(state: &PluginState) -> &'static str {
    match state {
        PluginState::Pending => "pending",
        PluginState::Active => "active",
        PluginState::Failed(_) => "failed",
        PluginState::Disabled => "disabled",
        PluginState::Disposed => "disposed",
    }
}

fn plugin_json(p: &PluginInfo) -> serde_json::Value {
    let error = match &p.state {
        PluginState::Failed(message) => Some(message.as_str()),
        _ => None,
    };
    json!({
        "id": p.id,
        "component": p.component,
        "kind": p.kind,
        "version": p.version,
        "state": state_name(&p.state),
        "error": error,
        "name": p.name,
        "follows": p.follows,
        "stale": p.stale,
        "command": p.command,
        "grants": p.grants,
        "entry": p.entry,
        "limits": if host_memory_only(p) {
            p.limits
                .as_ref()
                .map(|l| json!({"host_memory_mb": l.host_memory_bytes >> 20}))
        } else {
            p.limits.as_ref().map(|l| json!(l))
        },
        "pulled": p.pulled,
        "compiler": p.compiler,
    })
}

/// What a plugin registered or mounts, in a few words.
fn what(p: &PluginInfo, tools: &[ToolLine]) -> String {
    if matches!(p.state, PluginState::Failed(_)) {
        return "(see the error below)".into();
    }
    let stale = if p.stale.is_some() {
        " (last good version; see the error below)"
    } else {
        ""
    };
    // An entry that is not a component is worded by its kind.
    if let Some(backend) = p.entry.backend() {
        return backend.what(&Summary {
            active: p.state == PluginState::Active,
            name: p.name.as_deref(),
            command: p.command.as_deref(),
            written: &p.component,
            tools_mounted: tools.iter().filter(|t| t.plugin == p.id).count(),
            stale,
            about: p.about.as_deref(),
        });
    }
    let Some(kind) = p.kind else {
        return String::new();
    };
    let unmounted = match &p.name {
        Some(name) if !tools.iter().any(|t| t.name == *name && t.plugin == p.id) => {
            " (not mounted)"
        }
        _ => "",
    };
    seam_host::kinds::what(
        kind,
        &Declared {
            name: p.name.as_deref(),
            follows: p.follows.as_deref(),
            unmounted,
            stale,
        },
    )
}

/// Whether, of a component's limits, only the host-memory budget applies to the plugin's
/// entry (an MCP server's).
fn host_memory_only(p: &PluginInfo) -> bool {
    p.entry.backend().is_some_and(|b| b.host_memory_only())
}

fn print_human(config: &std::path::Path, plugins: &[PluginInfo], tools: &[ToolLine]) {
    outln!("config {}: {} plugin(s)", config.display(), plugins.len());
    let rows: Vec<[String; 4]> = plugins
        .iter()
        .map(|p| {
            [
                p.id.clone(),
                match (p.kind, p.version) {
                    (Some(kind), Some(version)) => format!("{kind} {version}"),
                    (Some(kind), None) => kind.to_string(),
                    (None, _) => "-".into(),
                },
                state_name(&p.state).to_string(),
                what(p, tools),
            ]
        })
        .collect();
    let width = |i: usize| rows.iter().map(|r| r[i].len()).max().unwrap_or(0);
    let (w0, w1, w2) = (width(0), width(1), width(2));
    for (p, [id, kind, state, what]) in plugins.iter().zip(&rows) {
        let line = format!("  {id:<w0$}  {kind:<w1$}  {state:<w2$}  {what}");
        outln!("{}", line.trim_end());
        // What the sandbox lets it do, once the grants were checked against this host.
        if let Some(pulled) = &p.pulled {
            let signer = match &pulled.signer {
                Some((name, fingerprint)) => format!("signed by `{name}` ({fingerprint})"),
                None => "not signature-checked (verify = false)".into(),
            };
            outln!(
                "      pulled: {} ({} bytes), {signer}",
                pulled.digest,
                pulled.size
            );
        }
        if let Some(grants) = &p.grants {
            outln!("      grants: {}", grants.summary());
        }
        if let Some(runs) = p.shared_runs {
            outln!("      shared: one instance serves up to {runs} runs at once (share_instance)");
        }
        if let Some(limits) = &p.limits {
            if host_memory_only(p) {
                outln!(
                    "      limits: host_memory_mb = {} (a component's other limits do not apply)",
                    limits.host_memory_bytes >> 20
                );
            } else {
                outln!("      limits: {}", limits.summary());
            }
        }
    }
    outln!("mounted tools: {}", tools.len());
    let w = tools.iter().map(|t| t.name.len()).max().unwrap_or(0);
    for t in tools {
        let params = t.parameters["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect::<Vec<_>>().join(", "))
            .unwrap_or_default();
        outln!(
            "  {:<w$}  (plugin `{}`, arguments {{{params}}}): {}",
            t.name,
            t.plugin,
            first_sentence(&t.description)
        );
    }
}

fn first_sentence(text: &str) -> &str {
    match text.find(". ") {
        Some(end) => &text[..=end],
        None => text,
    }
}
