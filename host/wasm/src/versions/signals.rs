//! The host's ends of what an async `provider.run` (0.5.0 on) is given besides its request: the
//! `cancel` future, which resolves with the run's cancel, and the `messages` stream, which
//! carries the steering messages sent to it. Both read the run's [`RunContext`], so they need
//! no store of their own: a shared instance's runs each have theirs.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use seam_core::subagent::RunContext;
use wasmtime::component::{Destination, FutureReader, StreamProducer, StreamReader, StreamResult};
use wasmtime::{AsContextMut, StoreContextMut};

use super::latest::provider_world::seam::plugin::types as wit;

/// The `cancel` future of `ctx`'s run: resolves when the run is cancelled, with its reason.
pub(crate) fn cancel_future<S: AsContextMut>(
    store: S,
    ctx: &RunContext,
) -> wasmtime::Result<FutureReader<Option<String>>>
where
    S::Data: Send + 'static,
{
    let ctx = ctx.clone();
    FutureReader::new(store, async move {
        ctx.cancelled().await;
        Ok::<_, wasmtime::Error>(ctx.cancel_reason())
    })
}

/// The `messages` stream of `ctx`'s run: each steering message, in order, as it arrives.
pub(crate) fn message_stream<S: AsContextMut>(
    store: S,
    ctx: &RunContext,
) -> wasmtime::Result<StreamReader<Vec<wit::ContentBlock>>>
where
    S::Data: Send + 'static,
{
    StreamReader::new(
        store,
        Messages {
            ctx: ctx.clone(),
            waiting: None,
        },
    )
}

/// Produces a run's steering messages for its `messages` stream.
struct Messages {
    ctx: RunContext,
    /// The wait for the next message, while the guest reads and none is queued.
    waiting: Option<BoxFuture<'static, ()>>,
}

impl<D> StreamProducer<D> for Messages {
    type Item = Vec<wit::ContentBlock>;
    type Buffer = Option<Self::Item>;

    fn poll_produce<'a>(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        _store: StoreContextMut<'a, D>,
        mut destination: Destination<'a, Self::Item, Self::Buffer>,
        finish: bool,
    ) -> Poll<wasmtime::Result<StreamResult>> {
        loop {
            if let Some(message) = self.ctx.next_message() {
                self.waiting = None;
                destination.set_buffer(Some(message.into_iter().map(Into::into).collect()));
                return Poll::Ready(Ok(StreamResult::Completed));
            }
            let ctx = self.ctx.clone();
            let waiting = self.waiting.get_or_insert_with(|| ctx.message_waiting());
            match waiting.as_mut().poll(cx) {
                // A message arrived: take it on the next turn of the loop.
                Poll::Ready(()) => self.waiting = None,
                Poll::Pending if finish => return Poll::Ready(Ok(StreamResult::Cancelled)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
