//! Seam's WebAssembly runtime: what a plugin component is made into and run with.
//!
//! The wasmtime [`engine`] (pooling, epochs, a tiered host's second engine), the compile
//! [`cache`] and background [`tiering`], the supported WIT [`versions`] and the one linker per
//! world ([`linkers`]), the Seam interfaces the host implements ([`interfaces`]), the shadows of
//! wasmtime-wasi ([`wasi`]), every plugin store's data ([`store`]), the plugin [`kinds`] and what
//! a guest's trap means ([`fault`]). Policy (grants, limits) comes from `seam-sandbox`; loading a
//! config and owning the registries is `seam-host`'s.

#![warn(missing_docs)]

pub mod cache;
pub mod engine;
pub mod fault;
pub mod interfaces;
pub mod kinds;
pub mod linkers;
pub mod store;
pub mod tiering;
pub mod versions;
pub mod wasi;

// Inside the crate, policy reads as `crate::sandbox` (its module before the crates split).
use seam_sandbox as sandbox;

pub use cache::{cache_entries, clear_cache, prune_cache, CacheEntry, CacheStats};
pub use engine::{Compiler, EngineError, EngineOptions};
pub use fault::GuestFault;
pub use kinds::shared::DEFAULT_SHARED_RUNS;
pub use kinds::PluginError;
pub use versions::WitVersion;

#[cfg(test)]
mod tests {
    use super::WitVersion;

    /// Every version the guest SDK spells (`seam:plugin/host@0.3.0`, `seam:plugin@0.3.0`,
    /// `wit/v0.3.0`), with the line it is on. wit-bindgen's macros take literal strings, so the
    /// SDK cannot name `WitVersion::LATEST`: this reads its source instead.
    fn sdk_versions() -> Vec<(String, String)> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../guests/sdk/src");
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).expect("the SDK's sources are in the repository") {
            let path = entry.expect("a readable entry").path();
            let text = std::fs::read_to_string(&path).expect("a readable SDK source");
            for line in text.lines() {
                // A version follows `seam:plugin` and its interface or world name after an `@`,
                // or `wit/v` directly.
                for (marker, name) in [("seam:plugin", true), ("wit/v", false)] {
                    for (at, _) in line.match_indices(marker) {
                        let mut rest = &line[at + marker.len()..];
                        if name {
                            let end = rest
                                .find(|c: char| !(c.is_ascii_alphanumeric() || "/-".contains(c)))
                                .unwrap_or(rest.len());
                            let Some(after) = rest[end..].strip_prefix('@') else {
                                continue;
                            };
                            rest = after;
                        }
                        let version: String = rest
                            .chars()
                            .take_while(|c| c.is_ascii_digit() || *c == '.')
                            .collect();
                        found.push((version, line.trim().to_string()));
                    }
                }
            }
        }
        found
    }

    #[test]
    fn the_guest_sdk_binds_the_newest_blocking_version() {
        let found = sdk_versions();
        assert!(!found.is_empty(), "the SDK names no version of seam:plugin");
        for (version, line) in found {
            assert_eq!(
                version,
                WitVersion::newest_blocking().as_str(),
                "guests/sdk/src: {line}"
            );
        }
    }
}
