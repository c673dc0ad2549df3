//! seam-core's integration tests: the crate's public API with Rust fake providers, the scripted
//! model and a real HTTP server on loopback. No component, no wasm engine: `cargo test -p
//! seam-core` needs neither the wasm32 target nor the guests. One binary, a module per area.

mod agent;
mod durable;
mod log;
mod loopback;
mod openai;
mod runs;
mod service;
mod store;
mod support;
mod tools;
