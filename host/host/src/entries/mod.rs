//! The kinds of `[[plugin]]` entry that are not components (`kind = "acp"`, `"mcp"`, `"a2a"`):
//! one [`EntryBackend`] each, listed once in the table of `entry_kinds!` below ([`KINDS`]).
//!
//! A backend reads its entry's own keys, says what `seam check` prints of it and what
//! `seam dev` watches, and makes the entry's plugin: a provider, or tools mounted when the entry
//! is committed. The config, the loader and the CLI ask the backend and never name a kind, so
//! a new kind is its crate, its feature in `Cargo.toml`, one row of the table and its adapter
//! module here. The table lists every kind whatever the build's features, so that an entry of
//! a kind this build left out is refused by name, and a key of one kind written in another's
//! entry is named with the kinds it belongs to.
//!
//! This module sits below `config` and `loader` (both use it), so its types are its own.

mod backend;

pub use backend::{
    absolute_program, string_list, watched_program, BackendEntry, Context, Entry, EntryBackend,
    Made, MountError, MountTools, Summary,
};

/// Declares the adapter modules and [`KINDS`]: one row per kind, `"name" (feature "f", keys
/// ["own", "keys"]) => module::Backend`. A row's module and backend are compiled only with its
/// feature; the row itself always is.
macro_rules! entry_kinds {
    ($($name:literal (feature $feature:literal, keys [$($key:literal),*]) => $module:ident :: $backend:ident,)*) => {
        $(
            #[cfg(feature = $feature)]
            mod $module;
        )*

        /// Every kind of entry that is not a component, in the order its keys are checked.
        pub static KINDS: &[KindRow] = &[$(
            KindRow {
                name: $name,
                feature: $feature,
                keys: &[$($key),*],
                backend: {
                    #[cfg(feature = $feature)]
                    let backend: Option<&'static dyn EntryBackend> = Some(&$module::$backend);
                    #[cfg(not(feature = $feature))]
                    let backend: Option<&'static dyn EntryBackend> = None;
                    backend
                },
            },
        )*];
    };
}

entry_kinds! {
    "acp" (feature "acp", keys ["command"]) => acp::Acp,
    "mcp" (feature "mcp", keys ["command", "url"]) => mcp::Mcp,
    "a2a" (feature "a2a", keys ["url"]) => a2a::A2a,
}

/// One kind of entry in [`KINDS`].
pub struct KindRow {
    /// What `kind = "..."` says.
    pub name: &'static str,
    /// The cargo feature of `seam-host` that builds it.
    pub feature: &'static str,
    /// The keys of its own, besides `kind`: refused in an entry of another kind.
    pub keys: &'static [&'static str],
    /// Its backend, if this build has the feature.
    pub backend: Option<&'static dyn EntryBackend>,
}

/// The kind of entry `kind = "name"` names, if it is one of [`KINDS`].
pub fn row(name: &str) -> Option<&'static KindRow> {
    KINDS.iter().find(|r| r.name == name)
}

/// The backend of kind `name`, if this build has it.
pub fn backend(name: &str) -> Option<&'static dyn EntryBackend> {
    row(name).and_then(|r| r.backend)
}

/// The key of [`KINDS`] that `kind` (`None` for a component) does not own but `table` has, with
/// the error that names the kinds it belongs to: `key `url` is only for `kind = "mcp"`
/// entries`.
pub fn foreign_key(table: &toml::Table, kind: Option<&str>) -> Option<String> {
    let mut seen: Vec<&str> = Vec::new();
    for key in KINDS.iter().flat_map(|r| r.keys.iter().copied()) {
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let owners: Vec<&KindRow> = KINDS.iter().filter(|r| r.keys.contains(&key)).collect();
        if !table.contains_key(key) || owners.iter().any(|r| Some(r.name) == kind) {
            continue;
        }
        let named: Vec<String> = owners
            .iter()
            .map(|r| format!("`kind = \"{}\"`", r.name))
            .collect();
        let owners = match named.split_last() {
            Some((last, [])) => format!("{last} entries"),
            Some((last, rest)) => format!("{} entries and {last} ones", rest.join(", ")),
            None => String::new(),
        };
        return Some(format!("key `{key}` is only for {owners}"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_of_another_kind_names_the_kinds_it_belongs_to() {
        let table: toml::Table = toml::from_str("command = [\"x\"]").unwrap();
        assert_eq!(
            foreign_key(&table, None).as_deref(),
            Some("key `command` is only for `kind = \"acp\"` entries and `kind = \"mcp\"` ones")
        );
        assert_eq!(foreign_key(&table, Some("acp")), None);
        let table: toml::Table = toml::from_str("url = \"http://x\"").unwrap();
        assert_eq!(
            foreign_key(&table, Some("acp")).as_deref(),
            Some("key `url` is only for `kind = \"mcp\"` entries and `kind = \"a2a\"` ones")
        );
        assert_eq!(foreign_key(&table, Some("mcp")), None);
    }

    #[test]
    fn every_kind_is_listed_once_and_names_itself() {
        for (i, row) in KINDS.iter().enumerate() {
            assert!(
                KINDS[..i].iter().all(|r| r.name != row.name),
                "{}",
                row.name
            );
            if let Some(backend) = row.backend {
                assert_eq!(backend.name(), row.name);
            }
        }
    }
}
