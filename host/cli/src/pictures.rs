//! What a command draws when it ends, from one [`Recording`]: `--tree` on stderr, and
//! `--trace FILE`.

use seam_host::Host;

use crate::recording::Recording;

/// What a command draws when it ends: `--tree` on stderr, `--trace FILE`.
pub(crate) struct Pictures {
    recording: Recording,
    tree: bool,
    trace: Option<std::path::PathBuf>,
}

impl Pictures {
    /// Starts recording if `--tree` or `--trace` asks for it.
    pub(crate) fn start(host: &Host, tree: bool, trace: Option<&std::path::Path>) -> Option<Self> {
        (tree || trace.is_some()).then(|| Self {
            recording: Recording::start(host),
            tree,
            trace: trace.map(std::path::Path::to_path_buf),
        })
    }

    /// Stops recording; prints the tree under `root` (with how its turn ended, if it had
    /// one) and writes the trace of `command`.
    pub(crate) fn finish(
        self,
        host: &Host,
        root: &str,
        outcome: Option<&seam_host::StopReason>,
        command: &str,
    ) -> anyhow::Result<()> {
        let recorded = self.recording.finish(host);
        if self.tree {
            errln!(
                "{}",
                crate::tree::draw_tree(&recorded, root, outcome).trim_end()
            );
        }
        if let Some(path) = &self.trace {
            crate::trace::write_trace(&recorded, command, path)?;
        }
        Ok(())
    }
}
