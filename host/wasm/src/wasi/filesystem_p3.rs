//! The disk quota of writable grants (`max_write_mb`, `max_files`) on top of wasmtime-wasi's
//! WASI 0.3 `wasi:filesystem/types` (`super::filesystem` is 0.2's; `super::disk` counts for
//! both).
//!
//! [`add_to_linker`] shadows the functions of `wasi:filesystem/types@0.3` that make a plugin
//! keep more on disk, counts what they keep as 0.2's shadows do, and delegates to wasmtime-wasi:
//!
//! - `descriptor.write-via-stream` and `append-via-stream` take the guest's `stream<u8>`; the
//!   shadow hands wasmtime-wasi a stream of its own instead and relays the guest's bytes into
//!   it ([`relay`]), counting each write (plus the hole one leaves past the file's end) before
//!   passing it on. A write the quota refuses ends the guest's stream there, and the call's
//!   `future<result>` answers `quota`;
//! - `descriptor.set-size` counts the growth over the current size;
//! - `descriptor.open-at` with `create` counts a file when the path did not exist;
//!   `create-directory-at`, `symlink-at` and `link-at` count one each.
//!
//! As 0.2's do, `open-at` for writing, `create-directory-at`, `symlink-at`, `link-at`,
//! `unlink-file-at`, `remove-directory-at` and `rename-at` first wait for the yes
//! `[approvals] write` asks. 0.3 has no `descriptor.write` (writes go through streams) and no
//! `filesystem-error-code` (a stream's error is its `future`'s), so neither is shadowed.

mod relay;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::oneshot;
use wasmtime::component::{
    Access, Accessor, FutureConsumer, FutureReader, Linker, Resource, Source, StreamReader,
};
use wasmtime::{AsContextMut, StoreContextMut};
use wasmtime_wasi::filesystem::{
    Descriptor, WasiFilesystem, WasiFilesystemCtxView, WasiFilesystemView,
};
use wasmtime_wasi::p3::bindings::filesystem::types::{
    DescriptorFlags, ErrorCode, HostDescriptorWithStore as Fs, OpenFlags, PathFlags,
};
use wasmtime_wasi::p3::filesystem::FilesystemResult;

use super::disk::{self, Charge, Quota, QuotaExceeded, StreamQuota};
use crate::store::StoreData;

/// The instance wasmtime-wasi defines (`wasmtime_wasi::p3::add_to_linker`); components importing
/// a later 0.3 version (`wasip3` binds 0.3.2) are linked to it too.
const INTERFACE: &str = "wasi:filesystem/types@0.3.0";

type Answer<T> = wasmtime::Result<(Result<T, ErrorCode>,)>;
type Shadowed<'a, T> = Pin<Box<dyn Future<Output = Answer<T>> + Send + 'a>>;
/// What a write-via-stream answers: the write's outcome, once its stream ends.
type Written = FutureReader<Result<(), ErrorCode>>;

/// The store's filesystem, as wasmtime-wasi's 0.3 functions take it.
fn filesystem(data: &mut StoreData) -> WasiFilesystemCtxView<'_> {
    data.filesystem()
}

/// `accessor`, seeing the store's filesystem.
fn fs(accessor: &Accessor<StoreData>) -> Accessor<StoreData, WasiFilesystem> {
    accessor.with_getter::<WasiFilesystem>(filesystem)
}

/// Shadows wasmtime-wasi's 0.3 filesystem functions that grow what a plugin keeps on disk or
/// change its directories; call it after `wasmtime_wasi::p3::add_to_linker`.
pub fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut types = linker.instance(INTERFACE)?;
    types.func_wrap(
        "[method]descriptor.write-via-stream",
        |store: StoreContextMut<'_, StoreData>,
         (fd, data, offset): (Resource<Descriptor>, StreamReader<u8>, u64)| {
            Ok((write_via_stream(store, fd, data, Some(offset))?,))
        },
    )?;
    types.func_wrap(
        "[method]descriptor.append-via-stream",
        |store: StoreContextMut<'_, StoreData>,
         (fd, data): (Resource<Descriptor>, StreamReader<u8>)| {
            Ok((write_via_stream(store, fd, data, None)?,))
        },
    )?;
    types.func_wrap_concurrent(
        "[method]descriptor.set-size",
        |accessor: &Accessor<StoreData>,
         (fd, size): (Resource<Descriptor>, u64)|
         -> Shadowed<'_, ()> { Box::pin(set_size(accessor, fd, size)) },
    )?;
    types.func_wrap_concurrent(
        "[method]descriptor.open-at",
        |accessor: &Accessor<StoreData>,
         (fd, path_flags, path, open_flags, flags): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )|
         -> Shadowed<'_, Resource<Descriptor>> {
            Box::pin(open_at(accessor, fd, path_flags, path, open_flags, flags))
        },
    )?;
    types.func_wrap_concurrent(
        "[method]descriptor.create-directory-at",
        |accessor: &Accessor<StoreData>,
         (fd, path): (Resource<Descriptor>, String)|
         -> Shadowed<'_, ()> {
            Box::pin(async move {
                let fs = fs(accessor);
                let call = Fs::create_directory_at(&fs, fd, path);
                counted(accessor, Counts::OneMore, call).await
            })
        },
    )?;
    types.func_wrap_concurrent(
        "[method]descriptor.symlink-at",
        |accessor: &Accessor<StoreData>,
         (fd, old, new): (Resource<Descriptor>, String, String)|
         -> Shadowed<'_, ()> {
            Box::pin(async move {
                let fs = fs(accessor);
                let call = Fs::symlink_at(&fs, fd, old, new);
                counted(accessor, Counts::OneMore, call).await
            })
        },
    )?;
    types.func_wrap_concurrent(
        "[method]descriptor.link-at",
        |accessor: &Accessor<StoreData>,
         (fd, old_flags, old, new_fd, new): (
            Resource<Descriptor>,
            PathFlags,
            String,
            Resource<Descriptor>,
            String,
        )|
         -> Shadowed<'_, ()> {
            Box::pin(async move {
                let fs = fs(accessor);
                let call = Fs::link_at(&fs, fd, old_flags, old, new_fd, new);
                counted(accessor, Counts::OneMore, call).await
            })
        },
    )?;
    // Removing and renaming change the directories too: they wait for the same yes.
    types.func_wrap_concurrent(
        "[method]descriptor.unlink-file-at",
        |accessor: &Accessor<StoreData>,
         (fd, path): (Resource<Descriptor>, String)|
         -> Shadowed<'_, ()> {
            Box::pin(async move {
                let fs = fs(accessor);
                let call = Fs::unlink_file_at(&fs, fd, path);
                counted(accessor, Counts::Nothing, call).await
            })
        },
    )?;
    types.func_wrap_concurrent(
        "[method]descriptor.remove-directory-at",
        |accessor: &Accessor<StoreData>,
         (fd, path): (Resource<Descriptor>, String)|
         -> Shadowed<'_, ()> {
            Box::pin(async move {
                let fs = fs(accessor);
                let call = Fs::remove_directory_at(&fs, fd, path);
                counted(accessor, Counts::Nothing, call).await
            })
        },
    )?;
    types.func_wrap_concurrent(
        "[method]descriptor.rename-at",
        |accessor: &Accessor<StoreData>,
         (fd, old, new_fd, new): (Resource<Descriptor>, String, Resource<Descriptor>, String)|
         -> Shadowed<'_, ()> {
            Box::pin(async move {
                let fs = fs(accessor);
                let call = Fs::rename_at(&fs, fd, old, new_fd, new);
                counted(accessor, Counts::Nothing, call).await
            })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// What a call that changes the directories adds to the quota.
enum Counts {
    /// One more file, directory or link.
    OneMore,
    /// Nothing (removing, renaming).
    Nothing,
}

/// Waits for the yes `[approvals] write` asks and counts what `counts` says, then makes `call`
/// (wasmtime-wasi's function) and answers with its outcome, giving the count back if it failed.
/// `call` is an `async fn`'s future, which does nothing before it is awaited: nothing of it
/// runs unless the write was allowed and counted.
async fn counted<T>(
    accessor: &Accessor<StoreData>,
    counts: Counts,
    call: impl Future<Output = FilesystemResult<T>>,
) -> Answer<T> {
    let charge = match counts {
        Counts::OneMore => creates(accessor).await,
        Counts::Nothing => approved(accessor).await.map(|quota| Charge::none(&quota)),
    };
    match charge {
        Ok(charge) => answer(call.await, charge),
        Err(code) => Ok((Err(code),)),
    }
}

/// The store's quota, once the yes `[approvals] write` asks (if it does) came; `not-permitted`
/// when it was refused. Awaited outside any store access: asking may take a person's time.
async fn approved(accessor: &Accessor<StoreData>) -> Result<Quota, ErrorCode> {
    let (quota, approval) = accessor.with(|mut access| {
        let data = access.data_mut();
        (Quota::of(data), disk::approve_write(data))
    });
    approval.await.map_err(|_| ErrorCode::NotPermitted)?;
    Ok(quota)
}

/// One more file, directory or link counted, once approved.
async fn creates(accessor: &Accessor<StoreData>) -> Result<Charge, ErrorCode> {
    approved(accessor).await?.file().map_err(quota)
}

/// `quota`, for a charge the quota refused.
fn quota(QuotaExceeded: QuotaExceeded) -> ErrorCode {
    ErrorCode::Quota
}

/// The guest's answer to a delegated call: its error as an error code (or a trap), after
/// `charge` gave back what a failed call had counted.
fn answer<T>(done: FilesystemResult<T>, charge: Charge) -> Answer<T> {
    match charge.settle(done) {
        Ok(value) => Ok((Ok(value),)),
        Err(e) => Ok((Err(e.downcast()?),)),
    }
}

async fn set_size(
    accessor: &Accessor<StoreData>,
    fd: Resource<Descriptor>,
    new: u64,
) -> Answer<()> {
    let size = match Fs::stat(&fs(accessor), Resource::new_borrow(fd.rep())).await {
        Ok(stat) => stat.size,
        Err(e) => return Ok((Err(e.downcast()?),)),
    };
    let quota = accessor.with(|mut access| Quota::of(access.data_mut()));
    // A sparse file counts by its size.
    let charge = match quota.bytes(new.saturating_sub(size)) {
        Ok(charge) => charge,
        Err(e) => return Ok((Err(self::quota(e)),)),
    };
    answer(Fs::set_size(&fs(accessor), fd, new).await, charge)
}

async fn open_at(
    accessor: &Accessor<StoreData>,
    fd: Resource<Descriptor>,
    path_flags: PathFlags,
    path: String,
    open_flags: OpenFlags,
    flags: DescriptorFlags,
) -> Answer<Resource<Descriptor>> {
    let writes = flags.contains(DescriptorFlags::WRITE)
        || open_flags.intersects(OpenFlags::CREATE | OpenFlags::TRUNCATE);
    // The first write of a call or run waits for a yes when `[approvals] write` asks.
    let quota = if writes {
        match approved(accessor).await {
            Ok(quota) => quota,
            Err(code) => return Ok((Err(code),)),
        }
    } else {
        accessor.with(|mut access| Quota::of(access.data_mut()))
    };
    let mut charge = Charge::none(&quota);
    if open_flags.contains(OpenFlags::CREATE) {
        // A path that is there already is opened, not created (a race with another store
        // creating it only counts one file too many).
        let exists = !open_flags.contains(OpenFlags::EXCLUSIVE)
            && Fs::stat_at(
                &fs(accessor),
                Resource::new_borrow(fd.rep()),
                path_flags,
                path.clone(),
            )
            .await
            .is_ok();
        if !exists {
            charge = match quota.file() {
                Ok(charge) => charge,
                Err(e) => return Ok((Err(self::quota(e)),)),
            };
        }
    }
    let done = Fs::open_at(&fs(accessor), fd, path_flags, path, open_flags, flags).await;
    answer(done, charge)
}

/// `write-via-stream` at `offset`, or `append-via-stream` without one: wasmtime-wasi writes
/// what the relay passes on of the guest's stream, and the guest's `future` is the write's
/// outcome, or `quota` when the relay refused a write.
fn write_via_stream(
    mut store: StoreContextMut<'_, StoreData>,
    fd: Resource<Descriptor>,
    data: StreamReader<u8>,
    offset: Option<u64>,
) -> wasmtime::Result<Written> {
    // Only a file is written; anything else goes to wasmtime-wasi as it came, which refuses it.
    let file = match store.data_mut().filesystem().table.get(&fd)? {
        Descriptor::File(f) => Some(f.file.clone()),
        Descriptor::Dir(_) => None,
    };
    let Some(file) = file else {
        return delegate(store, fd, data, offset);
    };
    let quota = Quota::of(store.data());
    // Nothing is counted yet: the first write counts the hole the offset leaves.
    let counting = StreamQuota::new(quota, offset.map(|at| (file, at)), 0);
    let (from_guest, to_writer, refused) = relay::new(counting);
    data.pipe(&mut store, from_guest)?;
    let relayed = StreamReader::new(&mut store, to_writer)?;
    let written = delegate(store.as_context_mut(), fd, relayed, offset)?;
    let (outcome, told) = oneshot::channel();
    written.pipe(&mut store, Outcome(Some(outcome)))?;
    FutureReader::new(&mut store, async move {
        // Its writer gone without a word: the write did not finish.
        let outcome = told.await.unwrap_or(Err(ErrorCode::Io));
        Ok::<_, wasmtime::Error>(if refused.refused() {
            Err(ErrorCode::Quota)
        } else {
            outcome
        })
    })
}

/// wasmtime-wasi's own `write-via-stream` (at `offset`) or `append-via-stream`.
fn delegate(
    store: StoreContextMut<'_, StoreData>,
    fd: Resource<Descriptor>,
    data: StreamReader<u8>,
    offset: Option<u64>,
) -> wasmtime::Result<Written> {
    let access = Access::<StoreData, WasiFilesystem>::new(store, filesystem);
    match offset {
        Some(offset) => Fs::write_via_stream(access, fd, data, offset),
        None => Fs::append_via_stream(access, fd, data),
    }
}

/// Takes the outcome of wasmtime-wasi's write off its `future`, for the guest's.
struct Outcome(Option<oneshot::Sender<Result<(), ErrorCode>>>);

impl FutureConsumer<StoreData> for Outcome {
    type Item = Result<(), ErrorCode>;

    fn poll_consume(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        store: StoreContextMut<'_, StoreData>,
        mut source: Source<'_, Self::Item>,
        _: bool,
    ) -> Poll<wasmtime::Result<()>> {
        let mut outcome = None;
        source.read(store, &mut outcome)?;
        if let (Some(tell), Some(outcome)) = (self.0.take(), outcome) {
            // The guest's future may be gone already; then nobody asks.
            let _ = tell.send(outcome);
        }
        Poll::Ready(Ok(()))
    }
}
