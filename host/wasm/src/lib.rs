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
pub use kinds::PluginError;
pub use versions::WitVersion;
