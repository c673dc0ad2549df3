//! [`Answered`]: a server transport that sends no progress for a request once the request was
//! cancelled or answered.
//!
//! rmcp's service loop both reads what the client sends and writes what the server sends, one
//! message at a time, through the transport. Deciding here, in that loop, which progress may go
//! out is what makes the rule hold on the wire: a handler's progress handed to rmcp before it
//! read `notifications/cancelled` but written after it is dropped, where a check in the handler
//! could only see the cancel once rmcp had read it.

use std::collections::HashMap;
use std::future::Future;

use futures::future::Either;
use rmcp::model::{ClientNotification, ClientRequest, GetMeta, JsonRpcMessage, ProgressToken};
use rmcp::model::{RequestId, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::{IntoTransport, Transport};
use rmcp::RoleServer;

/// A server transport that passes `notifications/progress` only for a request that is still
/// open: read, with that progress token, and neither cancelled by the client nor answered.
pub struct Answered<T> {
    inner: T,
    /// The progress token of each open request that carried one.
    open: HashMap<RequestId, ProgressToken>,
}

/// `inner` (anything rmcp makes a server transport of, as stdio pipes), guarded.
pub fn answered<E, A>(
    inner: impl IntoTransport<RoleServer, E, A>,
) -> Answered<impl Transport<RoleServer, Error = E>>
where
    E: std::error::Error + Send + Sync + 'static,
{
    Answered {
        inner: inner.into_transport(),
        open: HashMap::new(),
    }
}

/// The progress token `request` carries, in its `_meta`.
fn progress_token(request: &ClientRequest) -> Option<ProgressToken> {
    let in_params = match request {
        ClientRequest::CallToolRequest(call) => call
            .params
            .meta
            .as_ref()
            .and_then(|m| m.get_progress_token()),
        _ => None,
    };
    in_params.or_else(|| request.get_meta().get_progress_token())
}

impl<T: Transport<RoleServer>> Answered<T> {
    /// Notes what the client sent: a request that opens a progress token, or a cancel that
    /// closes one.
    fn read(&mut self, message: &RxJsonRpcMessage<RoleServer>) {
        match message {
            JsonRpcMessage::Request(request) => {
                if let Some(token) = progress_token(&request.request) {
                    self.open.insert(request.id.clone(), token);
                }
            }
            JsonRpcMessage::Notification(note) => {
                if let ClientNotification::CancelledNotification(cancelled) = &note.notification {
                    if let Some(id) = &cancelled.params.request_id {
                        self.open.remove(id);
                    }
                }
            }
            _ => {}
        }
    }

    /// Whether `message` may be written, closing the request it answers.
    fn passes(&mut self, message: &TxJsonRpcMessage<RoleServer>) -> bool {
        match message {
            JsonRpcMessage::Response(response) => {
                self.open.remove(&response.id);
            }
            JsonRpcMessage::Error(error) => {
                if let Some(id) = &error.id {
                    self.open.remove(id);
                }
            }
            JsonRpcMessage::Notification(note) => {
                if let ServerNotification::ProgressNotification(progress) = &note.notification {
                    let token = &progress.params.progress_token;
                    return self.open.values().any(|t| t == token);
                }
            }
            JsonRpcMessage::Request(_) => {}
        }
        true
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Answered<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if self.passes(&item) {
            Either::Left(self.inner.send(item))
        } else {
            tracing::debug!("seam mcp: progress for a request cancelled or answered is not sent");
            Either::Right(std::future::ready(Ok(())))
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let message = self.inner.receive().await?;
        self.read(&message);
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
