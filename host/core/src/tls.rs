//! The process's TLS provider.

/// reqwest 0.13 (rmcp's HTTP client, for `kind = "mcp"` urls and embedders' MCP clients, the
/// OTLP exporter's and the registry client's) builds its TLS on the process's rustls provider
/// and panics without one: ring, as the rest of the host; an embedder's own choice, installed
/// first, is kept.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
