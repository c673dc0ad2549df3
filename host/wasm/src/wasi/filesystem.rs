//! The disk quota of writable grants (`max_write_mb`, `max_files`) on top of wasmtime-wasi's
//! `wasi:filesystem/types`.
//!
//! wasmtime-wasi has no hook for a quota, so [`add_to_linker`] shadows, in the linker, every
//! function of `wasi:filesystem/types` that makes a plugin keep more on disk, counts against the
//! plugin's [`DiskQuota`] (shared by all its stores) and delegates to wasmtime-wasi's own
//! implementation:
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

use std::sync::Arc;

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

use crate::sandbox::{DiskQuota, Limit, LimitHit};
use crate::store::StoreData;

/// The instance wasmtime-wasi defines (`wasmtime_wasi::p2::add_to_linker_async`); components
/// importing an older 0.2 version are linked to it too.
const INTERFACE: &str = "wasi:filesystem/types@0.2.12";

/// The error of a stream write the quota refused; `filesystem-error-code` reads it as `quota`.
#[derive(Debug, thiserror::Error)]
#[error("disk quota exceeded")]
struct QuotaExceeded;

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
                let disk = data.disk.clone();
                if let Err(e) = refuse(data, disk.charge_file()) {
                    return Ok((Err(e),));
                }
                let done = data.filesystem().create_directory_at(fd, path).await;
                answer(done, || disk.refund_file())
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
                let disk = data.disk.clone();
                if let Err(e) = refuse(data, disk.charge_file()) {
                    return Ok((Err(e),));
                }
                let done = data.filesystem().symlink_at(fd, old, new).await;
                answer(done, || disk.refund_file())
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
                let disk = data.disk.clone();
                if let Err(e) = refuse(data, disk.charge_file()) {
                    return Ok((Err(e),));
                }
                let done = data
                    .filesystem()
                    .link_at(fd, old_flags, old, new_fd, new)
                    .await;
                answer(done, || disk.refund_file())
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
                answer(data.filesystem().unlink_file_at(fd, path).await, || ())
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
                answer(data.filesystem().remove_directory_at(fd, path).await, || ())
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
                answer(
                    data.filesystem().rename_at(fd, old, new_fd, new).await,
                    || (),
                )
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
/// directories; `Err` with the code a refusal answers.
fn approve_write(data: &StoreData) -> impl std::future::Future<Output = Result<(), ErrorCode>> {
    let approvals = data
        .approvals
        .clone()
        .filter(|a| a.needs(seam_core::approval::GrantClass::Write));
    let plugin = data.plugin.clone();
    async move {
        let Some(approvals) = approvals else {
            return Ok(());
        };
        approvals.check_write().await.map_err(|refused| {
            tracing::warn!(plugin = %plugin, "{refused}");
            ErrorCode::NotPermitted
        })
    }
}

/// The guest's answer to a delegated call: its error as an error code (or a trap), after
/// `undo` gave back what a failed call had counted.
fn answer<T>(done: Result<T, FsError>, undo: impl FnOnce()) -> Answer<T> {
    match done {
        Ok(value) => Ok((Ok(value),)),
        Err(e) => {
            undo();
            Ok((Err(e.downcast()?),))
        }
    }
}

/// `quota` for a refused charge, logging the plugin's first refusal.
fn refuse(data: &StoreData, charged: Result<(), Limit>) -> Result<(), ErrorCode> {
    charged.map_err(|limit| {
        refused(&data.plugin, &data.disk, limit);
        ErrorCode::Quota
    })
}

fn refused(plugin: &str, disk: &DiskQuota, limit: Limit) {
    if disk.first_refusal() {
        let hit = LimitHit::new(plugin, limit);
        tracing::warn!(
            plugin = %plugin,
            limit = hit.limit.key(),
            "{hit} (refused with the error `quota`; later refusals are not logged)"
        );
    }
}

/// The size of the file `fd` is open on.
async fn size(data: &mut StoreData, fd: &Resource<Descriptor>) -> Result<u64, FsError> {
    let stat = data
        .filesystem()
        .stat(Resource::new_borrow(fd.rep()))
        .await?;
    Ok(stat.size)
}

fn len(bytes: usize) -> u64 {
    u64::try_from(bytes).unwrap_or(u64::MAX)
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
    let bytes = len(buffer.len());
    let asked = bytes.saturating_add(offset.saturating_sub(size));
    let disk = data.disk.clone();
    if let Err(e) = refuse(data, disk.charge_bytes(asked)) {
        return Ok((Err(e),));
    }
    let done = data.filesystem().write(fd, buffer, offset).await;
    if let Ok(written) = done {
        // A short write keeps only what it wrote.
        disk.refund_bytes(bytes.saturating_sub(written));
    }
    answer(done, || disk.refund_bytes(asked))
}

async fn set_size(data: &mut StoreData, fd: Resource<Descriptor>, new: u64) -> Answer<()> {
    let size = match size(data, &fd).await {
        Ok(size) => size,
        Err(e) => return Ok((Err(e.downcast()?),)),
    };
    let asked = new.saturating_sub(size);
    let disk = data.disk.clone();
    if let Err(e) = refuse(data, disk.charge_bytes(asked)) {
        return Ok((Err(e),));
    }
    let done = data.filesystem().set_size(fd, new).await;
    answer(done, || disk.refund_bytes(asked))
}

/// `write-via-stream` at `offset`, or `append-via-stream` without one.
async fn write_via_stream(
    data: &mut StoreData,
    fd: Resource<Descriptor>,
    offset: Option<u64>,
) -> Answer<Resource<DynOutputStream>> {
    let disk = data.disk.clone();
    let mut hole = 0;
    if let Some(offset) = offset {
        hole = match size(data, &fd).await {
            Ok(size) => offset.saturating_sub(size),
            Err(e) => return Ok((Err(e.downcast()?),)),
        };
        if let Err(e) = refuse(data, disk.charge_bytes(hole)) {
            return Ok((Err(e),));
        }
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
            disk.refund_bytes(hole);
            return Ok((Err(e.downcast()?),));
        }
    };
    // The stream is no child of anything yet: take it out and put the wrapped one back.
    let inner = data.table().delete(stream)?;
    let wrapped: DynOutputStream = Box::new(QuotaStream {
        inner,
        disk,
        plugin: data.plugin.clone(),
        at: file,
    });
    Ok((Ok(data.table().push(wrapped)?),))
}

/// A file's output stream that counts what is written through it against the quota.
struct QuotaStream {
    inner: DynOutputStream,
    disk: Arc<DiskQuota>,
    plugin: Arc<str>,
    /// For a stream writing at an offset: the file and where the next write goes, so that a
    /// write past the file's end counts the hole it leaves. `None` when appending.
    at: Option<(Arc<std::fs::File>, u64)>,
}

impl QuotaStream {
    /// Counts a write of `bytes`, or refuses it.
    fn charge(&mut self, bytes: usize) -> StreamResult<u64> {
        let bytes = len(bytes);
        let hole = match &self.at {
            Some((file, at)) => {
                let size = file.metadata().map_or(*at, |m| m.len());
                at.saturating_sub(size)
            }
            None => 0,
        };
        let asked = bytes.saturating_add(hole);
        self.disk.charge_bytes(asked).map_err(|limit| {
            refused(&self.plugin, &self.disk, limit);
            StreamError::LastOperationFailed(wasmtime::Error::new(QuotaExceeded))
        })?;
        Ok(bytes)
    }

    /// After a write of `bytes` went through: the next one goes after it.
    fn advance(&mut self, bytes: u64) {
        if let Some((_, at)) = &mut self.at {
            *at = at.saturating_add(bytes);
        }
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
        self.advance(n);
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
        self.advance(n);
        Ok(())
    }

    fn write_zeroes(&mut self, nelem: usize) -> StreamResult<()> {
        let n = self.charge(nelem)?;
        self.inner.write_zeroes(nelem)?;
        self.advance(n);
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
    let disk = data.disk.clone();
    let writes = flags.contains(DescriptorFlags::WRITE)
        || open_flags.intersects(OpenFlags::CREATE | OpenFlags::TRUNCATE);
    // The first write of a call or run waits for a yes when `[approvals] write` asks.
    if writes {
        if let Err(code) = approve_write(data).await {
            return Ok((Err(code),));
        }
    }
    let mut counted = false;
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
            if let Err(e) = refuse(data, disk.charge_file()) {
                return Ok((Err(e),));
            }
            counted = true;
        }
    }
    let done = data
        .filesystem()
        .open_at(fd, path_flags, path, open_flags, flags)
        .await;
    answer(done, || {
        if counted {
            disk.refund_file();
        }
    })
}
