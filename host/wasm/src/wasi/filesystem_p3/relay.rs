//! The relay between a guest's `stream<u8>` and the stream wasmtime-wasi writes a file from:
//! each write the guest makes is counted against the quota ([`StreamQuota`]) and passed on, one
//! at a time. wasmtime-wasi takes the guest's stream whole (its file writer is private), so the
//! count sits between two streams: [`FromGuest`] reads the guest's, [`ToWriter`] feeds
//! wasmtime-wasi's.
//!
//! The guest's next write waits until the writer took the last one, so at most [`CHUNK`] bytes
//! are in flight per stream. A write the quota refuses is not passed on: the guest's stream is
//! told it was dropped (its write returns unwritten), the writer's stream ends, and [`Refused`]
//! says so for the call's outcome. Bytes passed on stay counted, whatever becomes of them.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use seam_core::sync::lock;
use std::pin::Pin;
use wasmtime::component::{Destination, Source, StreamConsumer, StreamProducer, StreamResult};
use wasmtime::StoreContextMut;

use crate::store::StoreData;
use crate::wasi::disk::StreamQuota;

/// Most bytes taken from the guest in one write: what is in flight per stream.
const CHUNK: usize = 64 << 10;

/// What the two ends share.
struct Shared {
    /// Counts the guest's writes.
    quota: StreamQuota,
    /// A write taken from the guest and counted, which the writer has not taken yet.
    bytes: Option<Bytes>,
    /// The guest closed its end: once `bytes` is taken, the writer's stream ends.
    guest_done: bool,
    /// The quota refused a write: both streams end.
    refused: bool,
    /// The writer is gone (the write failed, or the call refused the descriptor): the guest's
    /// writes go nowhere.
    writer_done: bool,
    /// The writer, waiting for a write.
    wake_writer: Option<Waker>,
    /// The guest, waiting for the writer to take the last write.
    wake_guest: Option<Waker>,
}

/// Reads the guest's stream.
pub struct FromGuest(Arc<Mutex<Shared>>);

/// Feeds wasmtime-wasi's file writer.
pub struct ToWriter(Arc<Mutex<Shared>>);

/// Whether the quota refused one of the stream's writes.
pub struct Refused(Arc<Mutex<Shared>>);

/// A relay counting with `quota`.
pub fn new(quota: StreamQuota) -> (FromGuest, ToWriter, Refused) {
    let shared = Arc::new(Mutex::new(Shared {
        quota,
        bytes: None,
        guest_done: false,
        refused: false,
        writer_done: false,
        wake_writer: None,
        wake_guest: None,
    }));
    (
        FromGuest(shared.clone()),
        ToWriter(shared.clone()),
        Refused(shared),
    )
}

impl Refused {
    /// Whether a write was refused.
    pub fn refused(&self) -> bool {
        lock(&self.0).refused
    }
}

/// Wakes `waker`, if one waits (after the lock is let go: a waker may run code of its own).
fn wake(waker: Option<Waker>) {
    if let Some(waker) = waker {
        waker.wake();
    }
}

impl StreamConsumer<StoreData> for FromGuest {
    type Item = u8;

    fn poll_consume(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        store: StoreContextMut<'_, StoreData>,
        source: Source<'_, u8>,
        finish: bool,
    ) -> Poll<wasmtime::Result<StreamResult>> {
        let mut shared = lock(&self.0);
        if shared.writer_done || shared.refused {
            return Poll::Ready(Ok(StreamResult::Dropped));
        }
        if shared.bytes.is_some() {
            // The writer has the last write still to take: the guest waits for it.
            if finish {
                return Poll::Ready(Ok(StreamResult::Cancelled));
            }
            shared.wake_guest = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let mut source = source.as_direct(store);
        let n = source.remaining().len().min(CHUNK);
        if n == 0 {
            // A zero-length write asks whether a write would be taken: it would.
            return Poll::Ready(Ok(StreamResult::Completed));
        }
        match shared.quota.charge(n) {
            Ok(counted) => shared.quota.advance(counted),
            Err(_) => {
                shared.refused = true;
                let writer = shared.wake_writer.take();
                drop(shared);
                wake(writer);
                return Poll::Ready(Ok(StreamResult::Dropped));
            }
        }
        shared.bytes = Some(Bytes::copy_from_slice(&source.remaining()[..n]));
        source.mark_read(n);
        let writer = shared.wake_writer.take();
        drop(shared);
        wake(writer);
        Poll::Ready(Ok(StreamResult::Completed))
    }
}

impl Drop for FromGuest {
    fn drop(&mut self) {
        let mut shared = lock(&self.0);
        shared.guest_done = true;
        let writer = shared.wake_writer.take();
        drop(shared);
        wake(writer);
    }
}

impl StreamProducer<StoreData> for ToWriter {
    type Item = u8;
    type Buffer = Bytes;

    fn poll_produce<'a>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut store: StoreContextMut<'a, StoreData>,
        mut destination: Destination<'a, u8, Bytes>,
        finish: bool,
    ) -> Poll<wasmtime::Result<StreamResult>> {
        let mut shared = lock(&self.0);
        if shared.bytes.is_some() {
            // A zero-length read asks whether bytes are ready: they are, and stay here.
            if destination.remaining(&mut store) == Some(0) {
                return Poll::Ready(Ok(StreamResult::Completed));
            }
            if let Some(bytes) = shared.bytes.take() {
                destination.set_buffer(bytes);
            }
            let guest = shared.wake_guest.take();
            drop(shared);
            wake(guest);
            return Poll::Ready(Ok(StreamResult::Completed));
        }
        if shared.guest_done || shared.refused {
            return Poll::Ready(Ok(StreamResult::Dropped));
        }
        if finish {
            return Poll::Ready(Ok(StreamResult::Cancelled));
        }
        shared.wake_writer = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for ToWriter {
    fn drop(&mut self) {
        let mut shared = lock(&self.0);
        shared.writer_done = true;
        let guest = shared.wake_guest.take();
        drop(shared);
        wake(guest);
    }
}
