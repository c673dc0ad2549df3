//! The lock file: beside a config `NAME.toml`, `NAME.lock` (so `seam.toml`'s is `seam.lock`),
//! written by `seam lock`. One `[[component]]` per `oci://` entry: the entry's id, the reference
//! as the config writes it, the manifest digest it resolved to, the component layer's size, and
//! the key its signature verified against.
//!
//! ```toml
//! # Written by `seam lock`; every load checks it.
//! version = 1
//!
//! [[component]]
//! id = "researcher"
//! reference = "oci://127.0.0.1:5000/seam/mock:1.0"
//! digest = "sha256:…"
//! size = 81234
//! signer = "alice"
//! signer_fingerprint = "sha256:…"
//! ```
//!
//! Every load of a locked entry pulls exactly the locked digest (a tag is not resolved again, so
//! a locked tag loads offline once pulled), and refuses anything else: a digest reference that
//! differs from the lock, or a registry that serves other bytes for the digest.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

use super::reference::Digest;

/// The format version this host writes and reads.
pub const LOCK_VERSION: u32 = 1;

/// The signer a lock line records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    /// The key's name in `[trust.keys]`.
    pub name: String,
    /// Its fingerprint (`sha256:` of its DER SubjectPublicKeyInfo).
    pub fingerprint: String,
}

/// One `[[component]]` of a lock file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockEntry {
    /// The entry's id.
    pub id: String,
    /// The reference as the config writes it.
    pub reference: String,
    /// The manifest digest it resolved to.
    pub digest: Digest,
    /// The component layer's size in bytes.
    pub size: u64,
    /// The key its signature verified against; `None` for `verify = false`.
    pub signer: Option<Signer>,
    /// The lock file.
    pub file: PathBuf,
    /// The line of its `digest` key, from 1 (0 for a line not read from a file).
    pub line: usize,
}

impl LockEntry {
    /// `` `seam.lock` line 7 ``: how messages point at it.
    pub fn place(&self) -> String {
        let name = self
            .file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.file.display().to_string());
        format!("`{name}` line {}", self.line)
    }

    /// Whether two lines lock the same thing (where they are in their file aside).
    pub fn same_lock(&self, other: &LockEntry) -> bool {
        self.id == other.id
            && self.reference == other.reference
            && self.digest == other.digest
            && self.size == other.size
            && self.signer == other.signer
    }
}

/// A lock file, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    /// The file.
    pub file: PathBuf,
    /// Its entries, in file order.
    pub entries: Vec<LockEntry>,
}

/// A lock file that cannot be used.
#[derive(Debug, Error)]
pub enum LockError {
    /// It could not be read.
    #[error("cannot read lock file `{path}`: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It is not a lock file this host understands.
    #[error("lock file `{path}`: {message} (run `seam lock` to write it again)")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, with its line.
        message: String,
    },
    /// It could not be written.
    #[error("cannot write lock file `{path}`: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLock {
    version: u32,
    #[serde(default)]
    component: Vec<RawEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    id: String,
    reference: String,
    digest: toml::Spanned<String>,
    size: u64,
    signer: Option<String>,
    signer_fingerprint: Option<String>,
}

/// The lock file of config `config`: `NAME.lock` beside `NAME.toml`.
pub fn lock_path(config: &Path) -> PathBuf {
    config.with_extension("lock")
}

impl Lock {
    /// Reads the lock file at `path`; `None` if there is none.
    pub fn read(path: &Path) -> Result<Option<Self>, LockError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(LockError::Read {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        Self::parse(&text, path).map(Some)
    }

    /// Parses lock text; `path` names it.
    pub fn parse(text: &str, path: &Path) -> Result<Self, LockError> {
        let parse_error = |message: String| LockError::Parse {
            path: path.to_path_buf(),
            message,
        };
        let raw: RawLock = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| format!(" (line {})", line_at(text, s.start)))
                .unwrap_or_default();
            parse_error(format!("{}{line}", e.message()))
        })?;
        if raw.version != LOCK_VERSION {
            return Err(parse_error(format!(
                "version {} is not one this host reads (it writes version {LOCK_VERSION})",
                raw.version
            )));
        }
        let mut entries: Vec<LockEntry> = Vec::with_capacity(raw.component.len());
        for entry in raw.component {
            let line = line_at(text, entry.digest.span().start);
            let digest = entry
                .digest
                .get_ref()
                .parse::<Digest>()
                .map_err(|e| parse_error(format!("line {line}: {e}")))?;
            let signer = match (entry.signer, entry.signer_fingerprint) {
                (Some(name), Some(fingerprint)) => Some(Signer { name, fingerprint }),
                (None, None) => None,
                _ => {
                    return Err(parse_error(format!(
                        "line {line}: `signer` and `signer_fingerprint` go together"
                    )))
                }
            };
            if entries.iter().any(|e| e.id == entry.id) {
                return Err(parse_error(format!(
                    "line {line}: plugin `{}` is locked twice",
                    entry.id
                )));
            }
            entries.push(LockEntry {
                id: entry.id,
                reference: entry.reference,
                digest,
                size: entry.size,
                signer,
                file: path.to_path_buf(),
                line,
            });
        }
        Ok(Self {
            file: path.to_path_buf(),
            entries,
        })
    }

    /// The line locking plugin `id`.
    pub fn entry(&self, id: &str) -> Option<&LockEntry> {
        self.entries.iter().find(|e| e.id == id)
    }

    /// The lock file's text for `entries`, in that order.
    pub fn render(entries: &[LockEntry]) -> String {
        let mut text = String::from(
            "# Written by `seam lock`: what each `oci://` component resolved to, and who signed it.\n\
             # Every load checks it; run `seam lock` again to change it.\n",
        );
        let _ = writeln!(text, "version = {LOCK_VERSION}");
        for entry in entries {
            let quote = |s: &str| toml::Value::String(s.to_string()).to_string();
            let _ = write!(
                text,
                "\n[[component]]\nid = {}\nreference = {}\ndigest = {}\nsize = {}\n",
                quote(&entry.id),
                quote(&entry.reference),
                quote(&entry.digest.to_string()),
                entry.size
            );
            if let Some(signer) = &entry.signer {
                let _ = write!(
                    text,
                    "signer = {}\nsigner_fingerprint = {}\n",
                    quote(&signer.name),
                    quote(&signer.fingerprint)
                );
            }
        }
        text
    }

    /// Writes `entries` to `path` (through a temporary file renamed into place), and returns
    /// the lock as read back, with its lines.
    pub fn write(path: &Path, entries: &[LockEntry]) -> Result<Self, LockError> {
        let text = Self::render(entries);
        let tmp = path.with_extension("lock.tmp");
        let write_error = |source| LockError::Write {
            path: path.to_path_buf(),
            source,
        };
        std::fs::write(&tmp, &text).map_err(write_error)?;
        std::fs::rename(&tmp, path).map_err(write_error)?;
        Self::parse(&text, path)
    }
}

/// The line (from 1) of byte `at` of `text`.
fn line_at(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// How a config and its lock disagree, found without a registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Staleness {
    /// An `oci://` entry has no lock line.
    Missing {
        /// The entry.
        id: String,
        /// Its reference.
        reference: String,
    },
    /// The lock line is for another reference (the config was edited).
    OtherReference {
        /// The entry.
        id: String,
        /// What the config names.
        reference: String,
        /// The lock line.
        locked: LockEntry,
    },
    /// A digest reference that is not the locked digest.
    OtherDigest {
        /// The entry.
        id: String,
        /// What the config names.
        digest: Digest,
        /// The lock line.
        locked: LockEntry,
    },
    /// A lock line for no `oci://` entry of the config.
    Unused {
        /// The lock line.
        locked: LockEntry,
    },
    /// A tag now resolves to another digest at the registry (found by `seam check` and `seam
    /// lock`, which ask the registry).
    Moved {
        /// The entry.
        id: String,
        /// What the tag resolves to now.
        digest: Digest,
        /// The lock line.
        locked: LockEntry,
    },
}

impl std::fmt::Display for Staleness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Staleness::Missing { id, reference } => {
                write!(
                    f,
                    "plugin `{id}` (`{reference}`) has no line in the lock file"
                )
            }
            Staleness::OtherReference {
                id,
                reference,
                locked,
            } => write!(
                f,
                "plugin `{id}`: {} locks `{}`, but the config names `{reference}`",
                locked.place(),
                locked.reference
            ),
            Staleness::OtherDigest { id, digest, locked } => write!(
                f,
                "plugin `{id}`: {} locks {}, but the config names {digest}",
                locked.place(),
                locked.digest
            ),
            Staleness::Unused { locked } => write!(
                f,
                "{} locks plugin `{}`, which the config does not load from a registry",
                locked.place(),
                locked.id
            ),
            Staleness::Moved { id, digest, locked } => write!(
                f,
                "plugin `{id}`: `{}` now resolves to {digest} at the registry; {} locks {}",
                locked.reference,
                locked.place(),
                locked.digest
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, signer: bool) -> LockEntry {
        LockEntry {
            id: id.into(),
            reference: format!("oci://127.0.0.1:5000/seam/{id}:1.0"),
            digest: Digest::of(id.as_bytes()),
            size: 42,
            signer: signer.then(|| Signer {
                name: "alice".into(),
                fingerprint: Digest::of(b"key").to_string(),
            }),
            file: PathBuf::new(),
            line: 0,
        }
    }

    #[test]
    fn a_written_lock_reads_back_with_its_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seam.lock");
        let entries = [entry("a", true), entry("b", false)];
        let lock = Lock::write(&path, &entries).unwrap();
        assert_eq!(lock_path(&dir.path().join("seam.toml")), path);
        assert_eq!(Lock::read(&path).unwrap().as_ref(), Some(&lock));
        assert!(lock.entries[0].same_lock(&entries[0]));
        assert!(lock.entries[1].same_lock(&entries[1]));
        let text = std::fs::read_to_string(&path).unwrap();
        let digest_line = text
            .lines()
            .position(|l| l.starts_with("digest") && l.contains(&entries[1].digest.hex()))
            .unwrap()
            + 1;
        assert_eq!(lock.entries[1].line, digest_line);
        assert_eq!(
            lock.entries[1].place(),
            format!("`seam.lock` line {digest_line}")
        );
        assert!(Lock::read(&dir.path().join("none.lock")).unwrap().is_none());
    }

    #[test]
    fn a_bad_lock_names_the_file_and_the_line() {
        let path = Path::new("conf/seam.lock");
        for (text, wanted) in [
            ("version = 2\n", "version 2 is not one this host reads"),
            (
                "version = 1\n[[component]]\nid = \"a\"\nreference = \"r\"\ndigest = \"sha256:00\"\nsize = 1\n",
                "line 5: `sha256:00` is not a SHA-256 digest",
            ),
            ("version = 1\ncolour = 3\n", "unknown field `colour`"),
        ] {
            let e = Lock::parse(text, path).unwrap_err().to_string();
            assert!(
                e.starts_with("lock file `conf/seam.lock`: ") && e.contains(wanted),
                "{text:?}: {e}"
            );
        }
    }
}
