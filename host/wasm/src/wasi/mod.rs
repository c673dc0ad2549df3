//! The host's shadows of wasmtime-wasi and wasmtime-wasi-http: functions re-linked over their
//! own to count what a plugin keeps ([`filesystem`] and [`filesystem_p3`]: the disk quota,
//! counted by [`disk`]; [`http`], [`http_p3`], [`sockets`] and [`sockets_p3`]: open
//! connections), to log what its grants refuse ([`sockets`], [`sockets_p3`]), and to keep host
//! backtraces out of what a guest reads of a host error ([`io_error`]). Each grant and limit
//! holds for WASI 0.2 and 0.3 alike: a `_p3` module shadows 0.3's functions with the counting
//! of its 0.2 sibling. Origins are gated by the hooks each store holds (`crate::store::http`),
//! which wasmtime-wasi-http calls for both versions; files, addresses and name lookups by the
//! store's `WasiCtx`, which wasmtime-wasi consults for both.

pub mod disk;
pub mod filesystem;
pub mod filesystem_p3;
pub mod http;
pub mod http_p3;
pub mod io_error;
pub mod sockets;
pub mod sockets_p3;

use wasmtime::component::Linker;

use crate::store::StoreData;

/// Re-links the shadowed functions over wasmtime-wasi's and wasmtime-wasi-http's, of both WASI
/// versions (which the caller has added).
pub fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    filesystem::add_to_linker(linker)?;
    filesystem_p3::add_to_linker(linker)?;
    http::add_to_linker(linker)?;
    http_p3::add_to_linker(linker)?;
    io_error::add_to_linker(linker)?;
    sockets::add_to_linker(linker)?;
    sockets_p3::add_to_linker(linker)
}
