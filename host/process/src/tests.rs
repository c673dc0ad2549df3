//! Trees end whole, with either strategy: a root that ignores stdin closing and SIGTERM, a
//! `setsid` grandchild and a double-forked daemon, all gone from /proc once `end` returns.

use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};

use super::*;

/// The root prints `setsid PID`, `daemon PID` and `ready` (in any order); nothing of it obeys
/// SIGTERM.
const STUBBORN: &str = r#"
trap '' TERM HUP
setsid sh -c 'trap "" TERM HUP; echo "setsid $$"; exec sleep 1000' &
sh -c 'sh -c '"'"'trap "" TERM HUP; echo "daemon $$"; exec sleep 1000 >/dev/null'"'"' & exit 0'
echo ready
while :; do sleep 1; done
"#;

fn alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

async fn contain(strategy: Strategy) -> (Vec<i32>, Duration) {
    let mut command = Command::new("sh");
    command
        .args(["-c", STUBBORN])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let spawned = Instant::now();
    let mut tree = spawn_as(&mut command, Duration::from_millis(50), strategy).unwrap();
    let spawn_cost = spawned.elapsed();
    let child = tree.child_mut().unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut pids = vec![tree.id() as i32];
    let mut ready = false;
    while !ready || pids.len() < 3 {
        let line = lines.next_line().await.unwrap().expect("the root's lines");
        match line.split_once(' ') {
            Some((_, pid)) => pids.push(pid.parse().unwrap()),
            None => ready = true,
        }
    }
    assert_eq!(pids.len(), 3, "root, setsid grandchild, daemon: {pids:?}");
    assert!(pids.iter().all(|p| alive(*p)));
    let start = Instant::now();
    let status = tree.end(move || drop(stdin)).await;
    let took = start.elapsed();
    assert!(status.is_some(), "the root's status is known");
    let left: Vec<i32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    assert!(
        left.is_empty(),
        "{strategy:?}: left {left:?} (as zombies or alive)"
    );
    eprintln!(
        "{strategy:?}: spawn {spawn_cost:?}, end (two graces of 50 ms, then SIGKILL) {took:?}"
    );
    (pids, took)
}

#[tokio::test]
async fn a_subreaper_tree_ends_whole() {
    contain(Strategy::Subreaper).await;
}

#[tokio::test]
async fn a_cgroup_tree_ends_whole() {
    if strategy() != Strategy::Cgroup {
        eprintln!("no writable cgroup v2 here: the subreaper test covers this host");
        return;
    }
    contain(Strategy::Cgroup).await;
}

#[tokio::test]
async fn a_child_gets_no_descriptor_past_stderr() {
    let file = std::fs::File::open("/proc/self/stat").unwrap();
    // SAFETY: dup(2) of an open descriptor; the copy lacks close-on-exec, as an inherited one would.
    let leaked = unsafe { libc::dup(file.as_raw_fd()) };
    assert!(leaked > 2);
    let mut command = Command::new("sh");
    command
        .args([
            "-c",
            &format!("test -e /proc/$$/fd/{leaked} && echo leaked || echo clean"),
        ])
        .stdout(Stdio::piped());
    let mut tree = spawn(&mut command, Duration::from_millis(50)).unwrap();
    let stdout = tree.child_mut().unwrap().stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let answer = lines.next_line().await.unwrap();
    tree.end(|| {}).await;
    // SAFETY: closing the copy made above.
    unsafe { libc::close(leaked) };
    assert_eq!(answer.as_deref(), Some("clean"));
}

/// The figures in the module's doc: `cargo test -p seam-host --lib process::tests::measure --
/// --ignored --nocapture`.
#[tokio::test]
#[ignore = "a measurement, not a check"]
async fn measure() {
    for strategy in [Strategy::Subreaper, Strategy::Cgroup] {
        if strategy == Strategy::Cgroup && super::strategy() != Strategy::Cgroup {
            continue;
        }
        const N: u32 = 50;
        let (mut spawning, mut ending) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..N {
            let mut command = Command::new("true");
            let start = Instant::now();
            let tree = spawn_as(&mut command, Duration::from_secs(5), strategy).unwrap();
            spawning += start.elapsed();
            let start = Instant::now();
            tree.end(|| {}).await;
            ending += start.elapsed();
        }
        eprintln!(
            "{strategy:?}: spawn {:?}, end of a process that exits {:?} (mean of {N})",
            spawning / N,
            ending / N
        );
        // Kill to last reap, for the stubborn tree: `end` with no grace is the SIGKILL at once.
        let mut command = Command::new("sh");
        command
            .args(["-c", STUBBORN])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut tree = spawn_as(&mut command, Duration::ZERO, strategy).unwrap();
        let child = tree.child_mut().unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut seen = 0;
        while seen < 3 {
            lines.next_line().await.unwrap().unwrap();
            seen += 1;
        }
        let start = Instant::now();
        tree.end(move || drop(stdin)).await;
        eprintln!(
            "{strategy:?}: a stubborn tree of 3, kill to last reap {:?}",
            start.elapsed()
        );
    }
}
