//! The host's shadows of wasmtime-wasi and wasmtime-wasi-http: functions re-linked over their
//! own to count what a plugin keeps ([`filesystem`]: the disk quota; [`http`] and [`sockets`]:
//! open connections), to log what its grants refuse ([`sockets`]), and to keep host backtraces
//! out of what a guest reads of a host error ([`io_error`]). Origins are gated by the
//! hooks each store holds (`crate::store::http`), which wasmtime-wasi-http calls.

pub mod filesystem;
pub mod http;
pub mod io_error;
pub mod sockets;

use wasmtime::component::Linker;

use crate::store::StoreData;

/// Re-links the shadowed functions over wasmtime-wasi's (which the caller has added).
pub fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    filesystem::add_to_linker(linker)?;
    http::add_to_linker(linker)?;
    io_error::add_to_linker(linker)?;
    sockets::add_to_linker(linker)
}
