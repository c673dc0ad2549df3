//! `seam test COMPONENT [--config JSON] [--json]`: a conformance check for plugin authors.
//!
//! A provider is loaded, described, run once, cancelled mid-run, run again in a fresh instance,
//! and checked for quiescence. A tool is loaded against a stand-in provider (a native echo
//! registered under the name the tool binds to), described, and called once. Each check is one
//! line of a checklist; any failure makes the command exit 1.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures::future::BoxFuture;
use seam_host::subagent::Aborted;
use seam_host::{
    Capabilities, Config, Host, ParentRef, PluginKind, PluginState, Provider, ProviderDescriptor,
    RunContext, RunFailure, RuntimeFeatures, StartRequest, StopReason, SubagentResult,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{interruptible, with_host, working_directory, EXIT_ERROR, EXIT_OK};

/// How long one run may take before the check calls it stuck.
const RUN_WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The `.wasm` component.
    component: PathBuf,
    /// The plugin config, as a JSON object (default `{}`).
    #[arg(long, value_name = "JSON")]
    config: Option<String>,
    /// Print the checklist as JSON.
    #[arg(long)]
    json: bool,
    /// Also replay this cassette (`seam run --record FILE`) with no key and no network: a check
    /// that passes when the replay matches the recording.
    #[arg(long, value_name = "FILE")]
    replay: Option<PathBuf>,
}

/// One line of the checklist.
struct Check {
    name: &'static str,
    outcome: Outcome,
    detail: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Pass,
    Fail,
    /// Not applicable to this component (said why in the detail).
    Skip,
}

impl Outcome {
    fn mark(self) -> &'static str {
        match self {
            Outcome::Pass => "ok",
            Outcome::Fail => "FAIL",
            Outcome::Skip => "skip",
        }
    }
}

#[derive(Default)]
struct Checklist(Vec<Check>);

impl Checklist {
    fn add(&mut self, name: &'static str, outcome: Outcome, detail: impl Into<String>) {
        self.0.push(Check {
            name,
            outcome,
            detail: detail.into(),
        });
    }

    fn pass(&mut self, name: &'static str, detail: impl Into<String>) {
        self.add(name, Outcome::Pass, detail);
    }

    fn fail(&mut self, name: &'static str, detail: impl Into<String>) {
        self.add(name, Outcome::Fail, detail);
    }

    fn failed(&self) -> bool {
        self.0.iter().any(|c| c.outcome == Outcome::Fail)
    }
}

pub(crate) async fn run(args: Args, interrupt: &CancellationToken) -> Result<u8> {
    let config = match &args.config {
        None => json!({}),
        Some(text) => {
            let value: serde_json::Value =
                serde_json::from_str(text).context("`--config` is not valid JSON")?;
            if !value.is_object() {
                bail!("`--config` must be a JSON object");
            }
            value
        }
    };
    let component = std::fs::canonicalize(&args.component)
        .with_context(|| format!("cannot read `{}`", args.component.display()))?;
    let cwd = working_directory()?;
    let mut list = with_host(|host| async move {
        let mut list = Checklist::default();
        interruptible(check(&host, &component, config, &cwd, &mut list), interrupt).await?;
        Ok(list)
    })
    .await?;
    if let Some(cassette) = &args.replay {
        match super::replay::replay_cassette(cassette, interrupt.clone()).await {
            Ok((true, words)) => list.pass("replay", words),
            Ok((false, words)) => list.fail("replay", words),
            Err(e) => list.fail(
                "replay",
                format!("{}: {}", cassette.display(), super::chain(&e)),
            ),
        }
    }

    if args.json {
        let doc = json!({
            "component": args.component,
            "ok": !list.failed(),
            "checks": list.0.iter().map(|c| json!({
                "check": c.name,
                "outcome": c.outcome.mark(),
                "detail": c.detail,
            })).collect::<Vec<_>>(),
        });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        for c in &list.0 {
            outln!("[{:>4}] {}: {}", c.outcome.mark(), c.name, c.detail);
        }
        outln!(
            "{}",
            if list.failed() {
                "FAILED"
            } else {
                "all checks passed"
            }
        );
    }
    Ok(if list.failed() { EXIT_ERROR } else { EXIT_OK })
}

/// The config of the one entry under test.
fn entry_config(component: &Path, config: &serde_json::Value) -> Result<Config, String> {
    let text = format!(
        "[[plugin]]\nid = \"under-test\"\ncomponent = {}\nconfig = {}\n",
        toml_string(&component.to_string_lossy()),
        json_to_inline_toml(config)?
    );
    Config::parse(&text, Path::new("seam-test.toml"), Path::new("/"))
        .map_err(|e| format!("cannot build the test config: {e}"))
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// A JSON object as a TOML inline table (the config reaches the component as JSON again).
fn json_to_inline_toml(value: &serde_json::Value) -> Result<String, String> {
    let value: toml::Value = serde_json::from_value(value.clone())
        .map_err(|e| format!("the config cannot be written as TOML: {e}"))?;
    Ok(value.to_string())
}

async fn check(
    host: &Host,
    component: &Path,
    config: serde_json::Value,
    cwd: &str,
    list: &mut Checklist,
) {
    let config = match entry_config(component, &config) {
        Ok(c) => c,
        Err(e) => return list.fail("load", e),
    };
    let started = Instant::now();
    let report = host.load(&config).await;
    let plugins = host.plugins().await;
    let Some(info) = plugins.first() else {
        return list.fail("load", "the entry was not loaded");
    };
    if let Some(failure) = report.failed.first() {
        return list.fail("load", failure.to_string());
    }
    list.pass(
        "load",
        format!(
            "{} in {} ms (compile, link, describe), with no grants: {}",
            info.kind.map_or("plugin".to_string(), |k| k.to_string()),
            started.elapsed().as_millis(),
            info.grants
                .as_ref()
                .map_or("nothing granted".into(), |g| g.summary())
        ),
    );
    match info.kind {
        Some(PluginKind::Provider) => {
            let name = info.name.clone().unwrap_or_default();
            check_provider(host, &name, cwd, list).await;
        }
        Some(PluginKind::Tool) => check_tool(host, info, cwd, list).await,
        // A kind whose exports are not called here says why, and is skipped.
        Some(kind) => match seam_host::kinds::not_called(kind) {
            Some((step, why)) => list.add(step, Outcome::Skip, why),
            None => list.fail("load", format!("no conformance check calls a {kind}")),
        },
        None => list.fail("load", "the component's kind is unknown"),
    }
    host.unload_all().await;
    if host.live_runs() == 0 && host.live_instances() == 0 {
        list.pass("quiescence", "no run or instance is left after unloading");
    } else {
        list.fail(
            "quiescence",
            format!(
                "{} runs and {} instances left after unloading",
                host.live_runs(),
                host.live_instances()
            ),
        );
    }
}

fn request(cwd: &str) -> StartRequest {
    StartRequest::new("Say hello.", ParentRef::top_level("seam-test", cwd))
}

async fn check_provider(host: &Host, name: &str, cwd: &str, list: &mut Checklist) {
    match host.subagents().descriptor(name) {
        Some(d) => {
            let c = &d.capabilities;
            let declared: Vec<&str> = [
                ("output-schema", c.output_schema),
                ("depth-limit", c.depth_limit),
                ("tool-filter", c.tool_filter),
                ("persona", c.persona),
                ("steering", d.features.steering),
                ("resume", d.features.resume),
                ("inherits-parent-context", d.inherits_parent_context),
            ]
            .into_iter()
            .filter_map(|(name, on)| on.then_some(name))
            .collect();
            list.pass(
                "describe",
                format!(
                    "provider `{}`, declaring {}",
                    d.name,
                    if declared.is_empty() {
                        "nothing".to_string()
                    } else {
                        declared.join(", ")
                    }
                ),
            )
        }
        None => return list.fail("describe", format!("provider `{name}` is not registered")),
    }

    // One run.
    let t = Instant::now();
    let run = match host.subagents().start(name, request(cwd)) {
        Ok(run) => run,
        Err(e) => return list.fail("run", e.to_string()),
    };
    match tokio::time::timeout(RUN_WAIT, run.result()).await {
        Ok(Ok(r)) if r.stop_reason == StopReason::Completed => list.pass(
            "run",
            format!(
                "completed in {} ms, {} bytes of output",
                t.elapsed().as_millis(),
                r.output_text().len()
            ),
        ),
        Ok(Ok(r)) => list.fail(
            "run",
            format!(
                "ended `{}`: {}",
                r.stop_reason,
                r.diagnostic.unwrap_or_default()
            ),
        ),
        Ok(Err(e)) => list.fail("run", e.to_string()),
        Err(_) => list.fail("run", format!("no result within {} s", RUN_WAIT.as_secs())),
    }
    run.dispose().await;
    if host.live_instances() == 0 {
        list.pass("dispose", "the run's instance is gone once it is disposed");
    } else {
        list.fail("dispose", "an instance outlived its disposed run");
    }

    // A cancel right after readiness.
    let run = match host.subagents().start(name, request(cwd)) {
        Ok(run) => run,
        Err(e) => return list.fail("cancel", e.to_string()),
    };
    let _ = tokio::time::timeout(RUN_WAIT, run.started()).await;
    let t = Instant::now();
    let finished_first = run.try_result().is_some();
    run.cancel(Some("seam test".into()));
    match tokio::time::timeout(RUN_WAIT, run.result()).await {
        Ok(Ok(r)) if finished_first => list.add(
            "cancel",
            Outcome::Skip,
            format!(
                "the run had already ended `{}` when cancelled",
                r.stop_reason
            ),
        ),
        Ok(Ok(r)) if r.stop_reason == StopReason::Aborted => {
            let how = if run.aborted() == Some(Aborted::Enforced) {
                "the host enforced it after the grace: the provider ignored the cancel (wait with run-context.sleep or poll run-context.cancelled)"
            } else {
                "the provider stopped by itself"
            };
            list.pass(
                "cancel",
                format!(
                    "aborted {} ms after the cancel; {how}",
                    t.elapsed().as_millis()
                ),
            )
        }
        Ok(Ok(r)) => list.fail(
            "cancel",
            format!("ended `{}` after a cancel, not `aborted`", r.stop_reason),
        ),
        Ok(Err(e)) => list.add("cancel", Outcome::Skip, format!("the start failed: {e}")),
        Err(_) => list.fail("cancel", "no result after the cancel"),
    }
    run.dispose().await;

    // A second run, in a fresh instance.
    let run = match host.subagents().start(name, request(cwd)) {
        Ok(run) => run,
        Err(e) => return list.fail("second run", e.to_string()),
    };
    match tokio::time::timeout(RUN_WAIT, run.result()).await {
        Ok(Ok(r)) if r.stop_reason == StopReason::Completed => {
            list.pass("second run", "completed in a fresh instance")
        }
        Ok(Ok(r)) => list.fail("second run", format!("ended `{}`", r.stop_reason)),
        Ok(Err(e)) => list.fail("second run", e.to_string()),
        Err(_) => list.fail("second run", "no result"),
    }
    run.dispose().await;
}

/// The stand-in provider a tool under test binds to: answers `echo: <prompt>`.
struct Echo;

impl Provider for Echo {
    fn run(
        &self,
        ctx: RunContext,
        request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentResult, RunFailure>> {
        Box::pin(async move {
            ctx.ready();
            Ok(SubagentResult::text(
                StopReason::Completed,
                format!("echo: {}", seam_host::blocks_text(&request.prompt)),
            ))
        })
    }
}

/// Arguments for one call: every required string property of the schema says `hello`.
fn sample_arguments(schema: &serde_json::Value) -> serde_json::Value {
    let mut args = serde_json::Map::new();
    let required = schema["required"].as_array().cloned().unwrap_or_default();
    for key in required.iter().filter_map(|k| k.as_str()) {
        let value = match schema["properties"][key]["type"].as_str() {
            Some("integer") | Some("number") => json!(1),
            Some("boolean") => json!(false),
            Some("array") => json!([]),
            Some("object") => json!({}),
            _ => json!("hello"),
        };
        args.insert(key.to_string(), value);
    }
    serde_json::Value::Object(args)
}

async fn check_tool(host: &Host, info: &seam_host::PluginInfo, cwd: &str, list: &mut Checklist) {
    let tool = info.name.clone().unwrap_or_default();
    if let Some(provider) = &info.follows {
        let descriptor = ProviderDescriptor {
            name: provider.clone(),
            capabilities: Capabilities::default(),
            features: RuntimeFeatures::default(),
            inherits_parent_context: false,
        };
        if let Err(e) = host.register_provider(descriptor, Arc::new(Echo)).await {
            return list.fail("bind", format!("cannot stand in for `{provider}`: {e}"));
        }
        list.pass(
            "bind",
            format!("tool `{tool}` follows `{provider}` (a stand-in echo provider here)"),
        );
    } else {
        list.pass("bind", format!("tool `{tool}` follows no provider"));
    }
    if info.state != PluginState::Active {
        return list.fail("describe", "the tool is not active");
    }
    let Some(d) = host.tool_descriptors().into_iter().find(|d| d.name == tool) else {
        return list.fail("describe", format!("tool `{tool}` did not mount"));
    };
    list.pass(
        "describe",
        format!(
            "{} chars of description; parameters {}",
            d.description.len(),
            d.parameters
        ),
    );
    let args = sample_arguments(&d.parameters);
    let t = Instant::now();
    match host
        .call_tool(
            &tool,
            ParentRef::top_level("seam-test", cwd),
            &args.to_string(),
            CancellationToken::new(),
        )
        .await
    {
        Ok(r) if !r.is_error => list.pass(
            "call",
            format!(
                "answered in {} ms with {args}: {}",
                t.elapsed().as_millis(),
                r.text()
            ),
        ),
        Ok(r) => list.fail("call", format!("error result for {args}: {}", r.text())),
        Err(e) => list.fail("call", e.to_string()),
    }
}
