//! The host's shadows of wasmtime-wasi and wasmtime-wasi-http: functions re-linked over their
//! own to count what a plugin keeps ([`filesystem`]: the disk quota; [`http`] and [`sockets`]:
//! open connections) and to log what its grants refuse ([`sockets`]). Origins are gated by the
//! hooks each store holds (`crate::store::http`), which wasmtime-wasi-http calls.

pub(crate) mod filesystem;
pub(crate) mod http;
pub(crate) mod sockets;

use wasmtime::component::Linker;

use crate::store::StoreData;

/// Re-links the shadowed functions over wasmtime-wasi's (which the caller has added).
pub(crate) fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    filesystem::add_to_linker(linker)?;
    http::add_to_linker(linker)?;
    sockets::add_to_linker(linker)
}
