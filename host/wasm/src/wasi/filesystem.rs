//! The disk quota of writable grants (`max_write_mb`, `max_files`) on top of wasmtime-wasi's
//! `wasi:filesystem/types@0.2` (`super::filesystem_p3` is 0.3's).
//!
//! wasmtime-wasi has no hook for a quota, so [`add_to_linker`] shadows, in the linker, every
//! function of `wasi:filesystem/types` that makes a plugin keep more on disk, counts against the
//! plugin's disk quota (shared by all its stores, counted by `super::disk` for both versions)
//! and delegates to wasmtime-wasi's own implementation:
//!
//! - `descriptor.write` counts its bytes, plus the hole it leaves when it starts past the end;
//! - `descriptor.set-size` counts the growth over the current size (a sparse file counts by its
//!   size);
//! - `descriptor.write-via-stream` counts the hole its offset leaves, and it and
//!   `append-via-stream` return their stream wrapped in a [`QuotaStream`], which counts every
//!   byte written through it (`write`, `blocking-write-and-flush`, the zeroes and `splice`, which
//!   all reach the stream object), plus the hole a write leaves past the file's end;
//! - `descriptor.open-at` with `create` counts a file when the path did not exist;
//!   `create-directory-at`, `symlink-at` and `link-at` count one each.
//!
//! A refused operation does nothing and fails with the error code `quota` (`EDQUOT` for a
//! guest's libc); a refused stream write fails with an error whose `filesystem-error-code` is
//! `quota` (this module shadows that function too). The counts only grow: deleting, truncating
//! or renaming gives nothing back, and an operation that fails for another reason gives back
//! what it counted. Only the first refusal of a plugin is logged (`warn`, naming the limit).

use bytes::Bytes;
use wasmtime::component::{Linker, Resource};
use wasmtime::StoreContextMut;
use wasmtime_wasi::filesystem::WasiFilesystemView;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self as fs, Descriptor, DescriptorFlags, ErrorCode, HostDescriptor, OpenFlags, PathFlags,
};
use wasmtime_wasi::p2::{
    DynOutputStream, FsError, OutputStream, Pollable, StreamError, StreamResult,
};

use super::disk::{self, Charge, Quota, QuotaExceeded, StreamQuota};
use crate::store::StoreData;

/// The instance wasmtime-wasi defines (`wasmtime_wasi::p2::add_to_linker_async`); components
/// importing an older 0.2 version are linked to it too.
const INTERFACE: &str = "wasi:filesystem/types@0.2.12";

type Store<'a> = StoreContextMut<'a, StoreData>;
type Answer<T> = wasmtime::Result<(Result<T, ErrorCode>,)>;

/// Shadows wasmtime-wasi's filesystem functions that grow what a plugin keeps on disk; call it
/// after `wasmtime_wasi::p2::add_to_linker_async`.
pub fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut types = linker.instance(INTERFACE)?;
    types.func_wrap_async(
        "[method]descriptor.write",
        |mut store: Store<'_>, (fd, buffer, offset): (Resource<Descriptor>, Vec<u8>, u64)| {
            Box::new(async move { write(store.data_mut(), fd, buffer, offset).await })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.set-size",
        |mut store: Store<'_>, (fd, size): (Resource<Descriptor>, u64)| {
            Box::new(async move { set_size(store.data_mut(), fd, size).await })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.write-via-stream",
        |mut store: Store<'_>, (fd, offset): (Resource<Descriptor>, u64)| {
            Box::new(async move { write_via_stream(store.data_mut(), fd, Some(offset)).await })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.append-via-stream",
        |mut store: Store<'_>, (fd,): (Resource<Descriptor>,)| {
            Box::new(async move { write_via_stream(store.data_mut(), fd, None).await })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store: Store<'_>,
         (fd, path_flags, path, open_flags, flags): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )| {
            Box::new(async move {
                open_at(store.data_mut(), fd, path_flags, path, open_flags, flags).await
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.create-directory-at",
        |mut store: Store<'_>, (fd, path): (Resource<Descriptor>, String)| {
            Box::new(async move {
                let data = store.data_mut();
                if let Err(code) = approve_write(data).await {
                    return Ok((Err(code),));
                }
                let charge = match quota(Quota::of(data).file()) {
                    Ok(charge) => charge,
                    Err(code) => return Ok((Err(code),)),
                };
                let done = data.filesystem().create_directory_at(fd, path).await;
                answer(done, charge)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.symlink-at",
        |mut store: Store<'_>, (fd, old, new): (Resource<Descriptor>, String, String)| {
            Box::new(async move {
                let data = store.data_mut();
                if let Err(code) = approve_write(data).await {
                    return Ok((Err(code),));
                }
                let charge = match quota(Quota::of(data).file()) {
                    Ok(charge) => charge,
                    Err(code) => return Ok((Err(code),)),
                };
                let done = data.filesystem().symlink_at(fd, old, new).await;
                answer(done, charge)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.link-at",
        |mut store: Store<'_>,
         (fd, old_flags, old, new_fd, new): (
            Resource<Descriptor>,
            PathFlags,
            String,
            Resource<Descriptor>,
            String,
        )| {
            Box::new(async move {
                let data = store.data_mut();
                if let Err(code) = approve_write(data).await {
                    return Ok((Err(code),));
                }
                let charge = match quota(Quota::of(data).file()) {
                    Ok(charge) => charge,
                    Err(code) => return Ok((Err(code),)),
                };
                let done = data
                    .filesystem()
                    .link_at(fd, old_flags, old, new_fd, new)
                    .await;
                answer(done, charge)
            })
        },
    )?;
    // Removing and renaming change the directories too: they wait for the same yes.
    types.func_wrap_async(
        "[method]descriptor.unlink-file-at",
        |mut store: Store<'_>, (fd, path): (Resource<Descriptor>, String)| {
            Box::new(async move {
                let data = store.data_mut();
                if let Err(code) = approve_write(data).await {
                    return Ok((Err(code),));
                }
                let charge = Charge::none(&Quota::of(data));
                answer(data.filesystem().unlink_file_at(fd, path).await, charge)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.remove-directory-at",
        |mut store: Store<'_>, (fd, path): (Resource<Descriptor>, String)| {
            Box::new(async move {
                let data = store.data_mut();
                if let Err(code) = approve_write(data).await {
                    return Ok((Err(code),));
                }
                let charge = Charge::none(&Quota::of(data));
                answer(
                    data.filesystem().remove_directory_at(fd, path).await,
                    charge,
                )
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.rename-at",
        |mut store: Store<'_>,
         (fd, old, new_fd, new): (Resource<Descriptor>, String, Resource<Descriptor>, String)| {
            Box::new(async move {
                let data = store.data_mut();
                if let Err(code) = approve_write(data).await {
                    return Ok((Err(code),));
                }
                let charge = Charge::none(&Quota::of(data));
                answer(data.filesystem().rename_at(fd, old, new_fd, new).await, charge)
            })
        },
    )?;
    types.func_wrap(
        "filesystem-error-code",
        |mut store: Store<'_>, (err,): (Resource<wasmtime::Error>,)| {
            let data = store.data_mut();
            if data.table().get(&err)?.is::<QuotaExceeded>() {
                return Ok((Some(ErrorCode::Quota),));
            }
            Ok((fs::Host::filesystem_error_code(
                &mut data.filesystem(),
                err,
            )?,))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Waits for the yes `[approvals] write` asks before a call or run first changes its
/// directories; `Err` with the code a refusal answers. The future holds nothing of `data`.
fn approve_write(data: &StoreData) -> impl std::future::Future<Output = Result<(), ErrorCode>> {
    let approval = disk::approve_write(data);
    async move { approval.await.map_err(|_| ErrorCode::NotPermitted) }
}

/// The guest's answer to a delegated call: its error as an error code (or a trap), after
/// `charge` gave back what a failed call had counted.
fn answer<T>(done: Result<T, FsError>, charge: Charge) -> Answer<T> {
    match charge.settle(done) {
        Ok(value) => Ok((Ok(value),)),
        Err(e) => Ok((Err(e.downcast()?),)),
    }
}

/// `quota` for a charge the quota refused.
fn quota<T>(charged: Result<T, QuotaExceeded>) -> Result<T, ErrorCode> {
    charged.map_err(|QuotaExceeded| ErrorCode::Quota)
}

/// The size of the file `fd` is open on.
async fn size(data: &mut StoreData, fd: &Resource<Descriptor>) -> Result<u64, FsError> {
    let stat = data
        .filesystem()
        .stat(Resource::new_borrow(fd.rep()))
        .await?;
    Ok(stat.size)
}

async fn write(
    data: &mut StoreData,
    fd: Resource<Descriptor>,
    buffer: Vec<u8>,
    offset: u64,
) -> Answer<u64> {
    let size = match size(data, &fd).await {
        Ok(size) => size,
        Err(e) => return Ok((Err(e.downcast()?),)),
    };
    let bytes = disk::len(buffer.len());
    let asked = bytes.saturating_add(offset.saturating_sub(size));
    let mut charge = match quota(Quota::of(data).bytes(asked)) {
        Ok(charge) => charge,
        Err(code) => return Ok((Err(code),)),
    };
    let done = data.filesystem().write(fd, buffer, offset).await;
    if let Ok(written) = done {
        // A short write keeps only what it wrote.
        charge.refund_bytes(bytes.saturating_sub(written));
    }
    answer(done, charge)
}

async fn set_size(data: &mut StoreData, fd: Resource<Descriptor>, new: u64) -> Answer<()> {
    let size = match size(data, &fd).await {
        Ok(size) => size,
        Err(e) => return Ok((Err(e.downcast()?),)),
    };
    let charge = match quota(Quota::of(data).bytes(new.saturating_sub(size))) {
        Ok(charge) => charge,
        Err(code) => return Ok((Err(code),)),
    };
    let done = data.filesystem().set_size(fd, new).await;
    answer(done, charge)
}

/// `write-via-stream` at `offset`, or `append-via-stream` without one.
async fn write_via_stream(
    data: &mut StoreData,
    fd: Resource<Descriptor>,
    offset: Option<u64>,
) -> Answer<Resource<DynOutputStream>> {
    let quota_of = Quota::of(data);
    let mut hole = Charge::none(&quota_of);
    if let Some(offset) = offset {
        let size = match size(data, &fd).await {
            Ok(size) => size,
            Err(e) => return Ok((Err(e.downcast()?),)),
        };
        // Counted now, so that the call (not a later write) is refused with `quota`.
        hole = match quota(quota_of.bytes(offset.saturating_sub(size))) {
            Ok(charge) => charge,
            Err(code) => return Ok((Err(code),)),
        };
    }
    // The file, for a stream at an offset: its writes past the end count the hole they leave.
    let file = match (offset, data.filesystem().table.get(&fd)?) {
        (Some(offset), Descriptor::File(f)) => Some((f.file.clone(), offset)),
        _ => None,
    };
    let done = match offset {
        Some(offset) => data.filesystem().write_via_stream(fd, offset),
        None => data.filesystem().append_via_stream(fd),
    };
    let stream = match done {
        Ok(stream) => stream,
        Err(e) => {
            hole.refund();
            return Ok((Err(e.downcast()?),));
        }
    };
    hole.keep();
    // The stream is no child of anything yet: take it out and put the wrapped one back.
    let inner = data.table().delete(stream)?;
    let wrapped: DynOutputStream = Box::new(QuotaStream {
        inner,
        // The hole up to the offset is counted: the stream counts from there.
        quota: StreamQuota::new(quota_of, file, offset.unwrap_or(0)),
    });
    Ok((Ok(data.table().push(wrapped)?),))
}

/// A file's output stream that counts what is written through it against the quota.
struct QuotaStream {
    inner: DynOutputStream,
    quota: StreamQuota,
}

impl QuotaStream {
    /// Counts a write of `bytes`, or refuses it with an error `filesystem-error-code` reads as
    /// `quota`.
    fn charge(&mut self, bytes: usize) -> StreamResult<u64> {
        self.quota
            .charge(bytes)
            .map_err(|e| StreamError::LastOperationFailed(wasmtime::Error::new(e)))
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for QuotaStream {
    async fn ready(&mut self) {
        self.inner.ready().await;
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for QuotaStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        let n = self.charge(bytes.len())?;
        self.inner.write(bytes)?;
        self.quota.advance(n);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        self.inner.check_write()
    }

    async fn blocking_write_and_flush(&mut self, bytes: Bytes) -> StreamResult<()> {
        let n = self.charge(bytes.len())?;
        self.inner.blocking_write_and_flush(bytes).await?;
        self.quota.advance(n);
        Ok(())
    }

    fn write_zeroes(&mut self, nelem: usize) -> StreamResult<()> {
        let n = self.charge(nelem)?;
        self.inner.write_zeroes(nelem)?;
        self.quota.advance(n);
        Ok(())
    }

    async fn write_ready(&mut self) -> StreamResult<usize> {
        self.inner.write_ready().await
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await;
    }
}

async fn open_at(
    data: &mut StoreData,
    fd: Resource<Descriptor>,
    path_flags: PathFlags,
    path: String,
    open_flags: OpenFlags,
    flags: DescriptorFlags,
) -> Answer<Resource<Descriptor>> {
    let writes = flags.contains(DescriptorFlags::WRITE)
        || open_flags.intersects(OpenFlags::CREATE | OpenFlags::TRUNCATE);
    // The first write of a call or run waits for a yes when `[approvals] write` asks.
    if writes {
        if let Err(code) = approve_write(data).await {
            return Ok((Err(code),));
        }
    }
    let quota_of = Quota::of(data);
    let mut charge = Charge::none(&quota_of);
    if open_flags.contains(OpenFlags::CREATE) {
        // A path that is there already is opened, not created (a race with another store
        // creating it only counts one file too many).
        let exists = !open_flags.contains(OpenFlags::EXCLUSIVE)
            && data
                .filesystem()
                .stat_at(Resource::new_borrow(fd.rep()), path_flags, path.clone())
                .await
                .is_ok();
        if !exists {
            charge = match quota(quota_of.file()) {
                Ok(charge) => charge,
                Err(code) => return Ok((Err(code),)),
            };
        }
    }
    let done = data
        .filesystem()
        .open_at(fd, path_flags, path, open_flags, flags)
        .await;
    answer(done, charge)
}
