//! Denied socket use a developer can see, and the connection slots sockets hold, for
//! `wasi:sockets@0.2` (`super::sockets_p3` shadows 0.3's with the same functions of this
//! module): `wasi:sockets` calls that a grant would allow are logged at `warn`, naming the
//! plugin, what it attempted and the grant key to add, and each socket takes one of the
//! plugin's `max_http_connections` slots while the guest holds it.
//!
//! wasmtime-wasi refuses a name lookup without `dns = true`, and a socket without a `network`
//! grant, silently. [`add_to_linker`] shadows the three functions where that happens
//! (`resolve-addresses`, `create-tcp-socket`, `create-udp-socket`), warns when the store's grants
//! refuse the call, and delegates to wasmtime-wasi, which refuses it as before. A connection to
//! an address outside a `network` grant is warned about by the grant's address check
//! (`sandbox::grants`, which also keeps each store's `SocketWatch`), which knows the address;
//! socket creation does not.

use wasmtime::component::{Linker, Resource};
use wasmtime::StoreContextMut;
use wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::{self, ResolveAddressStream};
use wasmtime_wasi::p2::bindings::sockets::network::{ErrorCode, IpAddressFamily};
use wasmtime_wasi::p2::bindings::sockets::tcp_create_socket::Host as _;
use wasmtime_wasi::p2::bindings::sockets::udp_create_socket::Host as _;
use wasmtime_wasi::p2::{Network, SocketError, TcpSocket, UdpSocket};
use wasmtime_wasi::sockets::WasiSocketsView;

use crate::sandbox::connections::{Connection, Refused};
use crate::sandbox::{Denial, LimitHit};
use crate::store::{Socket, StoreData};

/// Whether `socket`'s handle still names a socket of its type: wasmtime-wasi drops a socket
/// without telling.
fn still_held(data: &mut StoreData, socket: Socket) -> bool {
    let table = data.table();
    match socket {
        Socket::Tcp(rep) => table.get(&Resource::<TcpSocket>::new_borrow(rep)).is_ok(),
        Socket::Udp(rep) => table.get(&Resource::<UdpSocket>::new_borrow(rep)).is_ok(),
        Socket::Tcp3(rep) => table
            .get(&Resource::<wasmtime_wasi::sockets::TcpSocket>::new_borrow(
                rep,
            ))
            .is_ok(),
        Socket::Udp3(rep) => table
            .get(&Resource::<wasmtime_wasi::sockets::UdpSocket>::new_borrow(
                rep,
            ))
            .is_ok(),
    }
}

/// The version wasmtime-wasi defines; components importing an older 0.2 link to it too.
const VERSION: &str = "0.2.12";

type Store<'a> = StoreContextMut<'a, StoreData>;
type Answer<T> = wasmtime::Result<(Result<T, ErrorCode>,)>;

/// Shadows wasmtime-wasi's socket functions that refuse without a grant; call it after
/// `wasmtime_wasi::p2::add_to_linker_async`.
pub fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker
        .instance(&format!("wasi:sockets/ip-name-lookup@{VERSION}"))?
        .func_wrap(
            "resolve-addresses",
            |mut store: Store<'_>, (network, name): (Resource<Network>, String)| {
                let data = store.data_mut();
                denied_lookup(data, &name);
                answer::<Resource<ResolveAddressStream>>(ip_name_lookup::Host::resolve_addresses(
                    &mut data.sockets(),
                    network,
                    name,
                ))
            },
        )?;
    linker
        .instance(&format!("wasi:sockets/tcp-create-socket@{VERSION}"))?
        .func_wrap(
            "create-tcp-socket",
            |mut store: Store<'_>, (family,): (IpAddressFamily,)| {
                let data = store.data_mut();
                denied_socket(data, "TCP");
                let connection = match open(data) {
                    Ok(connection) => connection,
                    Err(refused) => return refused,
                };
                let made = data.sockets().create_tcp_socket(family);
                if let Ok(socket) = &made {
                    data.sockets_held
                        .push((Socket::Tcp(socket.rep()), connection));
                }
                answer::<Resource<TcpSocket>>(made)
            },
        )?;
    linker
        .instance(&format!("wasi:sockets/udp-create-socket@{VERSION}"))?
        .func_wrap_async(
            "create-udp-socket",
            |mut store: Store<'_>, (family,): (IpAddressFamily,)| {
                Box::new(async move {
                    let data = store.data_mut();
                    denied_socket(data, "UDP");
                    let connection = match open(data) {
                        Ok(connection) => connection,
                        Err(refused) => return refused,
                    };
                    let made = data.sockets().create_udp_socket(family).await;
                    if let Ok(socket) = &made {
                        data.sockets_held
                            .push((Socket::Udp(socket.rep()), connection));
                    }
                    answer::<Resource<UdpSocket>>(made)
                })
            },
        )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Why a new socket got no connection slot.
pub enum NoSlot {
    /// The plugin holds all its `max_http_connections`: the guest traps with this.
    Plugin(LimitHit),
    /// Plugins hold every descriptor the host gives them: the socket is refused (logged).
    Host,
}

/// A connection slot for a new socket. The slots of sockets the guest has dropped since are
/// given back first: wasmtime-wasi drops a socket without telling, so they are found by their
/// handles, which no longer name a socket. (A handle reused by another socket keeps its slot a
/// little longer: the count errs on the side of the host.)
pub fn open_slot(data: &mut StoreData) -> Result<Connection, NoSlot> {
    let mut held = std::mem::take(&mut data.sockets_held);
    held.retain(|(socket, _)| still_held(data, *socket));
    data.sockets_held = held;
    match data.http_hooks().connections.open() {
        Ok(connection) => Ok(connection),
        Err(Refused::Plugin(limit)) => Err(NoSlot::Plugin(LimitHit::logged(&data.plugin, limit))),
        Err(Refused::Host { budget }) => {
            tracing::warn!(
                plugin = %data.plugin,
                "plugin `{}` opened a socket while plugins hold all {budget} descriptors the \
                 host gives them; it was refused, and the host keeps the rest for itself",
                data.plugin
            );
            Err(NoSlot::Host)
        }
    }
}

/// [`open_slot`] as 0.2's functions answer it: a trap, or `new-socket-limit`.
fn open<T>(data: &mut StoreData) -> Result<Connection, Answer<T>> {
    open_slot(data).map_err(|refused| match refused {
        NoSlot::Plugin(hit) => Err(wasmtime::Error::new(hit)),
        NoSlot::Host => Ok((Err(ErrorCode::NewSocketLimit),)),
    })
}

/// Warns when a store without a `network` grant opens a socket.
pub fn denied_socket(data: &mut StoreData, protocol: &'static str) {
    if !data.socket_watch.network() {
        let plugin = data.plugin.clone();
        data.socket_watch.warn(&plugin, Denial::Socket(protocol));
    }
}

/// Warns when a store without `dns = true` looks `name` up.
pub fn denied_lookup(data: &mut StoreData, name: &str) {
    if !data.socket_watch.dns() {
        let plugin = data.plugin.clone();
        data.socket_watch
            .warn(&plugin, Denial::Lookup(name.to_string()));
    }
}

/// wasmtime-wasi's answer as the guest sees it: an error code, or a trap.
fn answer<T>(done: Result<T, SocketError>) -> Answer<T> {
    match done {
        Ok(value) => Ok((Ok(value),)),
        Err(e) => Ok((Err(e.downcast()?),)),
    }
}
