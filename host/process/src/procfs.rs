//! What /proc says about the processes of this host: parent, group, session, state, cgroup.

/// One line of `/proc/PID/stat`, the fields containment needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stat {
    pub pid: i32,
    /// `Z` for a zombie (exited, not yet reaped).
    pub state: u8,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
}

impl Stat {
    pub fn is_zombie(&self) -> bool {
        self.state == b'Z' || self.state == b'X'
    }
}

/// The stat of `pid`, if it still exists.
pub(super) fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(pid, &text)
}

/// The command name may hold spaces and parentheses: the fields start after its last `)`.
fn parse_stat(pid: i32, text: &[u8]) -> Option<Stat> {
    let close = text.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(text.get(close + 1..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    let mut number = || fields.next()?.parse::<i32>().ok();
    Some(Stat {
        pid,
        state,
        ppid: number()?,
        pgrp: number()?,
        session: number()?,
    })
}

/// Every process this host can see.
pub(super) fn all() -> Vec<Stat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat)
        .collect()
}

/// The cgroup v2 path of `pid` (the `0::` line of `/proc/PID/cgroup`); a zombie keeps it.
pub(super) fn cgroup_of(pid: i32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string)
}

/// Every process below `roots` by parent links, the roots included.
pub(super) fn closure(all: &[Stat], roots: impl IntoIterator<Item = i32>) -> Vec<i32> {
    let mut found: Vec<i32> = roots.into_iter().collect();
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        for p in all {
            if p.ppid == parent && !found.contains(&p.pid) {
                found.push(p.pid);
            }
        }
        i += 1;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_after_the_command_name() {
        let line = b"4242 (a (weird) name) S 17 4242 4242 0 -1 4194560 0 0";
        assert_eq!(
            parse_stat(4242, line),
            Some(Stat {
                pid: 4242,
                state: b'S',
                ppid: 17,
                pgrp: 4242,
                session: 4242
            })
        );
        assert_eq!(parse_stat(1, b"garbage"), None);
    }

    #[test]
    fn the_closure_follows_parent_links() {
        let p = |pid, ppid| Stat {
            pid,
            state: b'S',
            ppid,
            pgrp: pid,
            session: pid,
        };
        let all = [p(10, 1), p(11, 10), p(12, 11), p(13, 1), p(14, 12)];
        let mut got = closure(&all, [10]);
        got.sort_unstable();
        assert_eq!(got, vec![10, 11, 12, 14]);
    }
}
