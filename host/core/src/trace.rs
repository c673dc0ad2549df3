//! Where traces hook in: the spans the lifecycle events cannot draw (a model call), and the
//! W3C `traceparent` each outbound request carries, so that the work an ACP agent, an MCP
//! server, a model endpoint or a cluster worker does joins the run's trace.
//!
//! The core knows no exporter: an embedder (the CLI, with OpenTelemetry) installs a
//! [`Tracer`] once per process; without one, every hook is a no-op that costs a load.

use std::future::Future;
use std::sync::{Arc, OnceLock};

use crate::types::Usage;

/// What a `traceparent` is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// A run (`run`), started by the agent `parent`: what its provider sends on its behalf.
    Run {
        /// The run id.
        run: &'a str,
        /// The calling agent's id.
        parent: &'a str,
    },
    /// A tool call of an agent: what the tool sends on the call's behalf.
    ToolCall {
        /// The agent id.
        agent: &'a str,
        /// The call id.
        call: &'a str,
    },
    /// An agent: what it is doing now (its latest open tool call, else its turn).
    Agent(&'a str),
}

/// A span begun through a hook, ended by its owner.
pub trait OpenSpan: Send {
    /// Its W3C `traceparent`, for the request made within it.
    fn traceparent(&self) -> Option<String>;
    /// Ends it: `error` marks it failed.
    fn end(self: Box<Self>, usage: Option<&Usage>, error: Option<&str>);
}

/// What an embedder installs.
pub trait Tracer: Send + Sync + 'static {
    /// The `traceparent` of `scope`, if it is traced.
    fn traceparent(&self, scope: Scope<'_>) -> Option<String>;
    /// Begins a `model.call` span of agent `agent` calling `model`.
    fn model_call(&self, agent: &str, model: &str) -> Box<dyn OpenSpan>;
    /// A run was made (before its provider starts it).
    fn run_begun(&self, run: &RunBegun<'_>);
}

/// A run as it is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunBegun<'a> {
    /// The run id.
    pub run: &'a str,
    /// The calling agent's id.
    pub parent: &'a str,
    /// The provider.
    pub provider: &'a str,
    /// The plugin that registered the provider.
    pub plugin: &'a str,
    /// What it is made under.
    pub under: Under<'a>,
}

/// What a run is made under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Under<'a> {
    /// The calling agent's tool call with this id.
    Call(&'a str),
    /// A span of another process, by its `traceparent` (a cluster worker's run, under the
    /// front-end's).
    Remote(&'a str),
    /// Not known: whatever the calling agent is doing.
    Unknown,
}

std::thread_local! {
    /// The remote span the runs made on this thread are under, while [`under_remote`] runs.
    static REMOTE: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Runs `make` (which makes a run, synchronously) with the runs it makes placed under the
/// remote span `traceparent`: how a cluster worker continues a front-end's trace.
pub fn under_remote<T>(traceparent: Option<&str>, make: impl FnOnce() -> T) -> T {
    let Some(traceparent) = traceparent.filter(|_| enabled()) else {
        return make();
    };
    let before = REMOTE.with(|r| r.replace(Some(traceparent.to_string())));
    let made = make();
    REMOTE.with(|r| *r.borrow_mut() = before);
    made
}

tokio::task_local! {
    /// The tool call a future runs for: (agent id, call id).
    static CALL: (String, String);
    /// The run a provider's future runs: (run id, calling agent id).
    static RUN: (String, String);
}

/// Runs `future` as the provider's work for run `run` of agent `parent`: what it sends (a
/// component's `wasi:http` request) carries the run's trace.
pub async fn in_run<F: Future>(run: &str, parent: &str, future: F) -> F::Output {
    if !enabled() {
        return future.await;
    }
    // A run's first poll happens inside `start`, on the caller's task: the caller's tool call
    // is hidden from it (an empty agent id is no call), so that what it sends carries the run.
    let no_call = (String::new(), String::new());
    CALL.scope(
        no_call,
        RUN.scope((run.to_string(), parent.to_string()), future),
    )
    .await
}

/// The `traceparent` of whatever the current future works for: the tool call it runs within
/// (a tool's request, or a child agent's call inside a provider), else the run it is the
/// provider's work for.
pub fn current() -> Option<String> {
    let tracer = TRACER.get()?;
    if let Ok(Some(found)) = CALL.try_with(|(agent, call)| {
        (!agent.is_empty()).then(|| tracer.traceparent(Scope::ToolCall { agent, call }))
    }) {
        return found;
    }
    RUN.try_with(|(run, parent)| tracer.traceparent(Scope::Run { run, parent }))
        .ok()
        .flatten()
}

/// Runs `future` as the work of agent `agent`'s tool call `call`: a run it starts is placed
/// under that call, even among calls that run at once.
pub async fn in_call<F: Future>(agent: &str, call: &str, future: F) -> F::Output {
    // Scoped traced or not: a recording keys the runs a call starts by it.
    CALL.scope((agent.to_string(), call.to_string()), future)
        .await
}

/// The id of the tool call of agent `agent` the current future runs for, if it runs for one.
pub fn current_call(agent: &str) -> Option<String> {
    CALL.try_with(|(a, call)| (a == agent).then(|| call.clone()))
        .ok()
        .flatten()
}

/// Run `run` on `provider` (of `plugin`) was made by agent `parent` (see
/// [`Tracer::run_begun`]).
pub fn run_begun(run: &str, parent: &str, provider: &str, plugin: &str) {
    let Some(tracer) = TRACER.get() else {
        return;
    };
    let remote = REMOTE.with(|r| r.borrow().clone());
    let call = CALL
        .try_with(|(agent, call)| (agent == parent).then(|| call.clone()))
        .ok()
        .flatten();
    let under = match (&remote, &call) {
        (Some(remote), _) => Under::Remote(remote),
        (None, Some(call)) => Under::Call(call),
        (None, None) => Under::Unknown,
    };
    tracer.run_begun(&RunBegun {
        run,
        parent,
        provider,
        plugin,
        under,
    });
}

static TRACER: OnceLock<Arc<dyn Tracer>> = OnceLock::new();

/// Installs the process's tracer; returns false if one was installed already.
pub fn install(tracer: Arc<dyn Tracer>) -> bool {
    TRACER.set(tracer).is_ok()
}

/// Whether a tracer is installed.
pub fn enabled() -> bool {
    TRACER.get().is_some()
}

/// The `traceparent` of `scope`, if a tracer is installed and traces it.
pub fn traceparent(scope: Scope<'_>) -> Option<String> {
    TRACER.get()?.traceparent(scope)
}

/// Begins a `model.call` span, if a tracer is installed.
pub fn model_call(agent: &str, model: &str) -> Option<Box<dyn OpenSpan>> {
    Some(TRACER.get()?.model_call(agent, model))
}
