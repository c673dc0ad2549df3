//! Background runs: runs that belong to an agent rather than to the tool call that started them.
//! They survive the call, are listed, read, steered and stopped only by their owner, and are
//! cancelled and disposed with it.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use crate::sync;

use super::SubagentRun;
use crate::types::RunInfo;

/// Most background runs one agent may have going at once.
pub const MAX_BACKGROUND_RUNS: usize = 64;

/// Most settled background runs one agent keeps for reading; the oldest are disposed first.
pub const MAX_SETTLED_BACKGROUND_RUNS: usize = 64;

struct Entry {
    run: SubagentRun,
    label: String,
    /// Whether the owner has been told that it settled.
    notified: bool,
}

/// Every agent's background runs, by owner id, oldest first.
#[derive(Default)]
pub(crate) struct Backgrounds {
    by_owner: Mutex<HashMap<String, Vec<Entry>>>,
}

impl Backgrounds {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Vec<Entry>>> {
        sync::lock(&self.by_owner)
    }

    /// Whether `owner` has any runs.
    pub(crate) fn has(&self, owner: &str) -> bool {
        self.lock().get(owner).is_some_and(|runs| !runs.is_empty())
    }

    /// How many of `owner`'s background runs have not settled.
    pub(crate) fn running(&self, owner: &str) -> usize {
        self.lock().get(owner).map_or(0, |runs| {
            runs.iter().filter(|e| e.run.try_result().is_none()).count()
        })
    }

    /// How many background runs of any owner have not settled.
    pub(crate) fn running_total(&self) -> usize {
        self.lock()
            .values()
            .flatten()
            .filter(|e| e.run.try_result().is_none())
            .count()
    }

    /// Adds a run to `owner`'s; returns the settled runs it pushed out (to be disposed).
    /// With `only_if_present`, an owner with no runs (one being or already disposed) is refused,
    /// and the run handed back.
    pub(crate) fn add(
        &self,
        owner: &str,
        run: SubagentRun,
        label: String,
        only_if_present: bool,
    ) -> Result<Vec<SubagentRun>, SubagentRun> {
        let mut all = self.lock();
        if only_if_present && !all.contains_key(owner) {
            return Err(run);
        }
        let runs = all.entry(owner.to_string()).or_default();
        runs.push(Entry {
            run,
            label,
            notified: false,
        });
        let mut settled = runs.iter().filter(|e| e.run.try_result().is_some()).count();
        let mut evicted = Vec::new();
        while settled > MAX_SETTLED_BACKGROUND_RUNS {
            let Some(i) = runs.iter().position(|e| e.run.try_result().is_some()) else {
                break;
            };
            evicted.push(runs.remove(i).run);
            settled -= 1;
        }
        Ok(evicted)
    }

    /// What `owner` can see of its runs, oldest first.
    pub(crate) fn list(&self, owner: &str) -> Vec<RunInfo> {
        self.lock()
            .get(owner)
            .map(|runs| runs.iter().map(|e| e.run.info(&e.label)).collect())
            .unwrap_or_default()
    }

    /// One of `owner`'s runs.
    pub(crate) fn get(&self, owner: &str, id: &str) -> Option<(SubagentRun, String)> {
        self.lock().get(owner).and_then(|runs| {
            runs.iter()
                .find(|e| e.run.id() == id)
                .map(|e| (e.run.clone(), e.label.clone()))
        })
    }

    /// `owner`'s runs that settled since it was last told, marked as told.
    pub(crate) fn take_settled(&self, owner: &str) -> Vec<RunInfo> {
        let mut all = self.lock();
        let Some(runs) = all.get_mut(owner) else {
            return Vec::new();
        };
        runs.iter_mut()
            .filter(|e| !e.notified && e.run.try_result().is_some())
            .map(|e| {
                e.notified = true;
                e.run.info(&e.label)
            })
            .collect()
    }

    /// `owner`'s runs that settled since it was last told, with their labels, marked as told.
    pub(crate) fn take_settled_runs(&self, owner: &str) -> Vec<(SubagentRun, String)> {
        let mut all = self.lock();
        let Some(runs) = all.get_mut(owner) else {
            return Vec::new();
        };
        runs.iter_mut()
            .filter(|e| !e.notified && e.run.try_result().is_some())
            .map(|e| {
                e.notified = true;
                (e.run.clone(), e.label.clone())
            })
            .collect()
    }

    /// `owner`'s runs that have not settled, with their labels.
    pub(crate) fn running_runs(&self, owner: &str) -> Vec<(SubagentRun, String)> {
        self.lock().get(owner).map_or(Vec::new(), |runs| {
            runs.iter()
                .filter(|e| e.run.try_result().is_none())
                .map(|e| (e.run.clone(), e.label.clone()))
                .collect()
        })
    }

    /// All of `owner`'s runs, left in place.
    pub(crate) fn runs_of(&self, owner: &str) -> Vec<SubagentRun> {
        self.lock()
            .get(owner)
            .map(|runs| runs.iter().map(|e| e.run.clone()).collect())
            .unwrap_or_default()
    }

    /// Removes and returns all of `owner`'s runs.
    pub(crate) fn remove_owner(&self, owner: &str) -> Vec<SubagentRun> {
        self.lock()
            .remove(owner)
            .map(|runs| runs.into_iter().map(|e| e.run).collect())
            .unwrap_or_default()
    }
}
