//! Denied socket use a developer can see, and the connection slots sockets hold, for WASI 0.3's
//! `wasi:sockets` (`super::sockets` does the same for 0.2, with the functions both use).
//!
//! [`add_to_linker`] shadows the functions where wasmtime-wasi refuses without a grant
//! (`ip-name-lookup.resolve-addresses` without `dns = true`, `tcp-socket.create` and
//! `udp-socket.create` without a `network` grant), warns when the store's grants refuse the
//! call, takes a connection slot for each socket, and delegates to wasmtime-wasi. A connection
//! to an address outside a `network` grant is refused and warned about by the grant's address
//! check (`store::grants`), which wasmtime-wasi asks for 0.3 as for 0.2.

use std::future::Future;
use std::pin::Pin;

use wasmtime::component::{Accessor, Linker, Resource};
use wasmtime::StoreContextMut;
use wasmtime_wasi::p3::bindings::sockets::ip_name_lookup::{
    ErrorCode as LookupError, HostWithStore as Lookup, IpAddress,
};
use wasmtime_wasi::p3::bindings::sockets::types::{
    ErrorCode, HostTcpSocket, HostUdpSocket, IpAddressFamily,
};
use wasmtime_wasi::p3::sockets::SocketResult;
use wasmtime_wasi::sockets::{
    TcpSocket, UdpSocket, WasiSockets, WasiSocketsCtxView, WasiSocketsView,
};

use super::sockets::{denied_lookup, denied_socket, open_slot, NoSlot};
use crate::sandbox::connections::Connection;
use crate::store::{Socket, StoreData};

/// The version wasmtime-wasi defines; components importing a later 0.3 link to it too.
const VERSION: &str = "0.3.0";

type Answer<T> = wasmtime::Result<(Result<T, ErrorCode>,)>;
type Looked = wasmtime::Result<(Result<Vec<IpAddress>, LookupError>,)>;

/// The store's sockets, as wasmtime-wasi's 0.3 functions take them.
fn sockets(data: &mut StoreData) -> WasiSocketsCtxView<'_> {
    data.sockets()
}

/// Shadows wasmtime-wasi's 0.3 socket functions that refuse without a grant or make a socket;
/// call it after `wasmtime_wasi::p3::add_to_linker`.
pub fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker
        .instance(&format!("wasi:sockets/ip-name-lookup@{VERSION}"))?
        .func_wrap_concurrent(
            "resolve-addresses",
            |accessor: &Accessor<StoreData>,
             (name,): (String,)|
             -> Pin<Box<dyn Future<Output = Looked> + Send + '_>> {
                Box::pin(async move {
                    accessor.with(|mut access| denied_lookup(access.data_mut(), &name));
                    let lookup = accessor.with_getter::<WasiSockets>(sockets);
                    Ok((
                        <WasiSockets as Lookup<StoreData>>::resolve_addresses(&lookup, name)
                            .await?,
                    ))
                })
            },
        )?;
    let mut types = linker.instance(&format!("wasi:sockets/types@{VERSION}"))?;
    types.func_wrap(
        "[static]tcp-socket.create",
        |mut store: StoreContextMut<'_, StoreData>, (family,): (IpAddressFamily,)| {
            let data = store.data_mut();
            denied_socket(data, "TCP");
            let connection = match open(data) {
                Ok(connection) => connection,
                Err(refused) => return refused,
            };
            let made = HostTcpSocket::create(&mut data.sockets(), family);
            if let Ok(socket) = &made {
                data.sockets_held
                    .push((Socket::Tcp3(socket.rep()), connection));
            }
            answer::<Resource<TcpSocket>>(made)
        },
    )?;
    types.func_wrap_async(
        "[static]udp-socket.create",
        |mut store: StoreContextMut<'_, StoreData>, (family,): (IpAddressFamily,)| {
            Box::new(async move {
                let data = store.data_mut();
                denied_socket(data, "UDP");
                let connection = match open(data) {
                    Ok(connection) => connection,
                    Err(refused) => return refused,
                };
                let made = HostUdpSocket::create(&mut data.sockets(), family).await;
                if let Ok(socket) = &made {
                    data.sockets_held
                        .push((Socket::Udp3(socket.rep()), connection));
                }
                answer::<Resource<UdpSocket>>(made)
            })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// [`open_slot`] as 0.3's functions answer it: a trap, or `other` saying why (0.3 has no
/// `new-socket-limit`).
fn open<T>(data: &mut StoreData) -> Result<Connection, Answer<T>> {
    open_slot(data).map_err(|refused| match refused {
        NoSlot::Plugin(hit) => Err(wasmtime::Error::new(hit)),
        NoSlot::Host => Ok((Err(ErrorCode::Other(Some(
            "the host has no socket to spare".into(),
        ))),)),
    })
}

/// wasmtime-wasi's answer as the guest sees it: an error code, or a trap.
fn answer<T>(done: SocketResult<T>) -> Answer<T> {
    match done {
        Ok(value) => Ok((Ok(value),)),
        Err(e) => Ok((Err(e.downcast()?),)),
    }
}
