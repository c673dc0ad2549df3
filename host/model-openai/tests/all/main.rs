//! The OpenAI-compatible adapter against a real HTTP/1.1 server on loopback. One binary.

mod log;
mod loopback;
mod openai;
