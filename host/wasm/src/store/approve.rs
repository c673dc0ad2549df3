//! Approvals of the grants a store uses (`[approvals] write`, `http`): the first use of a
//! directory for writing, or of an origin, in a call or a run waits for a yes when the class
//! says `ask`; later uses in the same store go ahead on that yes.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use seam_core::approval::{GrantClass, Policy, Subject};
use seam_core::approvals::{Approvals, Asker, Refused};
use seam_core::sync::lock;
use tokio_util::sync::CancellationToken;

/// What a store asks with.
#[derive(Clone)]
pub struct GrantApprovals {
    engine: Arc<Approvals>,
    asker: Arc<Asker>,
    abort: CancellationToken,
    plugin: Arc<str>,
    /// The `class:target`s this store was allowed.
    allowed: Arc<Mutex<HashSet<String>>>,
    /// What a write is asked for: the store's writable directories on the host.
    writable: String,
}

impl GrantApprovals {
    /// What a store of `plugin` with `granted` asks with, for the holder of `account`
    /// working in `session`, withdrawn when `abort` is cancelled.
    pub fn new(
        engine: Arc<Approvals>,
        account: &seam_core::ledger::Account,
        session: &str,
        abort: CancellationToken,
        plugin: &Arc<str>,
        granted: &crate::sandbox::Granted,
    ) -> Self {
        Self {
            engine,
            asker: Arc::new(Asker::of(account, session)),
            abort,
            plugin: plugin.clone(),
            allowed: Arc::default(),
            writable: granted
                .dirs
                .iter()
                .filter(|d| d.write)
                .map(|d| d.host.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// Whether a use of `class` needs a yes first (`[approvals]`).
    pub fn needs(&self, class: GrantClass) -> bool {
        self.engine.settings().for_grant(class) != Policy::Allow
    }

    /// Asks, once per store, whether the plugin may write in its writable directories.
    pub async fn check_write(&self) -> Result<(), Refused> {
        if self.writable.is_empty() {
            // Nothing is writable: the write fails on its own.
            return Ok(());
        }
        self.check(GrantClass::Write, self.writable.clone()).await
    }

    /// Asks, once per store, whether the plugin may use its grant of `class` on `target`.
    pub async fn check(&self, class: GrantClass, target: String) -> Result<(), Refused> {
        let policy = self.engine.settings().for_grant(class);
        let key = format!("{}:{target}", class.as_str());
        if policy == Policy::Allow || lock(&self.allowed).contains(&key) {
            return Ok(());
        }
        let subject = Subject::Grant {
            class,
            plugin: self.plugin.to_string(),
            target,
        };
        self.engine
            .check(policy, &self.asker, subject, &self.abort)
            .await?;
        lock(&self.allowed).insert(key);
        Ok(())
    }
}
