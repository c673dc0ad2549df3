//! Integration tests: every test loads real built components through the host's public API.
//! One binary, one module per area (the wasmtime `tests/all` shape).

mod acp;
mod agent;
mod approvals;
mod authority;
mod budget;
mod cache_size;
mod cache_trust;
mod chat_server;
mod cluster;
mod connections;
mod delegation;
mod disk;
mod events;
mod faults;
mod fork_seed;
mod fuzz_smoke;
mod hostile;
mod http_provider;
mod load_order;
mod loader;
// The loopback HTTP server is seam-model-openai's (its adapter's tests need no component).
// Only part of it is used here (the adapter's tests use the rest).
#[path = "../../../host/model-openai/tests/all/loopback.rs"]
#[allow(dead_code)]
mod loopback;
mod mock;
mod observers;
mod oci;
mod progress;
mod registry;
mod reload;
mod run_ids;
mod runs;
mod session_stores;
mod shared_instances;
mod steering;
mod structured;
mod teardown;
mod tiering;
mod tool;
mod tree_budget;
mod versions;
