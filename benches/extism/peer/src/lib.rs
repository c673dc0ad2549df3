//! Extism as the host of the mock provider's task: the peer Seam's benchmarks compare with.
//!
//! The plugin (`../plugin`, built for wasm32-unknown-unknown with the Extism PDK) is compiled
//! once; every run then does what an Extism user does for an isolated call: a new plugin
//! instance from the compiled one, one call with the request as JSON, the JSON result parsed,
//! and the instance dropped.

use std::path::{Path, PathBuf};

use extism::{CompiledPlugin, Manifest, Plugin, PluginBuilder, Wasm};
use serde::{Deserialize, Serialize};

/// The reply template, the same as the Seam benchmarks'.
pub const REPLY: &str = "Notes on {prompt} for {parent} at depth {depth}";

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// The built plugin (`make bench` builds it).
pub fn plugin_path() -> PathBuf {
    repo().join("target/extism/wasm32-unknown-unknown/release/extism_bench_plugin.wasm")
}

/// The request, as the plugin reads it.
#[derive(Serialize, Clone)]
pub struct Request {
    /// The task.
    pub prompt: String,
    /// The caller's id.
    pub parent: String,
    /// The caller's depth.
    pub depth: u32,
}

impl Request {
    /// The request every benchmarked run gets (the Seam benchmarks' prompt and parent).
    pub fn bench() -> Self {
        Self {
            prompt: "the sources".into(),
            parent: "bench".into(),
            depth: 0,
        }
    }
}

/// The result, as the plugin writes it.
#[derive(Deserialize)]
pub struct RunResult {
    /// The filled-in reply.
    pub output: String,
    /// `completed`.
    #[serde(rename = "stopReason")]
    pub stop_reason: String,
}

/// Compiles the plugin with its config; no WASI, as the plugin needs none.
pub fn compile() -> CompiledPlugin {
    let path = plugin_path();
    let wasm = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("cannot read {} (run `make bench`): {e}", path.display()));
    let manifest = Manifest::new([Wasm::data(wasm)])
        .with_config_key("name", "mock")
        .with_config_key("reply", REPLY);
    PluginBuilder::new(manifest)
        .with_wasi(false)
        .with_cache_disabled()
        .compile()
        .expect("the Extism plugin compiles")
}

/// One run: instantiate, call `run` with the request as JSON, parse the result, drop.
pub fn one_run(compiled: &CompiledPlugin, request: &Request) -> RunResult {
    let mut plugin = Plugin::new_from_compiled(compiled).expect("the plugin instantiates");
    let input = serde_json::to_string(request).expect("the request serialises");
    let output = plugin
        .call::<&str, &str>("run", &input)
        .expect("the plugin runs");
    serde_json::from_str(output).expect("the plugin returns its result as JSON")
}
