//! The file system an ACP agent may ask Seam for (`fs/read_text_file`, `fs/write_text_file`):
//! only beneath the directories its entry grants (`[plugin.grants] dirs`), writes only where the
//! grant says `write = true`, files up to the entry's `max_write_bytes`.
//!
//! A request is never checked as a path and then opened: the grant's directory is opened as a
//! [`cap_std::fs::Dir`] and the rest of the path resolved beneath it, by the kernel where it can
//! (`openat2` with `RESOLVE_BENEATH` on Linux), so that a symbolic link or `..` that leads out of
//! the grant fails the open itself, whatever changes on disk between two requests or during one.

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use serde_json::{json, Value};

use seam_sandbox::DirGrant;

/// Why a file request was refused; the message is what the agent is answered.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The request has no `path` string.
    #[error("`path` is missing")]
    MissingPath,
    /// A write request has no `content` string.
    #[error("`content` is missing")]
    MissingContent,
    /// A method other than the two served.
    #[error("`{0}` is not offered")]
    NotOffered(String),
    /// ACP paths are absolute.
    #[error("`{0}` is not an absolute path")]
    NotAbsolute(String),
    /// The path names no granted directory.
    #[error("`{0}` is outside the directories granted to this agent (`grants.dirs`)")]
    Outside(String),
    /// The path names a granted directory, but resolving it left the grant.
    #[error(
        "`{0}` leads outside the directories granted to this agent (`grants.dirs`) through a \
         symbolic link or `..`"
    )]
    Escapes(String),
    /// A write into a grant without `write = true`.
    #[error(
        "`{0}` is in a directory granted read-only (`write = true` in its `grants.dirs` entry \
         allows writes)"
    )]
    ReadOnly(String),
    /// A file larger than the entry's `max_write_bytes`.
    #[error("`{path}` is {size} bytes, more than the {max} this agent may read")]
    TooBigToRead {
        /// The requested path.
        path: String,
        /// Its size (at least; reading stops past the limit).
        size: u64,
        /// The limit.
        max: u64,
    },
    /// Content larger than the entry's `max_write_bytes`.
    #[error("{size} bytes is more than the {max} this agent may write")]
    TooBigToWrite {
        /// The content's size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// A directory, a device, a FIFO: only regular files are served.
    #[error("`{0}` is not a regular file")]
    NotAFile(String),
    /// A file that is not UTF-8.
    #[error("`{0}` is not UTF-8 text")]
    NotText(String),
    /// The granted directory itself could not be opened.
    #[error("the granted directory `{dir}`: {source}", dir = dir.display())]
    Grant {
        /// The grant's host path.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The OS refused (no such file, permission denied, a symbolic link loop...).
    #[error("`{path}`: {source}")]
    Io {
        /// The requested path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// The granted directories of one ACP entry.
#[derive(Debug, Clone, Default)]
pub struct Files {
    dirs: Vec<DirGrant>,
    /// The largest file read or written.
    max_bytes: u64,
}

impl Files {
    /// `dirs` with canonical host paths (as the loader resolves them); `max_bytes` bounds both
    /// what is read and what is written.
    pub fn new(dirs: Vec<DirGrant>, max_bytes: u64) -> Self {
        Self { dirs, max_bytes }
    }

    /// These directories as the scopes over a run (nearest first) leave them: what that run's
    /// agent may read and write.
    pub fn narrowed(&self, scopes: &[(String, seam_core::scope::Scope)]) -> Self {
        Self {
            dirs: seam_sandbox::narrowed_dirs(&self.dirs, scopes).0,
            max_bytes: self.max_bytes,
        }
    }

    /// Whether the agent may read at all.
    pub fn can_read(&self) -> bool {
        !self.dirs.is_empty()
    }

    /// Whether the agent may write anywhere.
    pub fn can_write(&self) -> bool {
        self.dirs.iter().any(|d| d.write)
    }

    /// Serves one `fs/*` request (`method`, with its `params`): the result to answer with.
    pub fn serve(&self, method: &str, params: &Value) -> Result<Value, FileError> {
        let path = params
            .get("path")
            .and_then(Value::as_str)
            .ok_or(FileError::MissingPath)?;
        match method {
            "fs/read_text_file" => self.read(path, params).map(|c| json!({ "content": c })),
            "fs/write_text_file" => {
                let content = params
                    .get("content")
                    .and_then(Value::as_str)
                    .ok_or(FileError::MissingContent)?;
                self.write(path, content).map(|()| json!({}))
            }
            other => Err(FileError::NotOffered(other.to_string())),
        }
    }

    fn read(&self, path: &str, params: &Value) -> Result<String, FileError> {
        let (root, rest) = self.beneath(path, false)?;
        let mut options = OpenOptions::new();
        // Non-blocking, so that a FIFO in the grant cannot hold the request (it is refused below
        // as not a regular file).
        options
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
        let file = open(&root, &rest, &options, path)?;
        let size = regular(&file, path)?;
        let max = self.max_bytes;
        if size > max {
            return Err(FileError::TooBigToRead {
                path: path.to_string(),
                size,
                max,
            });
        }
        // The size is the file's now; one that grows while it is read still stops at the limit.
        let mut bytes = Vec::new();
        file.take(max.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|source| io(path, source))?;
        if bytes.len() as u64 > max {
            return Err(FileError::TooBigToRead {
                path: path.to_string(),
                size: bytes.len() as u64,
                max,
            });
        }
        let text = String::from_utf8(bytes).map_err(|_| FileError::NotText(path.to_string()))?;
        // `line` is 1-based; `limit` counts lines from there.
        let first = params.get("line").and_then(Value::as_u64).map_or(0, |l| {
            usize::try_from(l.saturating_sub(1)).unwrap_or(usize::MAX)
        });
        let limit = params
            .get("limit")
            .and_then(Value::as_u64)
            .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
        if first == 0 && limit == usize::MAX {
            return Ok(text);
        }
        Ok(text.split_inclusive('\n').skip(first).take(limit).collect())
    }

    fn write(&self, path: &str, content: &str) -> Result<(), FileError> {
        let size = content.len() as u64;
        if size > self.max_bytes {
            return Err(FileError::TooBigToWrite {
                size,
                max: self.max_bytes,
            });
        }
        let (root, rest) = self.beneath(path, true)?;
        let mut options = OpenOptions::new();
        // Not truncated on open: what is opened is checked to be a regular file first.
        options
            .write(true)
            .create(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
        let mut file = open(&root, &rest, &options, path)?;
        regular(&file, path)?;
        file.set_len(0).map_err(|source| io(path, source))?;
        file.write_all(content.as_bytes())
            .map_err(|source| io(path, source))?;
        file.flush().map_err(|source| io(path, source))
    }

    /// The granted directory `path` names (opened) and the rest of the path below it. `path` is
    /// matched against the grants as written; what it resolves to is the open's business. A
    /// write takes the deepest writable grant that names it.
    fn beneath(&self, path: &str, write: bool) -> Result<(Dir, PathBuf), FileError> {
        let given = Path::new(path);
        if !given.is_absolute() {
            return Err(FileError::NotAbsolute(path.to_string()));
        }
        let named = self
            .dirs
            .iter()
            .filter_map(|d| Some((d, given.strip_prefix(&d.host).ok()?)));
        let grant = named
            .clone()
            .filter(|(d, _)| d.write || !write)
            .max_by_key(|(d, _)| d.host.components().count());
        let Some((grant, rest)) = grant else {
            return Err(if named.count() > 0 {
                FileError::ReadOnly(path.to_string())
            } else {
                FileError::Outside(path.to_string())
            });
        };
        // `..` may only appear where the kernel can see it leave: below the grant's root. A
        // path naming the root itself is opened as `.` (and refused as not a file).
        let rest = if rest.components().next().is_none() {
            PathBuf::from(Component::CurDir.as_os_str())
        } else {
            rest.to_path_buf()
        };
        let root =
            Dir::open_ambient_dir(&grant.host, cap_std::ambient_authority()).map_err(|source| {
                FileError::Grant {
                    dir: grant.host.clone(),
                    source,
                }
            })?;
        #[cfg(test)]
        tests::between_check_and_open();
        Ok((root, rest))
    }
}

/// Opens `rest` beneath `root`; an escape is told apart from the OS's own refusals.
fn open(
    root: &Dir,
    rest: &Path,
    options: &OpenOptions,
    path: &str,
) -> Result<std::fs::File, FileError> {
    match root.open_with(rest, options) {
        Ok(file) => Ok(file.into_std()),
        // cap-std's escape error carries no OS code (the kernel's EXDEV is mapped onto it); a
        // plain EACCES does.
        Err(e)
            if e.kind() == std::io::ErrorKind::PermissionDenied && e.raw_os_error().is_none() =>
        {
            Err(FileError::Escapes(path.to_string()))
        }
        Err(source) => Err(io(path, source)),
    }
}

/// The size of `file` if it is a regular file.
fn regular(file: &std::fs::File, path: &str) -> Result<u64, FileError> {
    let meta = file.metadata().map_err(|source| io(path, source))?;
    if meta.is_file() {
        Ok(meta.len())
    } else {
        Err(FileError::NotAFile(path.to_string()))
    }
}

fn io(path: &str, source: std::io::Error) -> FileError {
    FileError::Io {
        path: path.to_string(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::os::unix::fs::symlink;

    use super::*;

    type Hook = Box<dyn FnMut()>;

    thread_local! {
        /// Run between choosing the grant and opening beneath it: a test's chance to change
        /// the disk exactly there, where a check-then-open would be fooled.
        static HOOK: RefCell<Option<Hook>> = RefCell::new(None);
    }

    pub(super) fn between_check_and_open() {
        HOOK.with(|h| {
            if let Some(hook) = h.borrow_mut().as_mut() {
                hook();
            }
        });
    }

    /// `root/in` (granted, writable) holding `a.txt`, and `root/out` beside it, not granted.
    fn fixture() -> (tempfile::TempDir, Files) {
        let root = tempfile::tempdir().unwrap();
        let root_path = std::fs::canonicalize(root.path()).unwrap();
        std::fs::create_dir(root_path.join("in")).unwrap();
        std::fs::create_dir(root_path.join("out")).unwrap();
        std::fs::write(root_path.join("in/a.txt"), "inside").unwrap();
        std::fs::write(root_path.join("out/secret.txt"), "secret").unwrap();
        let files = Files::new(
            vec![DirGrant {
                host: root_path.join("in"),
                guest: "/in".into(),
                write: true,
            }],
            1 << 20,
        );
        (root, files)
    }

    fn write(files: &Files, path: &Path) -> Result<Value, FileError> {
        files.serve(
            "fs/write_text_file",
            &json!({"path": path.to_str().unwrap(), "content": "PWNED"}),
        )
    }

    #[test]
    fn a_directory_swapped_for_a_link_during_the_request_is_not_followed() {
        let (root, files) = fixture();
        let base = std::fs::canonicalize(root.path()).unwrap();
        std::fs::create_dir(base.join("in/sub")).unwrap();
        // Once the grant is chosen, `in/sub` becomes a link to `out`.
        let (sub, out) = (base.join("in/sub"), base.join("out"));
        HOOK.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                if sub.is_dir() && !sub.is_symlink() {
                    std::fs::remove_dir(&sub).unwrap();
                    symlink(&out, &sub).unwrap();
                }
            }))
        });
        let written = write(&files, &base.join("in/sub/new.txt"));
        HOOK.with(|h| h.borrow_mut().take());
        assert!(matches!(written, Err(FileError::Escapes(_))), "{written:?}");
        assert!(!base.join("out/new.txt").exists());
    }

    #[test]
    fn grants_are_matched_by_component_and_the_deepest_writable_wins() {
        let (root, _) = fixture();
        let base = std::fs::canonicalize(root.path()).unwrap();
        std::fs::create_dir(base.join("in/rw")).unwrap();
        let files = Files::new(
            vec![
                DirGrant {
                    host: base.join("in"),
                    guest: "/a".into(),
                    write: false,
                },
                DirGrant {
                    host: base.join("in/rw"),
                    guest: "/b".into(),
                    write: true,
                },
            ],
            16,
        );
        assert!(write(&files, &base.join("in/rw/x.txt")).is_ok());
        assert!(matches!(
            write(&files, &base.join("in/x.txt")),
            Err(FileError::ReadOnly(_))
        ));
        // `/…/in2` is not inside `/…/in`.
        assert!(matches!(
            write(&files, &base.join("in2/x.txt")),
            Err(FileError::Outside(_))
        ));
        // The grant's root is not a file; a big file is refused by its size.
        let read =
            |p: &Path| files.serve("fs/read_text_file", &json!({"path": p.to_str().unwrap()}));
        assert!(matches!(
            read(&base.join("in")),
            Err(FileError::NotAFile(_))
        ));
        std::fs::write(base.join("in/big.txt"), "x".repeat(17)).unwrap();
        assert!(matches!(
            read(&base.join("in/big.txt")),
            Err(FileError::TooBigToRead {
                size: 17,
                max: 16,
                ..
            })
        ));
        assert!(matches!(
            files.serve(
                "fs/write_text_file",
                &json!({"path": base.join("in/rw/y").to_str().unwrap(), "content": "y".repeat(17)})
            ),
            Err(FileError::TooBigToWrite { size: 17, max: 16 })
        ));
    }
}
