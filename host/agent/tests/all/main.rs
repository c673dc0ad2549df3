//! seam-core's integration tests: the crate's public API with Rust fake providers and the
//! scripted model (the OpenAI adapter's are in `seam-model-openai`). No component, no wasm engine: `cargo test -p
//! seam-core` needs neither the wasm32 target nor the guests. One binary, a module per area.

mod agent;
mod durable;
mod runs;
mod service;
mod store;
mod support;
mod tools;
