//! PATH resolution for the programs the host starts (ACP agents, MCP stdio servers).

use std::path::{Path, PathBuf};

/// A bare program name that no directory on the host's PATH holds as an executable file.
#[derive(Debug, thiserror::Error)]
#[error("`{program}` is not on PATH")]
pub struct NotOnPath {
    /// The name as given.
    pub program: String,
}

/// Where a program is: a path as given, or a bare name looked up on the host's PATH.
pub fn resolve(program: &str) -> Result<PathBuf, NotOnPath> {
    if program.contains('/') {
        return Ok(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| NotOnPath {
            program: program.to_string(),
        })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
