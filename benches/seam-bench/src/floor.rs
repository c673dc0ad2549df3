//! The floor of a full mock run on Seam's engine: wasmtime alone, on an engine configured
//! exactly as the host's ([`seam_host::probe::BareEngine`]), doing what a run's instance does
//! and nothing of the host around it: a fresh store, instantiate, the mock's `run` export with
//! the benchmarks' request and the entry's config, drop.
//!
//! The imports are the least that lets the mock finish its run: WASI as wasmtime-wasi links it
//! (an empty context, as `wasmtime run` gives a component it grants nothing), and typed host
//! functions for the four Seam imports the mock's `run` calls: `host.log` and
//! `run-context.ready` do nothing (the log message is not even copied out), and
//! `run-context.message-waiting` and `run-context.cancelled` return a pollable that is never
//! ready (no message comes, no cancel), which the mock drops unpolled. Every other Seam
//! function is a trap (the mock's `run` calls none with its config) and every other Seam
//! resource a type of no use.

use std::path::Path;

use seam_host::probe::BareEngine;
use seam_host::EngineOptions;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, Linker, ResourceTable, ResourceType, WasmStr};
use wasmtime::Store;
use wasmtime_wasi::p2::{subscribe, Pollable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use bindings::seam::plugin::types as wit;
use bindings::{ProviderPlugin, ProviderPluginPre};

/// Typed bindings of the provider world over the repository's WIT (the version the plugin kit's
/// SDK, and so the mock, is built for), for the `run` export and the types of its arguments;
/// the imports are linked by hand below.
#[allow(missing_docs, dead_code)]
mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit/v0.4.0",
        world: "provider-plugin",
        exports: { default: async },
        with: {
            "wasi:io/poll": wasmtime_wasi::p2::bindings::io::poll,
        },
    });
}

/// Store data: an empty WASI context and its resource table.
struct Data {
    ctx: WasiCtx,
    table: ResourceTable,
}

impl WasiView for Data {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }
}

/// The mock provider, compiled and linked on Seam's engine settings, with a run's arguments.
pub struct Floor {
    /// Keeps the engine's epoch ticker running, as a host's does.
    engine: BareEngine,
    pre: ProviderPluginPre<Data>,
    config: String,
    run_id: String,
    request: wit::StartRequest,
}

impl Floor {
    /// Compiles the component at `path` on an engine made from `options` and links it; each
    /// [`Floor::run`] passes it `config`, `run_id` and `request` (converted to the WIT types
    /// here, once, where a host converts it per run).
    pub fn new(
        options: &EngineOptions,
        path: &Path,
        config: &str,
        run_id: &str,
        request: &seam_host::StartRequest,
    ) -> Self {
        let engine = BareEngine::new(options).expect("an engine with Seam's settings");
        let component =
            Component::from_file(engine.engine(), path).expect("wasmtime compiles the guest");
        let mut linker = Linker::<Data>::new(engine.engine());
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).expect("the WASI linker");
        stub_seam_imports(&mut linker, engine.engine(), &component);
        let pre = linker
            .instantiate_pre(&component)
            .and_then(ProviderPluginPre::new)
            .expect("the guest links as a provider");
        Self {
            engine,
            pre,
            config: config.to_owned(),
            run_id: run_id.to_owned(),
            request: wit_request(request),
        }
    }

    /// One run: a fresh store, instantiate, `run`, drop. Panics unless the run completes.
    pub async fn run(&self) {
        let mut store = Store::new(
            self.engine.engine(),
            Data {
                ctx: WasiCtx::builder().build(),
                table: ResourceTable::new(),
            },
        );
        // A new store's deadline is 0 (the first epoch check would trap): yield at each tick,
        // as Seam's stores do, without their CPU accounting.
        store.set_epoch_deadline(1);
        store.epoch_deadline_async_yield_and_update(1);
        let plugin: ProviderPlugin = self
            .pre
            .instantiate_async(&mut store)
            .await
            .expect("the guest instantiates");
        let result = plugin
            .seam_plugin_provider()
            .call_run(&mut store, &self.config, &self.run_id, &self.request)
            .await
            .expect("`run` returns")
            .expect("the mock's run succeeds");
        debug_assert!(matches!(result.stop_reason, wit::StopReason::Completed));
        std::hint::black_box(result);
    }
}

/// `log` and `ready` as host functions that do nothing; every other function of a
/// `seam:plugin` interface a trap, every resource of one a type of no use.
fn stub_seam_imports(linker: &mut Linker<Data>, engine: &wasmtime::Engine, component: &Component) {
    struct Stub;
    for (name, item) in component.component_type().imports(engine) {
        let ComponentItem::ComponentInstance(instance) = item.ty else {
            continue;
        };
        let Some(interface) = name.strip_prefix("seam:plugin/") else {
            continue;
        };
        let interface = interface.split('@').next().unwrap_or(interface);
        let mut stubs = linker.instance(name).expect("a Seam interface");
        for (export, item) in instance.exports(engine) {
            let defined = match (interface, export, item.ty) {
                ("host", "log", ComponentItem::ComponentFunc(_)) => stubs
                    .func_wrap(export, |_, (_level, _message): (wit::LogLevel, WasmStr)| {
                        Ok(())
                    }),
                ("run-context", "ready", ComponentItem::ComponentFunc(_)) => {
                    stubs.func_wrap(export, |_, (): ()| Ok(()))
                }
                (
                    "run-context",
                    "message-waiting" | "cancelled",
                    ComponentItem::ComponentFunc(_),
                ) => stubs.func_wrap(export, |mut store, (): ()| {
                    let table = &mut store.data_mut().table;
                    let never = table.push(Never)?;
                    Ok((subscribe(table, never)?,))
                }),
                (_, _, ComponentItem::ComponentFunc(_)) => stubs.func_new(export, |_, _, _, _| {
                    Err(wasmtime::Error::msg(
                        "the floor links only what the mock's `run` calls",
                    ))
                }),
                // `use wasi:io/poll.{pollable}`: WASI's own resource, re-exported.
                (_, "pollable", ComponentItem::Resource(_)) => stubs.resource(
                    export,
                    ResourceType::host::<wasmtime_wasi::p2::DynPollable>(),
                    |_, _| Ok(()),
                ),
                (_, _, ComponentItem::Resource(_)) => {
                    stubs.resource(export, ResourceType::host::<Stub>(), |_, _| Ok(()))
                }
                _ => Ok(()),
            };
            defined.expect("a stub is defined");
        }
    }
}

/// A pollable that is never ready.
struct Never;

#[wasmtime_wasi::async_trait]
impl Pollable for Never {
    async fn ready(&mut self) {
        std::future::pending::<()>().await
    }
}

/// The request as the guest gets it. The benchmarks' request ([`crate::request`]) carries a
/// text prompt and a parent and no option, and only that is converted.
fn wit_request(r: &seam_host::StartRequest) -> wit::StartRequest {
    assert!(
        r.agent_options.is_none()
            && r.output_schema.is_none()
            && r.max_depth.is_none()
            && r.tool_filter.is_none()
            && r.persona.is_none(),
        "the floor passes the benchmarks' plain request"
    );
    let parent = &r.parent;
    wit::StartRequest {
        prompt: vec![wit::ContentBlock::Text(seam_host::blocks_text(&r.prompt))],
        parent: wit::ParentRef {
            id: parent.id.clone(),
            session_id: parent.session_id.clone(),
            working_directory: parent.working_directory.clone(),
            depth: parent.depth,
        },
        agent_options: None,
        output_schema: None,
        max_depth: None,
        tool_filter: None,
        persona: None,
        scope: None,
    }
}
