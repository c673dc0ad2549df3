//! A streamed reply: server-sent events (decoded by `eventsource-stream`) of completion deltas.
//!
//! `timeout_ms` bounds the wait for each next network chunk rather than the whole reply, so a
//! long answer that keeps arriving is not a hung endpoint.

use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use reqwest::Response;
use tokio::time::timeout;

use super::body::{transport, MAX_BODY_BYTES};
use super::wire::{apply_event, Builder};
use seam_agent::model::{ModelError, ModelReply};

/// Reads an SSE stream of completion chunks, each next chunk within `idle`.
pub(super) async fn read_stream(
    response: Response,
    idle: Duration,
    timeout_ms: u64,
) -> Result<ModelReply, ModelError> {
    let mut events = std::pin::pin!(chunks(response, idle, timeout_ms).eventsource());
    let mut builder = Builder::default();
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| match e {
            EventStreamError::Transport(e) => e,
            EventStreamError::Utf8(e) => {
                ModelError::Protocol(format!("the stream is not UTF-8: {e}"))
            }
            EventStreamError::Parser(e) => {
                ModelError::Protocol(format!("the stream is not server-sent events: {e}"))
            }
        })?;
        if apply_event(&mut builder, &event.data)? {
            return builder.finish();
        }
    }
    // A finish reason without `[DONE]` is complete enough: some servers omit it.
    if builder.has_finish() {
        return builder.finish();
    }
    Err(ModelError::Protocol(
        "the stream ended before the reply was complete".into(),
    ))
}

/// The body's chunks, each within `idle`, at most [`MAX_BODY_BYTES`] in all, then a blank line:
/// a last event the server did not terminate still counts (the decoder drops an unterminated
/// event at the end, as the event-stream format says; chat servers are not that careful).
fn chunks(
    response: Response,
    idle: Duration,
    timeout_ms: u64,
) -> impl Stream<Item = Result<Bytes, ModelError>> {
    let body = futures::stream::unfold(Some((response, 0usize)), move |state| async move {
        let (mut response, received) = state?;
        let chunk = match timeout(idle, response.chunk()).await {
            Err(_) => Err(ModelError::Timeout(timeout_ms)),
            Ok(Err(e)) => Err(transport(&e)),
            Ok(Ok(None)) => return None,
            Ok(Ok(Some(chunk))) => Ok(chunk),
        };
        match chunk {
            Ok(chunk) if received + chunk.len() > MAX_BODY_BYTES => Some((
                Err(ModelError::Protocol(format!(
                    "the stream is larger than {MAX_BODY_BYTES} bytes"
                ))),
                None,
            )),
            Ok(chunk) => {
                let received = received + chunk.len();
                Some((Ok(chunk), Some((response, received))))
            }
            // Nothing is read after an error.
            Err(e) => Some((Err(e), None)),
        }
    });
    body.chain(futures::stream::once(async {
        Ok(Bytes::from_static(b"\n\n"))
    }))
}
