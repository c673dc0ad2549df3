//! The host's shadows of wasmtime-wasi: functions re-linked over wasmtime-wasi's own to count
//! what a plugin keeps ([`filesystem`]: the disk quota) and to log what its grants refuse
//! ([`sockets`]). `wasi:http` needs no shadow: wasmtime-wasi-http calls the hooks each store
//! holds (`crate::store::http`), which gate requests by origin grant.

pub(crate) mod filesystem;
pub(crate) mod sockets;

use wasmtime::component::Linker;

use crate::store::StoreData;

/// Re-links the shadowed functions over wasmtime-wasi's (which the caller has added).
pub(crate) fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    filesystem::add_to_linker(linker)?;
    sockets::add_to_linker(linker)
}
