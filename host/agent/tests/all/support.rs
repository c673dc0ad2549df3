//! What the tests share: a core wired as the host wires it, fake providers and tools written in
//! Rust, and an event log a test can wait on.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use seam_agent::agent::{AgentRegistry, AgentSpec, RunChild, RunSessionSeed};
use seam_agent::model::{ModelRegistry, ModelsConfig, Script, ScriptStep};
use seam_core::subagent::{Provider, RunContext, RunFailure, SubagentService};
use seam_core::tool::{DescribeError, Tool, ToolBinding, ToolRegistry, ToolSource};
use seam_core::{
    Capabilities, ContentBlock, Event, EventBus, LiveCounts, ParentRef, ProviderDescriptor,
    RuntimeFeatures, StartRequest, StopReason, SubagentResult, ToolDescriptor, ToolResult,
};
use serde_json::json;
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

/// A guard against a hang: every wait of a test ends by this, as a failure.
pub const BARRIER: Duration = Duration::from_secs(30);

/// Awaits `f`, failing the test (naming `what`) if it takes longer than [`BARRIER`].
pub async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(BARRIER, f)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// The core's parts, wired as the host wires them.
pub struct Core {
    pub events: Arc<EventBus>,
    pub live: Arc<LiveCounts>,
    pub subagents: Arc<SubagentService>,
    pub tools: Arc<ToolRegistry>,
    pub models: Arc<ModelRegistry>,
    pub agents: Arc<AgentRegistry>,
    pub log: EventLog,
}

impl Core {
    /// A core whose cancelled runs get `grace` to wind down.
    pub fn new(grace: Duration) -> Self {
        Self::with_store(grace, Arc::new(seam_core::store::MemoryStore::default()))
    }

    /// [`Core::new`], keeping sessions in `store`.
    pub fn with_store(grace: Duration, store: Arc<dyn seam_core::store::SessionStore>) -> Self {
        let events = Arc::new(EventBus::with_store(store));
        let live = Arc::new(LiveCounts::default());
        let subagents = Arc::new(SubagentService::new(events.clone(), live.clone(), grace));
        let tools = Arc::new(ToolRegistry::new(events.clone(), subagents.clone()));
        let models = Arc::new(ModelRegistry::default());
        let agents = Arc::new(AgentRegistry::new(
            events.clone(),
            models.clone(),
            tools.clone(),
        ));
        agents.attach_subagents(&subagents);
        let log = EventLog::attach(&events);
        Self {
            events,
            live,
            subagents,
            tools,
            models,
            agents,
            log,
        }
    }

    /// Registers `provider` under `name` with `caps`.
    pub fn register(&self, name: &str, caps: Capabilities, provider: Arc<dyn Provider>) {
        self.subagents
            .register("test-plugin", descriptor(name, caps), provider)
            .expect("registers");
    }

    /// Configures scripts for the scripted model: `(name, steps)`.
    pub fn scripts(&self, scripts: &[(&str, Vec<ScriptStep>)]) {
        let mut config = ModelsConfig::default();
        for (name, steps) in scripts {
            config.scripts.insert(
                name.to_string(),
                Script {
                    steps: steps.clone(),
                    prices: None,
                },
            );
        }
        self.models.configure(config);
    }
}

/// A descriptor with no runtime features.
pub fn descriptor(name: &str, capabilities: Capabilities) -> ProviderDescriptor {
    ProviderDescriptor {
        name: name.to_string(),
        capabilities,
        features: RuntimeFeatures::default(),
        inherits_parent_context: false,
    }
}

/// Every start-time capability.
pub fn all_caps() -> Capabilities {
    Capabilities {
        output_schema: true,
        depth_limit: true,
        tool_filter: true,
        persona: true,
    }
}

/// A request from a top-level caller.
pub fn request(prompt: &str) -> StartRequest {
    StartRequest::new(prompt, ParentRef::top_level("caller", "/work"))
}

/// A scripted step that says `text`.
pub fn say(text: &str) -> ScriptStep {
    ScriptStep {
        text: Some(text.into()),
        ..ScriptStep::default()
    }
}

/// A scripted step that calls `tool` with `arguments`.
pub fn call(tool: &str, arguments: serde_json::Value) -> ScriptStep {
    ScriptStep {
        tool_calls: vec![seam_agent::model::config::ScriptToolCall {
            name: tool.into(),
            arguments,
        }],
        ..ScriptStep::default()
    }
}

/// A scripted step that captures `value` as the structured answer.
pub fn capture(value: serde_json::Value) -> ScriptStep {
    ScriptStep {
        structured: Some(value),
        ..ScriptStep::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Events

/// Every event emitted, in order, with a channel to wait on.
#[derive(Clone)]
pub struct EventLog {
    seen: Arc<Mutex<Vec<Event>>>,
    count: Arc<watch::Sender<usize>>,
}

impl EventLog {
    fn attach(bus: &EventBus) -> Self {
        let log = Self {
            seen: Arc::default(),
            count: Arc::new(watch::channel(0).0),
        };
        let l = log.clone();
        bus.subscribe(move |e| {
            l.seen.lock().unwrap().push(e);
            l.count.send_modify(|n| *n += 1);
            Ok(())
        });
        log
    }

    /// The events so far.
    pub fn all(&self) -> Vec<Event> {
        self.seen.lock().unwrap().clone()
    }

    /// Waits (at most [`BARRIER`]) until the events so far satisfy `done`.
    pub async fn wait_for(&self, what: &str, done: impl Fn(&[Event]) -> bool) {
        let mut changed = self.count.subscribe();
        within(what, async {
            loop {
                if done(&self.seen.lock().unwrap()) {
                    return;
                }
                changed.changed().await.expect("the log lives");
            }
        })
        .await
    }

    /// The names of the events about run `id`, in order.
    pub fn of_run(&self, id: &str) -> Vec<&'static str> {
        self.all()
            .iter()
            .filter(|e| match e {
                Event::SubagentStart { id: i, .. }
                | Event::SubagentEnd { id: i, .. }
                | Event::SubagentProgress { id: i, .. } => i == id,
                _ => false,
            })
            .map(Event::name)
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Providers

type Behaviour = dyn Fn(RunContext, StartRequest) -> BoxFuture<'static, Result<SubagentResult, RunFailure>>
    + Send
    + Sync;

/// What a fake provider saw: how often it was run, how many of its runs' futures are alive
/// (a future is the run's "child": dropping it is what disposing must do), and the requests.
#[derive(Default)]
pub struct Probe {
    pub calls: AtomicUsize,
    alive: AtomicUsize,
    pub requests: Mutex<Vec<StartRequest>>,
    /// Notified each time a run's future is dropped.
    pub dropped: Notify,
}

impl Probe {
    /// Futures of this provider's runs that are still alive.
    pub fn alive(&self) -> usize {
        self.alive.load(Ordering::SeqCst)
    }
}

struct Alive(Arc<Probe>);

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.alive.fetch_sub(1, Ordering::SeqCst);
        self.0.dropped.notify_waiters();
    }
}

/// A provider whose runs do what a closure says.
pub struct Fake {
    behave: Box<Behaviour>,
    pub probe: Arc<Probe>,
}

impl Fake {
    /// A provider running `behave` for each run.
    pub fn new<F, Fut>(behave: F) -> Arc<Self>
    where
        F: Fn(RunContext, StartRequest) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<SubagentResult, RunFailure>> + Send + 'static,
    {
        Arc::new(Self {
            behave: Box::new(move |ctx, req| Box::pin(behave(ctx, req))),
            probe: Arc::default(),
        })
    }

    /// Ready at once, then answers `text`.
    pub fn answering(text: &'static str) -> Arc<Self> {
        Self::new(move |ctx, _| async move {
            ctx.ready();
            Ok(SubagentResult::text(StopReason::Completed, text))
        })
    }

    /// Ready at once, then waits for the cancel, and says so.
    pub fn until_cancelled() -> Arc<Self> {
        Self::new(|ctx, _| async move {
            ctx.ready();
            ctx.cancelled().await;
            Ok(SubagentResult::text(
                StopReason::Aborted,
                "stopped as asked",
            ))
        })
    }
}

impl Provider for Fake {
    fn run(
        &self,
        ctx: RunContext,
        request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentResult, RunFailure>> {
        self.probe.calls.fetch_add(1, Ordering::SeqCst);
        self.probe.alive.fetch_add(1, Ordering::SeqCst);
        self.probe.requests.lock().unwrap().push(request.clone());
        let alive = Alive(self.probe.clone());
        let run = (self.behave)(ctx, request);
        Box::pin(async move {
            let _alive = alive;
            run.await
        })
    }
}

/// An in-process provider like the host's `spawn`: each run's child is an agent on the core's
/// agent runtime, with the request's options, running one turn on the prompt. A resumed run's
/// child continues the session of the child it resumes.
pub struct Spawn {
    pub agents: Arc<AgentRegistry>,
    pub model: String,
}

impl Provider for Spawn {
    fn run(
        &self,
        ctx: RunContext,
        request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentResult, RunFailure>> {
        let agents = self.agents.clone();
        let model = request
            .agent_options
            .as_ref()
            .and_then(|o| o.model.clone())
            .unwrap_or_else(|| self.model.clone());
        Box::pin(async move {
            let mut spec = AgentSpec::top_level(model, request.parent.working_directory.clone());
            spec.id = Some(ctx.id().to_string());
            spec.depth = request.parent.depth + 1;
            spec.parent = Some(request.parent.id.clone());
            spec.output_schema = request.output_schema.clone();
            spec.tool_filter = request.tool_filter.clone();
            spec.persona = request.persona.clone();
            spec.parent_session = Some(request.parent.session_id.clone());
            if let Some(resumed) = ctx.resume_seed() {
                let (seed, session) = resumed
                    .start_from(agents.store().as_ref())
                    .map_err(|e| RunFailure::Refused(e.to_string()))?;
                spec.seed = seed;
                spec.session_id = session;
            }
            let agent = agents
                .create(spec, Some(ctx.token()))
                .map_err(|e| RunFailure::Refused(e.to_string()))?;
            let child = RunChild::new(agent.clone(), agents, ctx.clone());
            ctx.ready();
            let outcome = agent.run_turn(request.prompt).await;
            drop(child);
            Ok(SubagentResult {
                output: outcome.output,
                structured: outcome.structured,
                stop_reason: outcome.stop_reason,
                diagnostic: outcome.diagnostic,
            })
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Tools

/// A tool plugin that answers `NAME: ARGUMENTS`, bound to `follows` (if any).
pub struct Echo {
    pub plugin: String,
    pub name: String,
    pub calls: AtomicUsize,
}

impl Echo {
    pub fn new(plugin: &str, name: &str) -> Arc<Self> {
        Arc::new(Self {
            plugin: plugin.into(),
            name: name.into(),
            calls: AtomicUsize::new(0),
        })
    }

    /// Its binding: mounted as `name`, following `provider`.
    pub fn binding(&self, provider: Option<&str>) -> ToolBinding {
        ToolBinding {
            tool_name: self.name.clone(),
            provider: provider.map(str::to_string),
            approve: Default::default(),
        }
    }
}

impl Tool for Echo {
    fn execute(
        &self,
        _caller: ParentRef,
        arguments: String,
        _abort: CancellationToken,
    ) -> BoxFuture<'static, ToolResult> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let name = self.name.clone();
        Box::pin(async move {
            ToolResult {
                content: vec![ContentBlock::text(format!("{name}: {arguments}"))],
                is_error: false,
            }
        })
    }
}

impl ToolSource for Echo {
    fn plugin(&self) -> &str {
        &self.plugin
    }

    fn describe(
        &self,
        provider: Option<Arc<ProviderDescriptor>>,
    ) -> BoxFuture<'static, Result<ToolDescriptor, DescribeError>> {
        let name = self.name.clone();
        Box::pin(async move {
            Ok(ToolDescriptor {
                name,
                description: match provider {
                    Some(p) => format!("runs on `{}`", p.name),
                    None => "echoes".into(),
                },
                parameters: json!({"type": "object"}),
            })
        })
    }
}

/// A tool that holds every call until the test opens it, and tells the test a call arrived.
pub struct Gate {
    pub open: Notify,
    pub entered: Notify,
}

impl Gate {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            open: Notify::new(),
            entered: Notify::new(),
        })
    }
}

/// The shared gate, as a tool (`Arc<Gate>` is what the registry holds).
pub struct GateTool(pub Arc<Gate>);

impl Tool for GateTool {
    fn execute(
        &self,
        _caller: ParentRef,
        _arguments: String,
        abort: CancellationToken,
    ) -> BoxFuture<'static, ToolResult> {
        let gate = self.0.clone();
        Box::pin(async move {
            let opened = gate.open.notified();
            gate.entered.notify_one();
            tokio::select! {
                _ = opened => ToolResult {
                    content: vec![ContentBlock::text("opened")],
                    is_error: false,
                },
                _ = abort.cancelled() => ToolResult::error("aborted"),
            }
        })
    }
}

impl ToolSource for GateTool {
    fn plugin(&self) -> &str {
        "gate-plugin"
    }

    fn describe(
        &self,
        _provider: Option<Arc<ProviderDescriptor>>,
    ) -> BoxFuture<'static, Result<ToolDescriptor, DescribeError>> {
        Box::pin(async {
            Ok(ToolDescriptor {
                name: "gate".into(),
                description: "waits until the test opens it".into(),
                parameters: json!({"type": "object"}),
            })
        })
    }
}
