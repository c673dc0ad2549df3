//! Directories the host trusts with native code (the compile cache, the OCI store): private to
//! this user, created `0700`, refused when another user could write into them.

use std::path::{Path, PathBuf};
#[cfg(unix)]
use std::sync::atomic::{AtomicU64, Ordering};

use thiserror::Error;

/// Makes sure `dir` is a cache directory the host can trust, creating it `0700` if it is
/// missing; returns its canonical path, or why it cannot be used.
#[cfg(unix)]
pub fn prepare_dir(dir: &Path) -> Result<PathBuf, UntrustedDir> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};

    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(UntrustedDir::Create)?;
        // The mode above is masked by the umask; the directory the host creates is 0700
        // whatever the umask says.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(UntrustedDir::MakePrivate)?;
    }
    let meta = std::fs::metadata(dir).map_err(UntrustedDir::Read)?;
    if !meta.is_dir() {
        return Err(UntrustedDir::NotADirectory);
    }
    let uid = current_uid().map_err(UntrustedDir::WhoAmI)?;
    if meta.uid() != uid {
        return Err(UntrustedDir::Owner {
            owner: meta.uid(),
            uid,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
            (true, true) => "group and others",
            (true, false) => "its group",
            _ => "others",
        };
        return Err(UntrustedDir::Writable { who, mode });
    }
    std::fs::canonicalize(dir).map_err(UntrustedDir::Resolve)
}

#[cfg(not(unix))]
pub fn prepare_dir(dir: &Path) -> Result<PathBuf, UntrustedDir> {
    std::fs::create_dir_all(dir).map_err(UntrustedDir::Create)?;
    std::fs::canonicalize(dir).map_err(UntrustedDir::Resolve)
}

/// Why a cache directory cannot be trusted with native code.
#[derive(Debug, Error)]
pub enum UntrustedDir {
    #[error("cannot create it: {0}")]
    Create(std::io::Error),
    #[error("cannot make it private (0700): {0}")]
    MakePrivate(std::io::Error),
    #[error("cannot read it: {0}")]
    Read(std::io::Error),
    #[error("it is not a directory")]
    NotADirectory,
    #[error("cannot tell which user this is: {0}")]
    WhoAmI(std::io::Error),
    #[error(
        "it is owned by uid {owner}, not by this user (uid {uid}); another user could plant \
         native code in it"
    )]
    Owner { owner: u32, uid: u32 },
    #[error(
        "it is writable by {who} (mode {mode:o}), who could plant native code in it; `chmod 700` \
         it to use it"
    )]
    Writable { who: &'static str, mode: u32 },
    #[error("cannot resolve it: {0}")]
    Resolve(std::io::Error),
}

/// The effective user id of this process: from `/proc/self/status`, else the owner of a file
/// the process creates (and removes) in the temporary directory.
#[cfg(unix)]
fn current_uid() -> std::io::Result<u32> {
    use std::os::unix::fs::MetadataExt;

    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        // `Uid:` real, effective, saved, filesystem.
        let effective = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            .and_then(|id| id.parse().ok());
        if let Some(uid) = effective {
            return Ok(uid);
        }
    }
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let probe = std::env::temp_dir().join(format!(
        ".seam-uid-probe.{}.{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let file = new_private_file(&probe)?;
    let uid = file.metadata().map(|m| m.uid());
    drop(file);
    let _ = std::fs::remove_file(&probe);
    uid
}

/// Creates a new file readable and writable by its owner only; fails if it exists.
pub fn new_private_file(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}
