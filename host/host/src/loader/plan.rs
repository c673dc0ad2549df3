//! The pure half of a reconfigure: what to do with each loaded plugin and each config entry,
//! decided from the old slots and the new config alone. It touches no file, engine or registry,
//! so every case is a unit test.

use crate::config::PluginEntry;

use super::status::{PluginState, Reload};

/// What the plan knows of a loaded plugin.
pub(crate) struct Loaded<'a> {
    /// Its entry as it was loaded.
    pub(crate) entry: &'a PluginEntry,
    /// Where it stands.
    pub(crate) state: &'a PluginState,
    /// Whether its component file was rewritten since it was prepared.
    pub(crate) rebuilt: bool,
}

/// Why a config entry is prepared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    /// It is new (or was unloaded by `unload_all`).
    Load,
    /// Its definition or its component file changed.
    Reload,
    /// It had failed and is tried again, unchanged.
    Retry,
}

/// The plan: indices into the old slots (`old`) and the new config's entries (`new`).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Old slots to unload before anything is prepared, last loaded first.
    pub(crate) unload: Vec<usize>,
    /// Old slots whose entry left the config (a subset of `unload`).
    pub(crate) removed: Vec<usize>,
    /// Old slots that go on serving until their entry's new version is ready
    /// ([`Reload::Swap`], active ones only).
    pub(crate) serving: Vec<usize>,
    /// Old slots kept as they are, by the new entry's index.
    pub(crate) keep: Vec<(usize, usize)>,
    /// New entries to prepare (concurrently) and commit, in config order.
    pub(crate) prepare: Vec<(usize, Why)>,
}

impl Plan {
    /// Decides what moving from `old` (in load order) to `new` (in config order) does.
    pub(crate) fn new(old: &[Loaded<'_>], new: &[PluginEntry], reload: Reload) -> Self {
        let mut plan = Plan::default();
        let mut why: Vec<Option<Why>> = vec![Some(Why::Load); new.len()];
        for (i, slot) in old.iter().enumerate().rev() {
            if *slot.state == PluginState::Disposed {
                // Unloaded by `unload_all`: nothing to tear down; loaded afresh if still listed.
                continue;
            }
            let Some(at) = new.iter().position(|e| e.id == slot.entry.id) else {
                plan.unload.push(i);
                plan.removed.push(i);
                continue;
            };
            if new[at] == *slot.entry && !slot.rebuilt {
                if matches!(slot.state, PluginState::Failed(_)) {
                    // A failed entry holds nothing; its cause (a missing file) may be fixed.
                    why[at] = Some(Why::Retry);
                } else {
                    why[at] = None;
                    plan.keep.push((i, at));
                }
                continue;
            }
            why[at] = Some(Why::Reload);
            if reload == Reload::Swap && *slot.state == PluginState::Active {
                plan.serving.push(i);
            } else {
                plan.unload.push(i);
            }
        }
        plan.prepare = why
            .into_iter()
            .enumerate()
            .filter_map(|(at, why)| Some((at, why?)))
            .collect();
        plan.keep.sort_by_key(|(_, at)| *at);
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn entries(toml: &str) -> Vec<PluginEntry> {
        Config::parse(
            toml,
            std::path::Path::new("seam.toml"),
            std::path::Path::new("/tmp"),
        )
        .expect("a valid config")
        .plugins
    }

    const A_B_C: &str = r#"
        [[plugin]]
        id = "a"
        component = "a.wasm"
        [[plugin]]
        id = "b"
        component = "b.wasm"
        [[plugin]]
        id = "c"
        component = "c.wasm"
    "#;

    fn loaded<'a>(entries: &'a [PluginEntry], states: &'a [PluginState]) -> Vec<Loaded<'a>> {
        entries
            .iter()
            .zip(states)
            .map(|(entry, state)| Loaded {
                entry,
                state,
                rebuilt: false,
            })
            .collect()
    }

    #[test]
    fn a_first_load_prepares_every_entry_in_config_order() {
        let new = entries(A_B_C);
        let plan = Plan::new(&[], &new, Reload::Restart);
        assert_eq!(
            plan.prepare,
            vec![(0, Why::Load), (1, Why::Load), (2, Why::Load)]
        );
        assert!(plan.unload.is_empty() && plan.keep.is_empty() && plan.serving.is_empty());
    }

    #[test]
    fn unchanged_active_entries_are_kept_and_failed_ones_retried() {
        let new = entries(A_B_C);
        let states = [
            PluginState::Active,
            PluginState::Failed("missing".into()),
            PluginState::Disabled,
        ];
        let plan = Plan::new(&loaded(&new, &states), &new, Reload::Restart);
        assert_eq!(plan.keep, vec![(0, 0), (2, 2)]);
        assert_eq!(plan.prepare, vec![(1, Why::Retry)]);
        assert!(plan.unload.is_empty());
    }

    #[test]
    fn removed_entries_unload_last_loaded_first() {
        let old = entries(A_B_C);
        let new = entries("[[plugin]]\nid = \"b\"\ncomponent = \"b.wasm\"\n");
        let states = [
            PluginState::Active,
            PluginState::Active,
            PluginState::Active,
        ];
        let plan = Plan::new(&loaded(&old, &states), &new, Reload::Restart);
        assert_eq!(plan.unload, vec![2, 0]);
        assert_eq!(plan.removed, vec![2, 0]);
        assert_eq!(plan.keep, vec![(1, 0)]);
        assert!(plan.prepare.is_empty());
    }

    #[test]
    fn a_changed_entry_restarts_or_serves_until_its_new_version_is_ready() {
        let old = entries(A_B_C);
        let new = entries(&A_B_C.replace("b.wasm", "b2.wasm"));
        let states = [
            PluginState::Active,
            PluginState::Active,
            PluginState::Active,
        ];
        let restart = Plan::new(&loaded(&old, &states), &new, Reload::Restart);
        assert_eq!(restart.unload, vec![1]);
        assert!(restart.removed.is_empty());
        assert_eq!(restart.prepare, vec![(1, Why::Reload)]);
        let swap = Plan::new(&loaded(&old, &states), &new, Reload::Swap);
        assert!(swap.unload.is_empty());
        assert_eq!(swap.serving, vec![1]);
        assert_eq!(swap.prepare, vec![(1, Why::Reload)]);
        // Only an active plugin serves: a failed one has nothing to serve with.
        let states = [
            PluginState::Active,
            PluginState::Failed("x".into()),
            PluginState::Active,
        ];
        let swap = Plan::new(&loaded(&old, &states), &new, Reload::Swap);
        assert_eq!(swap.unload, vec![1]);
        assert!(swap.serving.is_empty());
    }

    #[test]
    fn a_rebuilt_component_counts_as_a_change() {
        let new = entries(A_B_C);
        let states = [
            PluginState::Active,
            PluginState::Active,
            PluginState::Active,
        ];
        let mut old = loaded(&new, &states);
        old[2].rebuilt = true;
        let plan = Plan::new(&old, &new, Reload::Restart);
        assert_eq!(plan.unload, vec![2]);
        assert_eq!(plan.prepare, vec![(2, Why::Reload)]);
        assert_eq!(plan.keep, vec![(0, 0), (1, 1)]);
    }

    #[test]
    fn disposed_plugins_are_loaded_afresh_and_new_entries_follow_config_order() {
        let old = entries(A_B_C);
        let new = entries(&format!(
            "[[plugin]]\nid = \"z\"\ncomponent = \"z.wasm\"\n{A_B_C}"
        ));
        let states = [
            PluginState::Disposed,
            PluginState::Disposed,
            PluginState::Disposed,
        ];
        let plan = Plan::new(&loaded(&old, &states), &new, Reload::Restart);
        assert!(plan.unload.is_empty() && plan.keep.is_empty());
        assert_eq!(
            plan.prepare,
            vec![
                (0, Why::Load),
                (1, Why::Load),
                (2, Why::Load),
                (3, Why::Load)
            ]
        );
    }
}
