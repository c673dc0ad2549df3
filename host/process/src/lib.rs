//! Contained processes: a program the host starts, and everything that program starts, end
//! together and are reaped by the host, whatever ends them (its own exit, a cancel, a timeout,
//! dispose, or the host's exit). ACP agents use it; MCP stdio servers are meant to.
//!
//! A process is placed in a *tree* before it executes, which none of its descendants can leave:
//!
//! - **cgroup v2** where a writable hierarchy exists (`/proc/self/mountinfo` names it): the host
//!   makes `<its cgroup>/seam-<pid>/`, and each tree a cgroup below it that the child joins in
//!   `pre_exec`. `setsid`, `setpgid` and double forks do not leave a cgroup, and `cgroup.kill`
//!   ends every member in one write, with no race against a member forking. A host that was
//!   SIGKILLed leaves its `seam-<pid>` behind; the next host to start ends and removes it.
//! - **Subreaper** otherwise (no cgroup2 mount, no permission, no `cgroup.kill`; or
//!   `SEAM_CONTAINMENT=subreaper`): each tree's root is made a child subreaper and a session
//!   leader, so while it lives every descendant stays below it by parent links, and every
//!   descendant that keeps its session is found by session id after it dies. Ending a tree is
//!   SIGKILL to every member /proc shows, repeated until none is left. A descendant that both
//!   left the session and outlived the root unseen is not attributable to its tree; it is ended
//!   by [`shutdown`] when the program exits.
//!
//! In both, the host process is a child subreaper: a tree's orphans come to it rather than to
//! init (which in a container may never reap them), and it reaps those of its trees (it never
//! waits on a pid it cannot attribute, so other children of the program are left alone).
//!
//! Measured on the shared 2-core test machine (Linux 6.18, debug build, `process::tests::measure`,
//! means of 50): a spawn costs about 6.3 ms with subreapers and 6.9 ms with a cgroup (the
//! fork and exec dominate; the cgroup adds a mkdir, an open and a write in the child, and a
//! rmdir at the end); ending a process that exits on its own costs 1.2 ms (cgroup) or 2.0 ms
//! (subreaper: /proc scans). From the SIGKILL to the last reap of a root, a `setsid`
//! grandchild and a double-forked daemon: 3.3 ms (cgroup), 5.2 ms (subreaper). The cgroup is
//! chosen where it works because it is exact (no attribution by /proc, no race with a member
//! that forks while it is being killed) and no slower.
//!
//! Every child also starts with only descriptors 0-2: descriptors the host inherited or opened
//! without close-on-exec are marked close-on-exec in `pre_exec` (`close_range`, or one `fcntl`
//! per descriptor before Linux 5.11).

mod cgroup;
mod path;
mod procfs;

pub use path::{resolve, NotOnPath};

use seam_core::sync::lock;
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions};
use tokio::process::{Child, Command};

/// The environment variable that picks the strategy: `cgroup`, `subreaper`, or unset (cgroup
/// where it works, else subreaper).
pub const STRATEGY_VAR: &str = "SEAM_CONTAINMENT";

/// How long ending a tree may take after its SIGKILL before the host gives up on it (a process
/// in uninterruptible sleep; logged).
const KILL_DEADLINE: Duration = Duration::from_secs(5);
/// Between passes while a killed tree dies.
const PASS: Duration = Duration::from_millis(1);

/// How trees are contained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// A cgroup v2 per tree, ended with `cgroup.kill`.
    Cgroup,
    /// Child subreapers and sessions, found and ended through /proc.
    Subreaper,
}

struct State {
    cgroups: Option<cgroup::Hierarchy>,
    live: Mutex<HashMap<u64, Arc<Tree>>>,
    next: AtomicU64,
}

static STATE: OnceLock<State> = OnceLock::new();

fn state() -> &'static State {
    STATE.get_or_init(|| {
        if let Err(e) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
            tracing::warn!(
                "cannot make this process a child subreaper: {e}; orphans of agents go to init"
            );
        }
        let wanted = std::env::var(STRATEGY_VAR).ok();
        if let Some(other) = wanted
            .as_deref()
            .filter(|w| !matches!(*w, "cgroup" | "subreaper"))
        {
            tracing::warn!(
                "{STRATEGY_VAR}={other:?} is neither `cgroup` nor `subreaper`; using the \
                 default (a cgroup where one can be made)"
            );
        }
        let cgroups = if wanted.as_deref() == Some("subreaper") {
            None
        } else {
            match cgroup::Hierarchy::detect() {
                Ok(h) => Some(h),
                Err(e) => {
                    if wanted.as_deref() == Some("cgroup") {
                        tracing::warn!("{STRATEGY_VAR}=cgroup, but {e}; using subreapers");
                    } else {
                        tracing::debug!("process trees use subreapers: {e}");
                    }
                    None
                }
            }
        };
        State {
            cgroups,
            live: Mutex::default(),
            next: AtomicU64::new(1),
        }
    })
}

/// The strategy new trees get.
pub fn strategy() -> Strategy {
    if state().cgroups.is_some() {
        Strategy::Cgroup
    } else {
        Strategy::Subreaper
    }
}

/// Trees started and not yet ended and reaped.
pub fn live_trees() -> usize {
    STATE.get().map_or(0, |s| lock(&s.live).len())
}

/// One contained tree.
struct Tree {
    id: u64,
    /// The process spawned; also the session (and, for subreapers, the group) id of the tree.
    root: i32,
    cgroup: Option<cgroup::TreeCgroup>,
    /// Subreaper: every pid seen in the tree, so that one that left the session is still
    /// known once the root is gone.
    seen: Mutex<HashSet<i32>>,
}

impl Tree {
    fn own_pid() -> i32 {
        rustix::process::getpid().as_raw_nonzero().get()
    }

    /// Whether `p` (live or a zombie) belongs to the tree.
    fn owns(&self, p: &procfs::Stat) -> bool {
        match &self.cgroup {
            Some(cg) => cg.owns(p.pid),
            None => {
                p.pid == self.root
                    || p.session == self.root
                    || p.pgrp == self.root
                    || lock(&self.seen).contains(&p.pid)
            }
        }
    }

    /// The live members, the root included while it lives.
    fn members(&self) -> Vec<i32> {
        if let Some(cg) = &self.cgroup {
            return cg.members();
        }
        let all = procfs::all();
        let roots: Vec<i32> = all.iter().filter(|p| self.owns(p)).map(|p| p.pid).collect();
        let found = procfs::closure(&all, roots);
        lock(&self.seen).extend(found.iter().copied());
        found
            .into_iter()
            .filter(|pid| all.iter().any(|p| p.pid == *pid && !p.is_zombie()))
            .collect()
    }

    /// Remembers who is in the tree now (the subreaper's only view of a member that leaves the
    /// session and outlives the root).
    fn census(&self) {
        if self.cgroup.is_none() {
            let _ = self.members();
        }
    }

    fn signal(&self, signal: Signal) {
        for pid in self.members() {
            if let Some(pid) = Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, signal);
            }
        }
    }

    fn kill(&self) {
        match &self.cgroup {
            Some(cg) => {
                if let Err(e) = cg.kill() {
                    tracing::warn!("cgroup.kill failed ({e}); signalling each member");
                    self.signal(Signal::KILL);
                }
            }
            None => self.signal(Signal::KILL),
        }
    }

    fn is_empty(&self) -> bool {
        match &self.cgroup {
            Some(cg) => !cg.populated(),
            None => self.members().is_empty(),
        }
    }

    /// Reaps the tree's zombies that have come to this process (the root is its owner's to
    /// reap); returns how many of its zombies still wait to come (their parent is dying).
    fn reap_adopted(&self) -> usize {
        let me = Self::own_pid();
        let mut pending = 0;
        for p in procfs::all() {
            if p.pid == self.root || !p.is_zombie() || !self.owns(&p) {
                continue;
            }
            if p.ppid != me {
                pending += 1;
                continue;
            }
            if let Some(pid) = Pid::from_raw(p.pid) {
                let _ = rustix::process::waitpid(Some(pid), WaitOptions::NOHANG);
            }
        }
        pending
    }

    /// One pass of ending: SIGKILL to what lives, reap what died; true once nothing of the
    /// tree is left but the root's zombie.
    fn sweep(&self) -> bool {
        let live = !self.is_empty();
        if live {
            self.kill();
        }
        let pending = self.reap_adopted();
        !live && pending == 0
    }

    /// Sweeps until the tree is gone, waiting with `pause`; false if the deadline passed.
    async fn sweep_until_gone(&self) -> bool {
        let deadline = Instant::now() + KILL_DEADLINE;
        while !self.sweep() {
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(PASS).await;
        }
        true
    }

    /// [`Tree::sweep_until_gone`] without a runtime; also reaps the root.
    fn end_now(&self) {
        let deadline = Instant::now() + KILL_DEADLINE;
        let mut gone = false;
        while Instant::now() <= deadline {
            if self.sweep() {
                gone = true;
                break;
            }
            std::thread::sleep(PASS);
        }
        if let Some(pid) = Pid::from_raw(self.root) {
            while Instant::now() <= deadline {
                match rustix::process::waitpid(Some(pid), WaitOptions::NOHANG) {
                    Ok(None) => std::thread::sleep(PASS),
                    _ => break,
                }
            }
        }
        self.close(gone);
    }

    /// The tree is gone (or given up on): its cgroup is removed and it is no longer live.
    fn close(&self, gone: bool) {
        if !gone {
            tracing::warn!(
                root = self.root,
                "a process tree did not end within {KILL_DEADLINE:?} of its SIGKILL"
            );
        }
        if let Some(cg) = &self.cgroup {
            cg.remove();
        }
        if let Some(state) = STATE.get() {
            lock(&state.live).remove(&self.id);
        }
    }
}

/// A spawned process and its tree. Dropped without [`Contained::end`], it is ended in the
/// background (or at once, with no runtime); [`shutdown`] ends whatever is left.
pub struct Contained {
    child: Option<Child>,
    tree: Arc<Tree>,
    grace: Duration,
    held: Vec<Box<dyn Send + Sync>>,
}

/// Starts `command` in a tree of its own, with only descriptors 0-2. `grace` is how long each
/// step of the escalation waits when the process is dropped rather than ended.
pub fn spawn(command: &mut Command, grace: Duration) -> std::io::Result<Contained> {
    spawn_as(command, grace, strategy())
}

/// [`spawn`] with a given strategy (a cgroup only where the host has them).
pub fn spawn_as(
    command: &mut Command,
    grace: Duration,
    strategy: Strategy,
) -> std::io::Result<Contained> {
    let state = state();
    let id = state.next.fetch_add(1, Ordering::Relaxed);
    let (cgroup, procs) = match (&state.cgroups, strategy) {
        (Some(h), Strategy::Cgroup) => {
            let (cg, procs) = h.create(id)?;
            (Some(cg), Some(procs))
        }
        _ => (None, None),
    };
    let procs_fd = procs.as_ref().map(AsRawFd::as_raw_fd);
    let subreaper = cgroup.is_none();
    // SAFETY: `enter` makes only async-signal-safe system calls and allocates nothing.
    unsafe {
        command.pre_exec(move || enter(procs_fd, subreaper));
    }
    let spawned = command.spawn();
    drop(procs);
    let child = match spawned {
        Ok(child) => child,
        Err(e) => {
            if let Some(cg) = &cgroup {
                cg.remove();
            }
            return Err(e);
        }
    };
    let root = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .unwrap_or(0);
    let tree = Arc::new(Tree {
        id,
        root,
        cgroup,
        seen: Mutex::default(),
    });
    lock(&state.live).insert(id, tree.clone());
    Ok(Contained {
        child: Some(child),
        tree,
        grace,
        held: Vec::new(),
    })
}

/// In the child, before it executes: a session of its own, the tree, and no inherited
/// descriptor past stderr.
fn enter(procs: Option<RawFd>, subreaper: bool) -> std::io::Result<()> {
    rustix::process::setsid()?;
    if subreaper {
        rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    }
    if let Some(fd) = procs {
        // SAFETY: the parent keeps this descriptor open until the spawn has returned.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        rustix::io::write(fd, b"0")?;
    }
    mark_close_on_exec();
    Ok(())
}

/// Marks every descriptor from 3 up close-on-exec. Not closed outright: the standard library
/// reports a failed exec on one of them (already close-on-exec).
fn mark_close_on_exec() {
    // SAFETY: close_range(2) with CLOSE_RANGE_CLOEXEC changes descriptor flags only.
    let done = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC as libc::c_uint,
        )
    } == 0;
    if done {
        return;
    }
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(1024)
        .min(1 << 20);
    for fd in 3..limit as i32 {
        // SAFETY: fcntl(2) F_SETFD on a descriptor that may not exist fails harmlessly.
        unsafe {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
}

impl Contained {
    /// The process, to take its pipes.
    pub fn child_mut(&mut self) -> Option<&mut Child> {
        self.child.as_mut()
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.tree.root as u32
    }

    /// Keeps `value` until the tree is ended and reaped (a count of live processes, say).
    pub fn hold(&mut self, value: impl Send + Sync + 'static) {
        self.held.push(Box::new(value));
    }

    /// How the process ended, if it ends within `within`.
    pub async fn wait_timeout(&mut self, within: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        tokio::time::timeout(within, child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// Ends the tree: `close_input` (closing the process's stdin, its cue to exit), then SIGTERM
    /// to every member after the grace, then SIGKILL after another; whatever the process left
    /// running is killed once it has exited. Returns once all of it is reaped, with the
    /// process's exit status.
    pub async fn end(mut self, close_input: impl FnOnce()) -> Option<ExitStatus> {
        let tree = self.tree.clone();
        let grace = self.grace;
        tree.census();
        close_input();
        let mut child = self.child.take()?;
        let status = match tokio::time::timeout(grace, child.wait()).await {
            Ok(status) => status.ok(),
            Err(_) => {
                tree.signal(Signal::TERM);
                match tokio::time::timeout(grace, child.wait()).await {
                    Ok(status) => status.ok(),
                    Err(_) => {
                        tree.kill();
                        child.wait().await.ok()
                    }
                }
            }
        };
        let gone = tree.sweep_until_gone().await;
        tree.close(gone);
        self.held.clear();
        status
    }
}

impl Drop for Contained {
    fn drop(&mut self) {
        let Some(child) = self.child.take() else {
            return;
        };
        let rest = Contained {
            child: Some(child),
            tree: self.tree.clone(),
            grace: self.grace,
            held: std::mem::take(&mut self.held),
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                // A runtime shutting down drops what is spawned on it unpolled: dropping `rest`
                // there would spawn it again, and again, until the stack overflows. So the task
                // holds it in a guard that ends the tree at once if the task never ran.
                struct EndNow(Option<Contained>);
                impl Drop for EndNow {
                    fn drop(&mut self) {
                        if let Some(mut rest) = self.0.take() {
                            let child = rest.child.take();
                            rest.tree.end_now();
                            drop(child);
                        }
                    }
                }
                let mut guard = EndNow(Some(rest));
                runtime.spawn(async move {
                    if let Some(rest) = guard.0.take() {
                        rest.end(|| {}).await;
                    }
                });
            }
            Err(_) => {
                let mut rest = rest;
                let child = rest.child.take();
                rest.tree.end_now();
                drop(child);
            }
        }
    }
}

/// Ends every tree still alive, at once (SIGKILL), reaps it, and removes this host's cgroup:
/// for a program about to exit, so that nothing it started outlives it, whatever else was
/// still waiting to end them. With subreapers, every process adopted by this one is ended too:
/// an orphan here can only have come from a tree.
pub fn shutdown() {
    let Some(state) = STATE.get() else {
        return;
    };
    let trees: Vec<Arc<Tree>> = lock(&state.live).values().cloned().collect();
    for tree in trees {
        tree.end_now();
    }
    if let Some(h) = &state.cgroups {
        h.kill_all();
    }
    let me = Tree::own_pid();
    let deadline = Instant::now() + KILL_DEADLINE;
    loop {
        let mut busy = false;
        for p in procfs::all().iter().filter(|p| p.ppid == me) {
            let Some(pid) = Pid::from_raw(p.pid) else {
                continue;
            };
            if p.is_zombie() {
                busy = true;
                let _ = rustix::process::waitpid(Some(pid), WaitOptions::NOHANG);
            } else if state.cgroups.is_none() && p.session != me {
                busy = true;
                let _ = rustix::process::kill_process(pid, Signal::KILL);
            }
        }
        let populated = state
            .cgroups
            .as_ref()
            .is_some_and(cgroup::Hierarchy::populated);
        if (!busy && !populated) || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(PASS);
    }
    if let Some(h) = &state.cgroups {
        h.remove();
    }
}

#[cfg(test)]
mod tests;
