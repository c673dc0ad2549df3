//! What a guest reads of a host error: `wasi:io/error`'s `to-debug-string`.
//!
//! wasmtime-wasi renders the error with `{:?}`, which for a host error carries its backtrace
//! when the host runs with `RUST_BACKTRACE` (tens of kilobytes naming host source paths and
//! dependency versions). [`add_to_linker`] shadows it with the error's message chain only, capped:
//! what the guest needs to report the failure, nothing of how the host is built.

use wasmtime::component::{Linker, Resource};
use wasmtime::StoreContextMut;
use wasmtime_wasi::p2::IoError as StreamError;

use crate::store::StoreData;

/// The instance wasmtime-wasi defines; components importing an older 0.2 link to it too.
const INTERFACE: &str = "wasi:io/error@0.2.12";

/// Longest debug string a guest is given, in bytes.
pub const MAX_DEBUG_STRING: usize = 1024;

/// Shadows `[method]error.to-debug-string`; call it after `wasmtime_wasi::p2::add_to_linker_async`.
pub fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker.instance(INTERFACE)?.func_wrap(
        "[method]error.to-debug-string",
        |mut store: StoreContextMut<'_, StoreData>, (error,): (Resource<StreamError>,)| {
            let error = store.data_mut().table().get(&error)?;
            Ok((debug_string(error),))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// The error's messages, outermost first (`{:#}` never includes a backtrace), cut at
/// [`MAX_DEBUG_STRING`] on a character boundary.
pub fn debug_string(error: &StreamError) -> String {
    let mut text = format!("{error:#}");
    if text.len() > MAX_DEBUG_STRING {
        let mut end = MAX_DEBUG_STRING;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_chain_only_within_its_cap() {
        let error = wasmtime::Error::msg("inner cause").context("outer failure");
        assert_eq!(debug_string(&error), "outer failure: inner cause");
        let long = wasmtime::Error::msg("é".repeat(MAX_DEBUG_STRING));
        let shown = debug_string(&long);
        assert!(shown.len() <= MAX_DEBUG_STRING && shown.len() > MAX_DEBUG_STRING - 2);
        assert!(shown.chars().all(|c| c == 'é'));
    }
}
