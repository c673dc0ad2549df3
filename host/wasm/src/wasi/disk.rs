//! The counting behind the disk quota of writable grants (`max_write_mb`, `max_files`), one
//! implementation for the shadows of both WASI versions' filesystems ([`super::filesystem`] for
//! 0.2, [`super::filesystem_p3`] for 0.3), which decide what an operation charges and answer
//! with their own version's error codes:
//!
//! - [`Quota`] charges bytes or files against the plugin's [`DiskQuota`] (shared by all its
//!   stores), logging the plugin's first refusal, and [`Charge`] gives back what an operation
//!   that then failed had counted;
//! - [`StreamQuota`] counts what a write stream writes, plus the hole a write leaves past the
//!   file's end;
//! - [`approve_write`] waits for the yes `[approvals] write` asks before a call or run first
//!   changes its directories.
//!
//! The counts only grow: deleting, truncating or renaming gives nothing back.

use std::future::Future;
use std::sync::Arc;

use crate::sandbox::{DiskQuota, Limit, LimitHit};
use crate::store::StoreData;

/// The quota refused a charge; each version answers it with its error code `quota`.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("disk quota exceeded")]
pub struct QuotaExceeded;

/// `[approvals] write` was asked and refused; each version answers `not-permitted`.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the write was not approved")]
pub struct WriteRefused;

/// One plugin's disk quota, as a store's filesystem shadows charge it.
#[derive(Clone)]
pub struct Quota {
    disk: Arc<DiskQuota>,
    plugin: Arc<str>,
}

/// What one operation counted, to give back if it then fails for another reason.
#[must_use = "a charge is kept, or refunded when its operation failed"]
pub struct Charge {
    disk: Arc<DiskQuota>,
    bytes: u64,
    files: u64,
}

impl Quota {
    /// The quota of the plugin `data`'s store belongs to.
    pub fn of(data: &StoreData) -> Self {
        Self {
            disk: data.disk.clone(),
            plugin: data.plugin.clone(),
        }
    }

    /// Counts `bytes` more, or nothing when the quota refuses them.
    pub fn bytes(&self, bytes: u64) -> Result<Charge, QuotaExceeded> {
        self.settle(self.disk.charge_bytes(bytes))?;
        Ok(Charge {
            disk: self.disk.clone(),
            bytes,
            files: 0,
        })
    }

    /// Counts one more file (or directory, or link), or nothing when the quota refuses it.
    pub fn file(&self) -> Result<Charge, QuotaExceeded> {
        self.settle(self.disk.charge_file())?;
        Ok(Charge {
            disk: self.disk.clone(),
            bytes: 0,
            files: 1,
        })
    }

    /// A charge's outcome, logging the plugin's first refusal (later ones would flood the log:
    /// a guest writing in a loop is refused on every write).
    fn settle(&self, charged: Result<(), Limit>) -> Result<(), QuotaExceeded> {
        charged.map_err(|limit| {
            if self.disk.first_refusal() {
                let hit = LimitHit::new(&self.plugin, limit);
                tracing::warn!(
                    plugin = %self.plugin,
                    limit = hit.limit.key(),
                    "{hit} (refused with the error `quota`; later refusals are not logged)"
                );
            }
            QuotaExceeded
        })
    }
}

impl Charge {
    /// Nothing counted: for an operation that charges nothing.
    pub fn none(quota: &Quota) -> Self {
        Self {
            disk: quota.disk.clone(),
            bytes: 0,
            files: 0,
        }
    }

    /// Gives back all it counted: its operation failed.
    pub fn refund(self) {
        self.disk.refund_bytes(self.bytes);
        for _ in 0..self.files {
            self.disk.refund_file();
        }
    }

    /// Gives back `bytes` of it, which its operation did not write (a short write).
    pub fn refund_bytes(&mut self, bytes: u64) {
        let bytes = bytes.min(self.bytes);
        self.disk.refund_bytes(bytes);
        self.bytes -= bytes;
    }

    /// Keeps what it counted: its operation went through.
    pub fn keep(self) {}

    /// Keeps what it counted if `done` (its operation's outcome) succeeded, gives it back if
    /// it failed; returns `done`.
    pub fn settle<T, E>(self, done: Result<T, E>) -> Result<T, E> {
        match &done {
            Ok(_) => self.keep(),
            Err(_) => self.refund(),
        }
        done
    }
}

/// `bytes` as a count of the quota's.
pub fn len(bytes: usize) -> u64 {
    u64::try_from(bytes).unwrap_or(u64::MAX)
}

/// What a file's write stream writes, counted write by write.
pub struct StreamQuota {
    quota: Quota,
    /// For a stream writing at an offset: the file, where the next write goes, and the end of
    /// what this stream has counted so far. `None` when appending (no hole is possible).
    at: Option<Position>,
}

struct Position {
    file: Arc<std::fs::File>,
    next: u64,
    /// The end of what is counted: bytes on their way to the file are counted before the
    /// file's size shows them, and must not be counted again as a hole.
    counted_to: u64,
}

impl StreamQuota {
    /// Counting for a stream on `file` writing at `offset`, or appending when `None`.
    /// `counted_to` is where the counting starts: `offset` when the hole up to it is counted
    /// already, 0 when the first write is to count it.
    pub fn new(quota: Quota, at: Option<(Arc<std::fs::File>, u64)>, counted_to: u64) -> Self {
        Self {
            quota,
            at: at.map(|(file, next)| Position {
                file,
                next,
                counted_to,
            }),
        }
    }

    /// Counts a write of `bytes` at the stream's position, plus the hole it leaves past the
    /// file's end; answers the bytes to [`Self::advance`] by once written.
    pub fn charge(&mut self, bytes: usize) -> Result<u64, QuotaExceeded> {
        let bytes = len(bytes);
        let hole = match &self.at {
            Some(at) => {
                let size = at.file.metadata().map_or(at.next, |m| m.len());
                at.next.saturating_sub(size.max(at.counted_to))
            }
            None => 0,
        };
        self.quota.bytes(bytes.saturating_add(hole))?.keep();
        if let Some(at) = &mut self.at {
            at.counted_to = at.counted_to.max(at.next.saturating_add(bytes));
        }
        Ok(bytes)
    }

    /// After a write of `bytes` went to the file: the next one goes after it.
    pub fn advance(&mut self, bytes: u64) {
        if let Some(at) = &mut self.at {
            at.next = at.next.saturating_add(bytes);
        }
    }
}

/// Waits for the yes `[approvals] write` asks before a call or run first changes its
/// directories. The future holds nothing of the store, so that a 0.3 shadow can await it
/// outside its store access.
pub fn approve_write(data: &StoreData) -> impl Future<Output = Result<(), WriteRefused>> {
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
            WriteRefused
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::sandbox::{Granted, Limits, Sandbox};

    /// A quota of `max` bytes, and an empty file.
    fn quota_and_file(max: u64) -> (Quota, Arc<std::fs::File>, tempfile::NamedTempFile) {
        let limits = Limits {
            max_write_bytes: max,
            ..Limits::default()
        };
        let sandbox = Sandbox::new(limits, Granted::default(), Duration::from_millis(10));
        let quota = Quota {
            disk: sandbox.disk().clone(),
            plugin: "p".into(),
        };
        let named = tempfile::NamedTempFile::new().expect("a temporary file");
        let file = Arc::new(named.reopen().expect("the file reopens"));
        (quota, file, named)
    }

    #[test]
    fn a_stream_past_the_end_counts_its_hole_once_though_its_bytes_are_still_on_their_way() {
        let (quota, file, _named) = quota_and_file(1000);
        // Nothing counted yet: the first write at 600 counts the hole before it.
        let mut stream = StreamQuota::new(quota.clone(), Some((file, 600)), 0);
        assert_eq!(stream.charge(100).ok(), Some(100));
        stream.advance(100);
        // The file has not grown (those bytes are still on their way): the next write, right
        // after them, leaves no hole.
        assert_eq!(stream.charge(300).ok(), Some(300));
        stream.advance(300);
        // 600 + 100 + 300 = 1000: one byte more does not fit.
        assert!(stream.charge(1).is_err());
        assert!(quota.bytes(1).is_err());
    }

    #[test]
    fn a_hole_counted_when_the_stream_was_made_is_not_counted_again() {
        let (quota, file, _named) = quota_and_file(1000);
        quota.bytes(600).expect("the hole fits").keep();
        let mut stream = StreamQuota::new(quota, Some((file, 600)), 600);
        assert_eq!(stream.charge(400).ok(), Some(400));
        assert!(stream.charge(1).is_err());
    }

    #[test]
    fn a_refunded_charge_gives_back_what_it_counted() {
        let (quota, _file, _named) = quota_and_file(10);
        let mut charge = quota.bytes(10).expect("fits");
        charge.refund_bytes(4);
        quota.bytes(4).expect("the refunded bytes fit again").keep();
        charge.refund();
        quota.bytes(6).expect("all of it came back").keep();
        assert!(quota.bytes(1).is_err());
    }
}
