//! The JSON API's errors: an HTTP status, a stable code a script can match, and a message that
//! names what was wrong (the session, the run, the field).

use http::StatusCode;
use thiserror::Error;

/// An answer of the API that is not a success: `{"error": {"code": ..., "message": ...}}`.
#[derive(Debug, Error)]
#[error("{message}")]
pub struct ApiError {
    /// The HTTP status it is sent with.
    pub status: StatusCode,
    /// `bad-request`, `not-found`, `conflict`, `unsupported`, `unavailable` or `internal`.
    pub code: &'static str,
    /// What went wrong, in words.
    pub message: String,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    /// The request is malformed (its JSON, a field, a query).
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad-request", message)
    }

    /// No such session, run, approval or path.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not-found", message)
    }

    /// The thing is not in a state that allows it (a turn already runs; the run has ended).
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// The provider or the host cannot do it (no steering, no replayer).
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "unsupported", message)
    }

    /// The store could not be read or written.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    /// Something this side got wrong.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// The body sent.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({"error": {"code": self.code, "message": self.message}})
    }
}

impl From<seam_core::store::StoreError> for ApiError {
    fn from(e: seam_core::store::StoreError) -> Self {
        Self::unavailable(e.to_string())
    }
}
