//! Reading answers off the connection: bounded bodies, and transport errors in full.

use reqwest::Response;

use seam_agent::model::ModelError;

/// Largest response body (or stream) read, so a misbehaving endpoint cannot exhaust memory.
pub(super) const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;
/// Largest error body read: only a shortened form is reported anyway.
pub(super) const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// Reads a whole body, refusing more than `max` bytes.
pub(super) async fn read_body(mut response: Response, max: usize) -> Result<Vec<u8>, ModelError> {
    let mut out = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| transport(&e))? {
        if out.len() + chunk.len() > max {
            return Err(ModelError::Protocol(format!(
                "the response is larger than {max} bytes"
            )));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// A failed read or connection, with its causes.
pub(super) fn transport(e: &reqwest::Error) -> ModelError {
    ModelError::Transport(error_chain(e))
}

/// An error and its sources on one line (reqwest's own message hides e.g. "connection refused").
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = s.source();
    }
    message
}
