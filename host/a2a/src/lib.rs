//! A2A both ways: a remote A2A agent as a provider (`kind = "a2a"` entries, [`client`]), and a
//! host's top-level agent served to A2A clients (`seam a2a CONFIG --http ADDR`, [`server`]).
//!
//! The wire is A2A 1.0's JSON-RPC binding over HTTP, with server-sent events for streams
//! ([`wire`]).

pub mod client;
pub mod server;
pub mod wire;
