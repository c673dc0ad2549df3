//! The file system an ACP agent may ask Seam for (`fs/read_text_file`, `fs/write_text_file`):
//! only inside the directories its entry grants (`[plugin.grants] dirs`), writes only where the
//! grant says `write = true`, symbolic links resolved before the check.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::sandbox::DirGrant;

/// The granted directories of one ACP entry.
#[derive(Debug, Clone, Default)]
pub(crate) struct Files {
    dirs: Vec<DirGrant>,
    /// The largest file read or written.
    max_bytes: u64,
}

impl Files {
    /// `dirs` with canonical host paths (as the loader resolved them).
    pub(crate) fn new(dirs: Vec<DirGrant>, max_bytes: u64) -> Self {
        Self { dirs, max_bytes }
    }

    /// Whether the agent may read at all.
    pub(crate) fn can_read(&self) -> bool {
        !self.dirs.is_empty()
    }

    /// Whether the agent may write anywhere.
    pub(crate) fn can_write(&self) -> bool {
        self.dirs.iter().any(|d| d.write)
    }

    /// Serves one `fs/*` request: the result, or the error's message.
    pub(crate) fn serve(&self, method: &str, params: &Value) -> Result<Value, String> {
        let path = params
            .get("path")
            .and_then(Value::as_str)
            .ok_or("`path` is missing")?;
        match method {
            "fs/read_text_file" => self.read(path, params).map(|c| json!({ "content": c })),
            "fs/write_text_file" => {
                let content = params
                    .get("content")
                    .and_then(Value::as_str)
                    .ok_or("`content` is missing")?;
                self.write(path, content).map(|()| json!({}))
            }
            other => Err(format!("`{other}` is not offered")),
        }
    }

    fn read(&self, path: &str, params: &Value) -> Result<String, String> {
        let real = self.inside(path, false)?;
        let size = real.metadata().map_err(|e| format!("`{path}`: {e}"))?.len();
        if size > self.max_bytes {
            return Err(format!(
                "`{path}` is {size} bytes, more than the {} this agent may read",
                self.max_bytes
            ));
        }
        let text = std::fs::read_to_string(&real).map_err(|e| format!("`{path}`: {e}"))?;
        // `line` is 1-based; `limit` counts lines from there.
        let first = params
            .get("line")
            .and_then(Value::as_u64)
            .map_or(0, |l| l.saturating_sub(1) as usize);
        let limit = params
            .get("limit")
            .and_then(Value::as_u64)
            .map_or(usize::MAX, |l| l as usize);
        if first == 0 && limit == usize::MAX {
            return Ok(text);
        }
        Ok(text.split_inclusive('\n').skip(first).take(limit).collect())
    }

    fn write(&self, path: &str, content: &str) -> Result<(), String> {
        if content.len() as u64 > self.max_bytes {
            return Err(format!(
                "{} bytes is more than the {} this agent may write",
                content.len(),
                self.max_bytes
            ));
        }
        let real = self.inside(path, true)?;
        std::fs::write(&real, content).map_err(|e| format!("`{path}`: {e}"))
    }

    /// The real path of `path` if it lies inside a granted directory (a writable one when
    /// `write`); a file that does not exist yet is placed by its real parent.
    fn inside(&self, path: &str, write: bool) -> Result<PathBuf, String> {
        let given = Path::new(path);
        if !given.is_absolute() {
            return Err(format!("`{path}` is not an absolute path"));
        }
        let real = match std::fs::canonicalize(given) {
            Ok(real) => real,
            Err(_) if write => {
                let (Some(parent), Some(name)) = (given.parent(), given.file_name()) else {
                    return Err(format!("`{path}` names no file"));
                };
                std::fs::canonicalize(parent)
                    .map_err(|e| format!("`{path}`: {e}"))?
                    .join(name)
            }
            Err(e) => return Err(format!("`{path}`: {e}")),
        };
        let granted = self
            .dirs
            .iter()
            .filter(|d| real.starts_with(&d.host))
            .any(|d| d.write || !write);
        if granted {
            Ok(real)
        } else if write && self.dirs.iter().any(|d| real.starts_with(&d.host)) {
            Err(format!(
                "`{path}` is in a directory granted read-only (`write = true` in its `grants.dirs` entry allows writes)"
            ))
        } else {
            Err(format!(
                "`{path}` is outside the directories granted to this agent (`grants.dirs`)"
            ))
        }
    }
}
