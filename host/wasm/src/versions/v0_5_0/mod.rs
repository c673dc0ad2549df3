//! Bindings for `seam:plugin@0.5.0`, the latest version (`super::convert` converts its types to
//! and from `seam-core`'s), and how its async `provider.run` is called.

super::bindings!(
    "../../wit/v0.5.0",
    provider {
        "seam:plugin/subagents.run": seam_core::SubagentRun,
        "wasi:io/poll": wasmtime_wasi::p2::bindings::io::poll,
    },
    tool { "seam:plugin/subagents": super::provider_world::seam::plugin::subagents },
    // The host reads the stream with the store's help (`StreamReader::pipe`).
    provider_imports { "seam:plugin/runs.progress-stream": store | trappable, }
);

use seam_core::types::SubagentResult;
use wasmtime::component::Accessor;

use crate::store::StoreData;
use crate::versions::exports::{Answer, GuestError, RunCall};
use crate::versions::{convert, signals};

/// Whether one instance can serve several runs at once: `run` is async.
pub(crate) const CONCURRENT_RUN: bool = true;

/// `provider.run`'s parameters, to name a mismatch in them.
pub(crate) type RunParams<'a> = (
    String,
    String,
    provider_world::seam::plugin::types::StartRequest,
    wasmtime::component::FutureReader<Option<String>>,
    wasmtime::component::StreamReader<Vec<provider_world::seam::plugin::types::ContentBlock>>,
);

/// `provider.run` on an instance of its own run: the store runs the one call concurrently.
pub(crate) async fn call_run(
    i: &provider_world::ProviderPlugin,
    store: &mut wasmtime::Store<StoreData>,
    call: RunCall<'_>,
) -> Answer<SubagentResult> {
    store
        .run_concurrent(async |accessor| call_run_concurrent(i, accessor, call).await)
        .await?
}

/// `provider.run` as one call among others on a store that runs concurrently: the run's cancel
/// future and message stream are made in the store, then the call awaits the guest's answer.
pub(crate) async fn call_run_concurrent(
    i: &provider_world::ProviderPlugin,
    accessor: &Accessor<StoreData>,
    call: RunCall<'_>,
) -> Answer<SubagentResult> {
    let (cancel, messages) = accessor.with(|mut store| {
        let cancel = signals::cancel_future(&mut store, call.ctx)?;
        let messages = signals::message_stream(&mut store, call.ctx)?;
        Ok::<_, wasmtime::Error>((cancel, messages))
    })?;
    Ok(i.seam_plugin_provider()
        .call_run(
            accessor,
            call.config.to_string(),
            call.ctx.id().to_string(),
            convert::request_to_wit(call.request),
            cancel,
            messages,
        )
        .await?
        .map(convert::result_from_wit)
        .map_err(GuestError))
}
