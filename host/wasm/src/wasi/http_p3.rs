//! WASI 0.3's `wasi:http/client.send`, shadowed to count connections as 0.2's `handle` is
//! (`super::http`, whose [`open_slot`](super::http::open_slot) both take): the request takes
//! one of the plugin's `max_http_connections` slots before wasmtime-wasi-http sends it, and the
//! store's hooks (`crate::store::http`, which both versions send through and which refuse every
//! origin the entry does not grant) hold it until the connection closes. A guest past its cap
//! traps naming the key; a request the host has no descriptor for fails with
//! `connection-limit-reached`.

use std::future::Future;
use std::pin::{pin, Pin};
use std::task::Poll;

use wasmtime::component::{Accessor, Linker, Resource};
use wasmtime_wasi_http::p3::bindings::http::client::HostWithStore as Client;
use wasmtime_wasi_http::p3::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::p3::{Request, Response};
use wasmtime_wasi_http::{WasiHttp, WasiHttpCtxView, WasiHttpView};

use super::http::{close_unused_slot, open_slot, NoSlot};
use crate::store::StoreData;

/// The version wasmtime-wasi-http defines; components importing a later 0.3 link to it too.
const INTERFACE: &str = "wasi:http/client@0.3.0";

type Answer = wasmtime::Result<(Result<Resource<Response>, ErrorCode>,)>;

/// The store's `wasi:http`, as wasmtime-wasi-http's 0.3 functions take it.
fn http(data: &mut StoreData) -> WasiHttpCtxView<'_> {
    data.http()
}

/// Shadows `send`; call it after `wasmtime_wasi_http::p3::add_to_linker`.
pub fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker.instance(INTERFACE)?.func_wrap_concurrent(
        "send",
        |accessor: &Accessor<StoreData>,
         (request,): (Resource<Request>,)|
         -> Pin<Box<dyn Future<Output = Answer> + Send + '_>> {
            Box::pin(send(accessor, request))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

async fn send(accessor: &Accessor<StoreData>, request: Resource<Request>) -> Answer {
    match accessor.with(|mut access| open_slot(access.data_mut())) {
        Ok(()) => {}
        Err(NoSlot::Plugin(hit)) => return Err(wasmtime::Error::new(hit)),
        Err(NoSlot::Host) => return Ok((Err(ErrorCode::ConnectionLimitReached),)),
    }
    let client = accessor.with_getter::<WasiHttp>(http);
    let mut sending = pin!(<WasiHttp as Client<StoreData>>::send(&client, request));
    // Its first poll hands the request to the hooks, which take the slot for the connection;
    // no other call of the store runs in between.
    let first = std::future::poll_fn(|cx| Poll::Ready(sending.as_mut().poll(cx))).await;
    // A request refused before it reached the hooks gives its slot back at once.
    accessor.with(|mut access| close_unused_slot(access.data_mut()));
    let sent = match first {
        Poll::Ready(sent) => sent,
        Poll::Pending => sending.await,
    };
    match sent {
        Ok(response) => Ok((Ok(response),)),
        Err(e) => Ok((Err(e.downcast()?),)),
    }
}
