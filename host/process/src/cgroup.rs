//! cgroup v2: a cgroup per contained tree, below one made for this host process
//! (`<own cgroup>/seam-<pid>/t<n>`). A process placed in a cgroup before it executes cannot
//! leave it by `setsid`, `setpgid` or a double fork, and `cgroup.kill` ends every member at once.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::procfs;

/// Where this host makes its trees' cgroups.
#[derive(Debug, Clone)]
pub(super) struct Hierarchy {
    /// `<mount>/<own path>/seam-<pid>`.
    dir: PathBuf,
    /// The same, as `/proc/PID/cgroup` names it.
    rel: String,
}

/// Why cgroup v2 cannot contain trees here.
#[derive(Debug, thiserror::Error)]
pub(super) enum Unavailable {
    #[error("no cgroup2 file system is mounted")]
    NotMounted,
    #[error("this process's cgroup v2 path is unknown")]
    NoPath,
    #[error("cannot make `{0}`: {1}")]
    Create(PathBuf, io::Error),
    #[error("`{0}` has no cgroup.kill (Linux 5.14 or later has it)")]
    NoKill(PathBuf),
}

/// The cgroup2 mount point and the cgroup path of its root.
fn mount() -> Option<(PathBuf, String)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        if right.split_ascii_whitespace().next()? != "cgroup2" {
            return None;
        }
        let mut fields = left.split_ascii_whitespace();
        let root = fields.nth(3)?;
        let point = fields.next()?;
        Some((PathBuf::from(point), root.to_string()))
    })
}

impl Hierarchy {
    /// Makes this process's cgroup for trees, after ending what a dead host left in its own.
    pub(super) fn detect() -> Result<Self, Unavailable> {
        let (mount, root) = mount().ok_or(Unavailable::NotMounted)?;
        let own = procfs::cgroup_of(std::process::id() as i32).ok_or(Unavailable::NoPath)?;
        let below = own
            .strip_prefix(root.trim_end_matches('/'))
            .unwrap_or(&own)
            .trim_start_matches('/');
        let base = mount.join(below);
        sweep_stale(&base);
        let name = format!("seam-{}", std::process::id());
        let dir = base.join(&name);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Unavailable::Create(dir, e)),
        }
        if !dir.join("cgroup.kill").exists() {
            let _ = std::fs::remove_dir(&dir);
            return Err(Unavailable::NoKill(dir));
        }
        let rel = format!("{}/{name}", own.trim_end_matches('/'));
        Ok(Self { dir, rel })
    }

    /// A new, empty cgroup for tree `id`, and its `cgroup.procs` opened for the child to join.
    pub(super) fn create(&self, id: u64) -> io::Result<(TreeCgroup, File)> {
        let name = format!("t{id}");
        let dir = self.dir.join(&name);
        std::fs::create_dir(&dir)?;
        let procs = match OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
        {
            Ok(f) => f,
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                return Err(e);
            }
        };
        let tree = TreeCgroup {
            rel: format!("{}/{name}", self.rel),
            dir,
        };
        Ok((tree, procs))
    }

    /// Ends every process in every tree of this host, and removes the cgroups.
    pub(super) fn kill_all(&self) {
        let whole = TreeCgroup {
            dir: self.dir.clone(),
            rel: self.rel.clone(),
        };
        let _ = whole.kill();
    }

    /// Whether a live process is in any tree of this host.
    pub(super) fn populated(&self) -> bool {
        TreeCgroup {
            dir: self.dir.clone(),
            rel: self.rel.clone(),
        }
        .populated()
    }

    /// Removes this host's cgroup (once its trees' are gone).
    pub(super) fn remove(&self) {
        remove_tree(&self.dir);
    }
}

/// A dead host's `seam-<pid>` cgroup: its processes are ended and the cgroups removed.
fn sweep_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("seam-"))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() as i32 || procfs::stat(pid).is_some_and(|s| !s.is_zombie()) {
            continue;
        }
        let dir = entry.path();
        let _ = std::fs::write(dir.join("cgroup.kill"), b"1");
        tracing::warn!(cgroup = %dir.display(), "ended what a host that is gone left running");
        remove_tree(&dir);
    }
}

/// Removes a cgroup and the cgroups below it (a member may have made some), deepest first.
fn remove_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&entry.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// One tree's cgroup.
#[derive(Debug)]
pub(super) struct TreeCgroup {
    dir: PathBuf,
    rel: String,
}

impl TreeCgroup {
    /// SIGKILL to every member, at once.
    pub(super) fn kill(&self) -> io::Result<()> {
        OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.kill"))?
            .write_all(b"1")
    }

    /// Whether a live process is still in it (an unreadable file counts as empty: the cgroup
    /// is gone).
    pub(super) fn populated(&self) -> bool {
        std::fs::read_to_string(self.dir.join("cgroup.events"))
            .is_ok_and(|t| t.lines().any(|l| l == "populated 1"))
    }

    /// Its live members (for a signal other than SIGKILL), below-cgroups included.
    pub(super) fn members(&self) -> Vec<i32> {
        let mut pids = Vec::new();
        collect_procs(&self.dir, &mut pids);
        pids
    }

    /// Whether `pid` (a zombie too) is in this cgroup or one below it.
    pub(super) fn owns(&self, pid: i32) -> bool {
        procfs::cgroup_of(pid).is_some_and(|path| {
            path == self.rel
                || path
                    .strip_prefix(&self.rel)
                    .is_some_and(|rest| rest.starts_with('/'))
        })
    }

    /// Removes the cgroup; it must be empty of live processes.
    pub(super) fn remove(&self) {
        remove_tree(&self.dir);
    }
}

fn collect_procs(dir: &Path, pids: &mut Vec<i32>) {
    if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        pids.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                collect_procs(&entry.path(), pids);
            }
        }
    }
}
