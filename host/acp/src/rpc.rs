//! JSON-RPC 2.0 as the Agent Client Protocol speaks it on stdio: one JSON object per line.
//!
//! Both directions of Seam's ACP use this: the provider that drives an agent process, and
//! `seam acp`, which serves a Seam agent to an editor.

use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// JSON-RPC's code for a line that is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's code for JSON that is not a JSON-RPC 2.0 message.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's code for a method the receiver does not offer.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC's code for parameters the receiver cannot use.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC's code for a failure while handling a request.
pub const INTERNAL_ERROR: i64 = -32603;

/// The error member of a JSON-RPC response.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The error code.
    pub code: i64,
    /// The peer's explanation.
    pub message: String,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)
    }
}

/// A line that is not a JSON-RPC message: what a receiver answers with, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Malformed {
    /// [`PARSE_ERROR`] or [`INVALID_REQUEST`].
    pub code: i64,
    /// The message's id when one could be read, else `null` (as JSON-RPC asks).
    pub id: Value,
    /// What is wrong, with the start of the line.
    pub message: String,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// One message from the peer.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// The answer to one of our requests.
    Response {
        /// The id we sent.
        id: Value,
        /// The result or the error.
        result: Result<Value, RpcError>,
    },
    /// A request the peer expects an answer to.
    Request {
        /// The peer's id, echoed in the answer.
        id: Value,
        /// The method.
        method: String,
        /// Its parameters (`null` when absent).
        params: Value,
    },
    /// A message that expects no answer.
    Notification {
        /// The method.
        method: String,
        /// Its parameters (`null` when absent).
        params: Value,
    },
}

/// Reads one line as a JSON-RPC message; the error says what is wrong with it.
pub fn parse(line: &[u8]) -> Result<Incoming, Malformed> {
    let invalid = |id: Value, what: &str| Malformed {
        code: INVALID_REQUEST,
        id,
        message: format!("{what}: {}", excerpt(line)),
    };
    let value: Value = serde_json::from_slice(line).map_err(|e| Malformed {
        code: PARSE_ERROR,
        id: Value::Null,
        message: format!("not JSON ({e}): {}", excerpt(line)),
    })?;
    let Value::Object(mut object) = value else {
        return Err(invalid(Value::Null, "not a JSON-RPC object"));
    };
    let id = object.remove("id");
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid(id.unwrap_or(Value::Null), "not JSON-RPC 2.0"));
    }
    let params = object.remove("params").unwrap_or(Value::Null);
    match (id, object.remove("method")) {
        (Some(id), Some(Value::String(method))) => Ok(Incoming::Request { id, method, params }),
        (None, Some(Value::String(method))) => Ok(Incoming::Notification { method, params }),
        (Some(id), None) => {
            let result = match (object.remove("result"), object.remove("error")) {
                (_, Some(error)) => Err(RpcError {
                    code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                    message: error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("(no message)")
                        .to_string(),
                }),
                (Some(result), None) => Ok(result),
                (None, None) => Err(RpcError {
                    code: INTERNAL_ERROR,
                    message: "a response with neither `result` nor `error`".into(),
                }),
            };
            Ok(Incoming::Response { id, result })
        }
        (id, _) => Err(invalid(
            id.unwrap_or(Value::Null),
            "neither a request, a notification nor a response",
        )),
    }
}

/// A request line (with its newline).
pub fn request(id: u64, method: &str, params: Value) -> String {
    line(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
}

/// A notification line.
pub fn notification(method: &str, params: Value) -> String {
    line(json!({"jsonrpc": "2.0", "method": method, "params": params}))
}

/// A successful response line.
pub fn response(id: &Value, result: Value) -> String {
    line(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// An error response line.
pub fn error_response(id: &Value, code: i64, message: &str) -> String {
    line(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
}

fn line(value: Value) -> String {
    let mut text = value.to_string();
    text.push('\n');
    text
}

/// The start of a line, for a diagnostic.
pub fn excerpt(line: &[u8]) -> String {
    const SHOWN: usize = 120;
    let text = String::from_utf8_lossy(&line[..line.len().min(SHOWN)]);
    let text = text.trim_end();
    if line.len() > SHOWN {
        format!("`{text}...` ({} bytes)", line.len())
    } else {
        format!("`{text}`")
    }
}

/// Why no line could be read.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    /// A line went on past the cap without a newline.
    #[error("a line longer than {0} bytes")]
    TooLong(usize),
    /// The stream failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Reads newline-delimited lines of at most `max` bytes. Cancel-safe: a read dropped halfway
/// keeps what it had, so it can sit in a `select!`.
pub struct LineReader<R> {
    inner: R,
    max: usize,
    partial: Vec<u8>,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// A reader over `inner` refusing lines longer than `max` bytes.
    pub fn new(inner: R, max: usize) -> Self {
        Self {
            inner,
            max,
            partial: Vec::new(),
        }
    }

    /// The next non-blank line without its newline; `None` at the end of the stream (a last
    /// line without a newline still counts).
    pub async fn next(&mut self) -> Result<Option<Vec<u8>>, LineError> {
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                let rest = std::mem::take(&mut self.partial);
                return Ok((!rest.trim_ascii().is_empty()).then_some(rest));
            }
            let (taken, complete) = match available.iter().position(|b| *b == b'\n') {
                Some(end) => (end + 1, true),
                None => (available.len(), false),
            };
            if self.partial.len() + taken > self.max + 1 {
                return Err(LineError::TooLong(self.max));
            }
            self.partial.extend_from_slice(&available[..taken]);
            self.inner.consume(taken);
            if complete {
                let mut line = std::mem::take(&mut self.partial);
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if !line.trim_ascii().is_empty() {
                    return Ok(Some(line));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_told_apart() {
        let request = parse(
            br#"{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file","params":{"path":"/x"}}"#,
        );
        assert_eq!(
            request,
            Ok(Incoming::Request {
                id: json!(7),
                method: "fs/read_text_file".into(),
                params: json!({"path": "/x"})
            })
        );
        let note = parse(br#"{"jsonrpc":"2.0","method":"session/update"}"#);
        assert_eq!(
            note,
            Ok(Incoming::Notification {
                method: "session/update".into(),
                params: Value::Null
            })
        );
        let ok = parse(br#"{"jsonrpc":"2.0","id":"a","result":{"stopReason":"end_turn"}}"#);
        assert_eq!(
            ok,
            Ok(Incoming::Response {
                id: json!("a"),
                result: Ok(json!({"stopReason": "end_turn"}))
            })
        );
        let Ok(Incoming::Response { result: Err(e), .. }) =
            parse(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}}"#)
        else {
            panic!("an error response")
        };
        assert_eq!((e.code, e.message.as_str()), (METHOD_NOT_FOUND, "nope"));
        for bad in [
            &b"hello"[..],
            b"[1,2]",
            br#"{"id":1,"result":{}}"#,
            br#"{"jsonrpc":"2.0"}"#,
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        // What a receiver answers with: the code, and the id when there was one.
        assert_eq!(parse(b"hello").unwrap_err().code, PARSE_ERROR);
        let e = parse(br#"{"jsonrpc":"1.0","id":7,"method":"x"}"#).unwrap_err();
        assert_eq!((e.code, e.id), (INVALID_REQUEST, json!(7)));
        let e = parse(br#"{"jsonrpc":"2.0","id":8,"method":3}"#).unwrap_err();
        assert_eq!((e.code, e.id), (INVALID_REQUEST, json!(8)));
    }

    #[tokio::test]
    async fn lines_are_split_capped_and_kept_across_reads() {
        let input: &[u8] = b"one\r\n\n  \ntwo\nlast";
        let mut reader = LineReader::new(input, 16);
        assert_eq!(reader.next().await.unwrap().as_deref(), Some(&b"one"[..]));
        assert_eq!(reader.next().await.unwrap().as_deref(), Some(&b"two"[..]));
        assert_eq!(reader.next().await.unwrap().as_deref(), Some(&b"last"[..]));
        assert!(reader.next().await.unwrap().is_none());

        let long = [b'x'; 40];
        let mut reader = LineReader::new(&long[..], 16);
        assert!(matches!(reader.next().await, Err(LineError::TooLong(16))));
        // Exactly at the cap is fine.
        let mut exact = vec![b'y'; 16];
        exact.push(b'\n');
        let mut reader = LineReader::new(&exact[..], 16);
        assert_eq!(reader.next().await.unwrap().map(|l| l.len()), Some(16));
    }

    #[test]
    fn written_lines_are_one_json_object_each() {
        let text = request(3, "session/prompt", json!({"sessionId": "s"}));
        assert!(text.ends_with('\n') && !text[..text.len() - 1].contains('\n'));
        assert_eq!(
            parse(text.trim_end().as_bytes()),
            Ok(Incoming::Request {
                id: json!(3),
                method: "session/prompt".into(),
                params: json!({"sessionId": "s"})
            })
        );
        let text = error_response(&json!(9), METHOD_NOT_FOUND, "no");
        assert!(matches!(
            parse(text.trim_end().as_bytes()),
            Ok(Incoming::Response { result: Err(_), .. })
        ));
    }
}
