//! `wasi:http/outgoing-handler.handle` (0.2), shadowed to count connections, and [`open_slot`],
//! the count itself, which `super::http_p3` takes for 0.3's `wasi:http/client.send` too: each
//! request takes one of the plugin's `max_http_connections` slots (and one of the host's
//! descriptors) before wasmtime-wasi-http sends it, and holds it until its connection closes
//! (the store's hooks, `crate::store::http`, carry it there: both versions send through them).
//! A guest past its cap traps with a `LimitHit` naming the key; a request refused because the
//! host has no descriptors to spare gets the wasi:http `connection-limit-reached` error, and
//! the plugin goes on.

use wasmtime::component::{Linker, Resource};
use wasmtime::StoreContextMut;
use wasmtime_wasi_http::p2::bindings::http::outgoing_handler;
use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::p2::types::{HostFutureIncomingResponse, HostOutgoingRequest};
use wasmtime_wasi_http::{RequestOptions, WasiHttpView};

use crate::sandbox::connections::Refused;
use crate::sandbox::LimitHit;
use crate::store::StoreData;

/// The version wasmtime-wasi-http defines; components importing an older 0.2 link to it too.
const INTERFACE: &str = "wasi:http/outgoing-handler@0.2.12";

type Answer = wasmtime::Result<(Result<Resource<HostFutureIncomingResponse>, ErrorCode>,)>;

/// Shadows `handle`; call it after wasmtime-wasi-http's own linker functions.
pub fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker.instance(INTERFACE)?.func_wrap(
        "handle",
        |mut store: StoreContextMut<'_, StoreData>,
         (request, options): (
            Resource<HostOutgoingRequest>,
            Option<Resource<RequestOptions>>,
        )| handle(store.data_mut(), request, options),
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Why a request got no connection slot.
pub enum NoSlot {
    /// The plugin holds all its `max_http_connections`: the guest traps with this.
    Plugin(LimitHit),
    /// Plugins hold every descriptor the host gives them: the request fails with
    /// `connection-limit-reached` (logged).
    Host,
}

/// Takes a connection slot for the request about to be sent, into the hooks (`pending`), where
/// [`wasmtime_wasi_http::WasiHttpHooks::send_request`] takes it for the connection.
pub fn open_slot(data: &mut StoreData) -> Result<(), NoSlot> {
    let hooks = data.http_hooks();
    match hooks.connections.open() {
        Ok(connection) => {
            hooks.pending = Some(connection);
            Ok(())
        }
        Err(Refused::Plugin(limit)) => Err(NoSlot::Plugin(LimitHit::logged(&data.plugin, limit))),
        Err(Refused::Host { budget }) => {
            tracing::warn!(
                plugin = %data.plugin,
                "plugin `{}` sent an HTTP request while plugins hold all {budget} descriptors \
                 the host gives them; it was refused (connection-limit-reached), and the host \
                 keeps the rest for itself",
                data.plugin
            );
            Err(NoSlot::Host)
        }
    }
}

/// Gives back the slot [`open_slot`] took, if the request was refused before the hooks took it.
pub fn close_unused_slot(data: &mut StoreData) {
    data.http_hooks().pending = None;
}

fn handle(
    data: &mut StoreData,
    request: Resource<HostOutgoingRequest>,
    options: Option<Resource<RequestOptions>>,
) -> Answer {
    match open_slot(data) {
        Ok(()) => {}
        Err(NoSlot::Plugin(hit)) => return Err(wasmtime::Error::new(hit)),
        Err(NoSlot::Host) => return Ok((Err(ErrorCode::ConnectionLimitReached),)),
    }
    let sent = outgoing_handler::Host::handle(&mut data.http(), request, options);
    // A request refused before it was sent gives its slot back at once.
    close_unused_slot(data);
    match sent {
        Ok(response) => Ok((Ok(response),)),
        Err(e) => Ok((Err(e.downcast()?),)),
    }
}
