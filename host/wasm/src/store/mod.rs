//! The data of every plugin store, and how a store is made from a plugin's sandbox.
//!
//! A store holds a default-deny WASI context built from the plugin's grants, its resource
//! limiter, its log budget, and the context of the one host interface call it serves: a run (for
//! `run-context` and `agents`) or a tool call (for `subagents`), whose types live in `context`.

pub mod approve;
pub mod context;
mod grants;
pub mod http;
pub mod http_tape;
pub mod limiter;
pub mod output;
pub mod replay;
pub mod view;

use std::sync::Arc;

use seam_core::live::{InstanceGuard, LiveCounts};
use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::sandbox::connections::Connection;
use crate::sandbox::{DiskQuota, Limit, LimitHit, Sandbox, SocketWatch};
use context::{CallEnv, RunEnv};
use http::HttpHooks;
use limiter::PluginLimiter;
use output::{GuestOutput, LogBudget, Stdio};
use replay::StoreTape;

/// Most resources (streams, pollables, HTTP fields and requests, ...) one store may hold at
/// once: each is host memory the guest makes the host keep. A guest past it gets an error from
/// the import that would have made one more.
pub const MAX_RESOURCES: usize = 4096;
/// Most bytes of one set of HTTP header fields a guest may build (wasmtime-wasi-http's default
/// is 128 KiB); with [`MAX_RESOURCES`], what a store's headers can hold is bounded at 64 MiB.
pub const HTTP_FIELD_BYTES: usize = 16 << 10;

/// What a store serves, beyond describing or observing.
#[derive(Default)]
pub struct Serving {
    /// One provider run: `run-context` and `agents` answer from it.
    pub run: Option<RunEnv>,
    /// One tool call: `subagents` answers from it.
    pub call: Option<CallEnv>,
    /// The runs of an instance that serves several at once (`share_instance`), by run id:
    /// `runs` answers from the one a call names.
    pub shared: Option<std::collections::HashMap<String, RunEnv>>,
}

impl Serving {
    /// A store for one run.
    pub fn run(env: RunEnv) -> Self {
        Self {
            run: Some(env),
            call: None,
            shared: None,
        }
    }

    /// A store for one tool call.
    pub fn call(env: CallEnv) -> Self {
        Self {
            run: None,
            call: Some(env),
            shared: None,
        }
    }

    /// A store for the runs of a shared instance, none yet.
    pub fn shared() -> Self {
        Self {
            shared: Some(Default::default()),
            ..Self::default()
        }
    }

    /// The run named `id`, if this store serves it: its own run, or one of a shared instance's.
    pub fn run_named(&mut self, id: &str) -> Option<&mut RunEnv> {
        match &mut self.run {
            Some(env) if env.ctx.id() == id => Some(env),
            _ => self.shared.as_mut()?.get_mut(id),
        }
    }

    /// What a store of `plugin` with `granted` serving this asks with before it uses a grant:
    /// none for a store that serves no run or call (describing, observing), whose uses are the
    /// config's own.
    fn grant_approvals(
        &self,
        plugin: &Arc<str>,
        granted: &crate::sandbox::Granted,
    ) -> Option<approve::GrantApprovals> {
        let (subagents, account, session, abort) = if let Some(run) = &self.run {
            (
                &run.subagents,
                run.ctx.account().clone(),
                run.request.parent.session_id.as_str(),
                run.ctx.token(),
            )
        } else {
            let call = self.call.as_ref()?;
            let account = call.subagents.accounts().get(&call.caller.id)?;
            (
                &call.subagents,
                account,
                call.caller.session_id.as_str(),
                call.abort.clone(),
            )
        };
        Some(approve::GrantApprovals::new(
            subagents.approvals().clone(),
            &account,
            session,
            abort,
            plugin,
            granted,
        ))
    }

    /// Where this store is recorded (or played from), when what it serves is on a tape: a
    /// run's store under the run's key; a tool call's under its caller's key, the call and
    /// `.tool` (`root/call-0-1.tool`), with a count from the second store a call makes
    /// (`root/call-0-1.tool.2`).
    fn tape(&self) -> Option<(Arc<seam_core::tape::Tape>, String)> {
        if let Some(env) = &self.run {
            return env.ctx.account().tape();
        }
        let call = self.call.as_ref()?;
        let account = call.subagents.accounts().get(&call.caller.id)?;
        let id = seam_core::trace::current_call(&call.caller.id);
        let (tape, key) =
            account.child_tape(Some(&format!("{}.tool", id.as_deref().unwrap_or("-"))))?;
        let key = key.strip_suffix(".1").map(str::to_string).unwrap_or(key);
        Some((tape, key))
    }

    /// The scopes over what this store serves, nearest first: a run's own and its ancestors',
    /// or a tool call's caller's and its ancestors'. The store's grants are its plugin's
    /// narrowed by every one of them.
    pub fn scopes(&self) -> seam_core::scope::ScopeChain {
        if let Some(env) = &self.run {
            return env.ctx.account().scopes();
        }
        self.call
            .as_ref()
            .and_then(|call| call.subagents.accounts().get(&call.caller.id))
            .map(|account| account.scopes())
            .unwrap_or_default()
    }
}

/// A socket a store made, which holds one of the plugin's connections (`crate::wasi::sockets`):
/// its handle in the store's table, and the WASI version whose resource type it is (0.2's and
/// 0.3's differ).
#[derive(Debug, Clone, Copy)]
pub enum Socket {
    /// A 0.2 TCP socket.
    Tcp(u32),
    /// A 0.2 UDP socket.
    Udp(u32),
    /// A 0.3 TCP socket.
    Tcp3(u32),
    /// A 0.3 UDP socket.
    Udp3(u32),
}

/// The data of every plugin store.
pub struct StoreData {
    /// The plugin's id.
    pub plugin: Arc<str>,
    /// What the store serves (a run, a call, a delivery, a describe).
    pub serving: Serving,
    /// Shared by stdout, stderr and `host.log`.
    pub log_budget: Arc<LogBudget>,
    /// The plugin's disk quota, shared by its stores (`filesystem` counts against it).
    pub disk: Arc<DiskQuota>,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    http_hooks: HttpHooks,
    /// What the store may do with sockets, for the denial warnings of `sockets`.
    pub socket_watch: SocketWatch,
    /// The sockets it made, each holding one of the plugin's connections (`wasi::sockets`).
    pub sockets_held: Vec<(Socket, Connection)>,
    /// What asks for a yes before a grant is first used (`[approvals]`).
    pub approvals: Option<approve::GrantApprovals>,
    table: ResourceTable,
    limiter: PluginLimiter,
    /// Epoch ticks during which this store's guest code was running.
    ticks: u64,
    _live: InstanceGuard,
}

impl WasiView for StoreData {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for StoreData {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.http_hooks,
        }
    }
}

impl StoreData {
    /// The store's resource table.
    pub fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }

    /// The store's `wasi:http` hooks (the connection slot `wasi::http` takes lives there).
    pub fn http_hooks(&mut self) -> &mut HttpHooks {
        &mut self.http_hooks
    }
}

/// What one plugin's stores are made from: its id, the engine, the live counts and its sandbox.
/// Every kind keeps one and makes each store (describe, run, call, delivery) through it.
#[derive(Clone)]
pub struct Stores {
    /// The plugin's id.
    pub plugin: Arc<str>,
    /// Its limits and grants.
    pub sandbox: Sandbox,
    engine: Engine,
    live: Arc<LiveCounts>,
}

impl Stores {
    /// The stores of `plugin`, made on `engine` under `sandbox`.
    pub fn new(
        engine: &Engine,
        live: &Arc<LiveCounts>,
        plugin: Arc<str>,
        sandbox: Sandbox,
    ) -> Self {
        Self {
            plugin,
            sandbox,
            engine: engine.clone(),
            live: live.clone(),
        }
    }

    /// A fresh store serving `serving`, with the CPU budget of a call.
    pub fn make(&self, serving: Serving) -> Store<StoreData> {
        new_store(
            &self.engine,
            &self.live,
            self.plugin.clone(),
            serving,
            &self.sandbox,
            CpuBudget::Call,
        )
    }

    /// A fresh store for the runs of a shared instance (`share_instance`): its CPU budget is
    /// `cpu_ms_per_call` for every run it has been given, which `budget` counts in ticks.
    pub fn make_shared(&self, budget: Arc<std::sync::atomic::AtomicU64>) -> Store<StoreData> {
        new_store(
            &self.engine,
            &self.live,
            self.plugin.clone(),
            Serving::shared(),
            &self.sandbox,
            CpuBudget::Shared(budget),
        )
    }

    /// A fresh store for `describe` or `bind`, with their smaller CPU budget.
    pub fn make_for_describe(&self) -> Store<StoreData> {
        new_store(
            &self.engine,
            &self.live,
            self.plugin.clone(),
            Serving::default(),
            &self.sandbox,
            CpuBudget::Describe,
        )
    }
}

/// Creates a store for `plugin` with a WASI context holding only what `sandbox` grants, and its
/// limits.
///
/// Every store yields to the async executor at each epoch tick, so a guest that never calls the
/// host still lets the host cancel it (by dropping the store) and keeps other runs moving. The
/// same ticks measure the guest's CPU time: the callback only runs while guest code does, so
/// time spent blocked in a host import costs at most one tick per import call.
/// Which CPU budget a store's guest code runs under.
#[derive(Clone)]
pub enum CpuBudget {
    /// `cpu_ms_per_call`: a run, a tool call, an observer's delivery.
    Call,
    /// `cpu_ms_per_call` for each run a shared instance has been given: the ticks it may use,
    /// raised as runs arrive.
    Shared(Arc<std::sync::atomic::AtomicU64>),
    /// `describe_cpu_ms`: a `describe` or `bind` at load.
    Describe,
}

/// The epoch ticks a store's guest code may run: fixed, or a shared instance's, which grows.
enum Ticks {
    Fixed(u64),
    Shared(Arc<std::sync::atomic::AtomicU64>),
}

impl Ticks {
    fn get(&self) -> u64 {
        match self {
            Ticks::Fixed(n) => *n,
            Ticks::Shared(n) => n.load(std::sync::atomic::Ordering::Relaxed),
        }
    }
}

/// A store of `plugin` serving `serving`: its WASI context from the grants, its limiter, its
/// captured output and its epoch budget.
pub fn new_store(
    engine: &Engine,
    live: &Arc<LiveCounts>,
    plugin: Arc<str>,
    serving: Serving,
    sandbox: &Sandbox,
    cpu: CpuBudget,
) -> Store<StoreData> {
    let log_budget = LogBudget::new(plugin.clone());
    let mut builder = WasiCtxBuilder::new();
    builder
        .stdout(GuestOutput::new(Stdio::Stdout, log_budget.clone()))
        .stderr(GuestOutput::new(Stdio::Stderr, log_budget.clone()));
    // Checked at the moment of use: each call or run gets its plugin's grants narrowed by the
    // scopes over it now.
    let scopes = serving.scopes();
    let (granted, removed) = if scopes.is_empty() {
        (sandbox.granted().clone(), Default::default())
    } else {
        let (granted, removed) = sandbox.grants().narrowed(&scopes);
        (Arc::new(granted), removed)
    };
    grants::apply(&granted, &removed, &plugin, &mut builder);
    let approvals = serving.grant_approvals(&plugin, &granted);
    let taped = serving.tape().and_then(|(tape, key)| {
        if sandbox.records() {
            return Some(StoreTape::new(tape, &key));
        }
        tape.gap(format!(
            "plugin `{plugin}`: its entry says `config.record = false`, so its clock, random and \
             HTTP are live, neither recorded nor replayed"
        ));
        None
    });
    if let Some(taped) = &taped {
        taped.apply(&plugin, &mut builder);
    }
    let limits = sandbox.limits();
    let state = StoreData {
        limiter: PluginLimiter::new(plugin.clone(), limits),
        socket_watch: SocketWatch::new(&granted, &removed),
        http_hooks: HttpHooks::new(plugin.clone(), sandbox, granted, removed)
            .with_approvals(approvals.clone())
            .with_tape(taped),
        sockets_held: Vec::new(),
        approvals,
        http: {
            let mut http = WasiHttpCtx::new();
            http.set_field_size_limit(HTTP_FIELD_BYTES);
            http
        },
        plugin,
        serving,
        log_budget,
        disk: sandbox.disk().clone(),
        wasi: builder.build(),
        table: {
            let mut table = ResourceTable::new();
            table.set_max_capacity(MAX_RESOURCES);
            table
        },
        ticks: 0,
        _live: live.instance_guard(),
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    // A new store's deadline is 0: without this the first epoch check would trap.
    store.set_epoch_deadline(1);
    let (budget, limit) = match cpu {
        CpuBudget::Call => (
            Ticks::Fixed(sandbox.cpu_ticks()),
            Limit::Cpu {
                budget: limits.cpu_per_call,
            },
        ),
        CpuBudget::Shared(budget) => (
            Ticks::Shared(budget),
            Limit::Cpu {
                budget: limits.cpu_per_call,
            },
        ),
        CpuBudget::Describe => (
            Ticks::Fixed(sandbox.describe_cpu_ticks()),
            Limit::DescribeCpu {
                budget: limits.describe_cpu,
            },
        ),
    };
    store.epoch_deadline_callback(move |mut ctx| {
        let state = ctx.data_mut();
        state.ticks += 1;
        if state.ticks > budget.get() {
            let hit = LimitHit::new(&state.plugin, limit.clone());
            tracing::warn!(plugin = %state.plugin, limit = hit.limit.key(), "{hit}");
            return Err(wasmtime::Error::new(hit));
        }
        Ok(UpdateDeadline::Yield(1))
    });
    store
}
