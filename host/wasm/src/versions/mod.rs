//! The versions of the `seam:plugin` WIT package this host links, one folder each.
//!
//! [`WitVersion`] names every supported version; everything that differs between versions is an
//! exhaustive `match` on it, so a new version is a new variant and a new folder, and the compiler
//! lists what else to fill in. Each version folder owns its bindings (`mod.rs`, one
//! `bindings!`); an older one also owns its host imports (`imports.rs`), which convert its types
//! to and from the latest's and delegate to the one implementation in `crate::interfaces` (as
//! Zed's extension host does), declared with [`delegate`]'s macros; `crate::linkers` assembles
//! each version's worlds. [`convert`] converts the latest's types to and from `seam-core`'s, and
//! [`exports`] calls a component's exports whatever its version, through the latest's types.
//!
//! `with:` cannot share an unchanged interface between two versions: the package version is part
//! of every interface's name (`seam:plugin/host@0.1.0`), and the generated `add_to_linker`
//! registers the name it was generated from. So an older version keeps its own bindings and
//! converts.
//!
//! Export names are derived here, from [`PACKAGE`] and each version's `VERSION`, and nowhere
//! else.

/// The one list of supported versions, oldest first, the latest last: each as its variant of
/// [`WitVersion`], the module of its bindings, its number, the files of its
/// frozen folder `wit/vX.Y.Z/`, and the plugin kinds whose worlds it has (in
/// [`PluginKind::ALL`]'s order: a kind exists from the version that adds its world, so the
/// kind x version grid may have holes). Everything per version is generated from it: the
/// modules, the enum, its list, index, number, kinds and WIT files (here), and the dispatch
/// over a component's bindings (`exports`, `crate::linkers`). Each consumer is a macro that
/// takes the list after its own arguments in brackets: `for_each_version!(consumer, args...)`;
/// [`rows_with`] passes a consumer only the versions that have one kind.
macro_rules! for_each_version {
    ($consumer:ident $(, $($args:tt)*)?) => {
        $consumer! {
            [$($($args)*)?]
            V0_1_0 v0_1_0 "0.1.0" ["seam.wit"] {Provider Tool Observer},
            V0_2_0 v0_2_0 "0.2.0" ["seam.wit", "deps/io/poll.wit"] {Provider Tool Observer},
            V0_3_0 v0_3_0 "0.3.0" ["seam.wit", "deps/io/poll.wit"] {Provider Tool Observer},
            V0_4_0 v0_4_0 "0.4.0" ["seam.wit", "deps/io/poll.wit"] {Provider Tool Observer},
            V0_5_0 v0_5_0 "0.5.0" ["seam.wit", "deps/io/poll.wit"] {Provider Tool Observer},
        }
    };
}

/// A `for_each_version!` consumer that hands `$consumer` only the rows whose version has the
/// world of `$kind`: `for_each_version!(rows_with, Tool, consumer, args...)`. Kinds are listed
/// in each row in [`PluginKind::ALL`]'s order, so a kind is found after the optional ones
/// before it; a new kind adds its arm here (without one, no version has it).
macro_rules! rows_with {
    // Every row seen: the kept ones go on.
    ([$kind:ident, $consumer:ident $(, $($args:tt)*)?] [$($kept:tt)*]) => {
        $consumer! { [$($($args)*)?] $($kept)* }
    };
    // The first call: nothing kept yet.
    ([$kind:ident, $consumer:ident $(, $($args:tt)*)?] $v:ident $($rows:tt)*) => {
        $crate::versions::rows_with! { [$kind, $consumer $(, $($args)*)?] [] $v $($rows)* }
    };
    ([Provider $(, $($a:tt)*)?] [$($kept:tt)*]
     $v:ident $m:ident $n:literal [$($f:literal),*] {Provider $($k:ident)*}, $($rows:tt)*) => {
        $crate::versions::rows_with! { [Provider $(, $($a)*)?]
            [$($kept)* $v $m $n [$($f),*] {Provider $($k)*},] $($rows)* }
    };
    ([Tool $(, $($a:tt)*)?] [$($kept:tt)*]
     $v:ident $m:ident $n:literal [$($f:literal),*] {$(Provider)? Tool $($k:ident)*}, $($rows:tt)*) => {
        $crate::versions::rows_with! { [Tool $(, $($a)*)?]
            [$($kept)* $v $m $n [$($f),*] {Tool $($k)*},] $($rows)* }
    };
    ([Observer $(, $($a:tt)*)?] [$($kept:tt)*]
     $v:ident $m:ident $n:literal [$($f:literal),*] {$(Provider)? $(Tool)? Observer $($k:ident)*}, $($rows:tt)*) => {
        $crate::versions::rows_with! { [Observer $(, $($a)*)?]
            [$($kept)* $v $m $n [$($f),*] {Observer $($k)*},] $($rows)* }
    };
    // A row without the kind: skipped.
    ([$kind:ident $(, $($a:tt)*)?] [$($kept:tt)*]
     $v:ident $m:ident $n:literal [$($f:literal),*] {$($k:ident)*}, $($rows:tt)*) => {
        $crate::versions::rows_with! { [$kind $(, $($a)*)?] [$($kept)*] $($rows)* }
    };
}
pub(crate) use for_each_version;
pub(crate) use rows_with;

/// Declares the version modules and [`WitVersion`] from the list.
macro_rules! declare_versions {
    ([] $($variant:ident $module:ident $number:literal [$($file:literal),*] {$($kind:ident)*},)+) => {
        $(
            #[doc = concat!("`seam:plugin@", $number, "`: bindings of `wit/v", $number, "/` and conversions.")]
            pub mod $module;
        )+

        /// A version of the `seam:plugin` package this host links.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum WitVersion {
            $(
                #[doc = concat!("`seam:plugin@", $number, "`, frozen in `wit/v", $number, "/`.")]
                $variant,
            )+
        }

        latest_module!($($variant $module $number,)+);

        impl WitVersion {
            /// Every supported version, oldest first.
            pub const ALL: [WitVersion; [$(stringify!($variant)),+].len()] = [$(Self::$variant),+];

            /// The version as the package spells it (`0.5.0`).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $number,)+
                }
            }

            /// Whether its `provider.run` is async (0.5.0 on), so that one instance can serve
            /// several runs at once.
            pub fn async_run(self) -> bool {
                match self {
                    $(Self::$variant => $module::CONCURRENT_RUN,)+
                }
            }

            /// The plugin kinds whose worlds this version has.
            pub fn kinds(self) -> &'static [PluginKind] {
                match self {
                    $(Self::$variant => &[$(PluginKind::$kind),*],)+
                }
            }

            /// The package's WIT files as this host was built with them.
            pub fn package(self) -> WitPackage {
                let files: &'static [(&'static str, &'static str)] = match self {
                    $(Self::$variant => &[$(
                        ($file, include_str!(concat!("../../../../wit/v", $number, "/", $file))),
                    )*],)+
                };
                WitPackage {
                    version: self,
                    files,
                }
            }
        }
    };
}

/// `pub use` of the list's last module as `latest`: the bindings the host's own interfaces
/// are written against.
macro_rules! latest_module {
    ($variant:ident $module:ident $number:literal,) => {
        /// The latest version's bindings: what the host's own interfaces are written against.
        pub use $module as latest;
    };
    ($variant:ident $module:ident $number:literal, $($rest:tt)+) => {
        latest_module!($($rest)+);
    };
}

/// A version module's bindings of `$path` (its frozen WIT folder, from this crate's root): one
/// module per world, and `wit`, its `types`. The provider world owns the shared `types` and
/// `host` interfaces; the tool and observer worlds reuse them through `with`, so one Rust type
/// stands for each WIT type. WIT resources map onto types owned by `seam-core`, never onto the
/// modules that use these bindings; `provider` and `tool` list what else a version's worlds map
/// (its versions differ in which world declares `subagents.run`), and `provider_imports` the
/// provider world's imports that need more than the default flags (a stream handed to the host
/// needs the store). Every version's WIT errors are the latest's failures
/// (`crate::store::view::ImportError`), which each converts.
macro_rules! bindings {
    ($path:literal, provider { $($provider:tt)* }, tool { $($tool:tt)* }
     $(, provider_imports { $($imports:tt)* })?) => {
        #[allow(missing_docs)]
        pub mod provider_world {
            wasmtime::component::bindgen!({
                path: $path,
                world: "provider-plugin",
                // Resource handles are looked up in a table, which can fail: imports may trap.
                imports: { $($($imports)*)? default: async | trappable },
                exports: { default: async },
                trappable_error_type: {
                    "seam:plugin/types.subagent-error" => crate::versions::convert::SubagentFailure,
                    "seam:plugin/agents.agent-error" => crate::versions::convert::AgentFailure,
                },
                with: { "seam:plugin/agents.child": seam_agent::agent::RunChild, $($provider)* },
            });
        }

        #[allow(missing_docs)]
        pub mod tool_world {
            wasmtime::component::bindgen!({
                path: $path,
                world: "tool-plugin",
                imports: { default: async | trappable },
                exports: { default: async },
                trappable_error_type: {
                    "seam:plugin/types.subagent-error" => crate::versions::convert::SubagentFailure,
                },
                with: {
                    "seam:plugin/types": super::provider_world::seam::plugin::types,
                    "seam:plugin/host": super::provider_world::seam::plugin::host,
                    $($tool)*
                },
            });
        }

        #[allow(missing_docs)]
        pub mod observer_world {
            wasmtime::component::bindgen!({
                path: $path,
                world: "observer-plugin",
                imports: { default: async | trappable },
                exports: { default: async },
                with: {
                    "seam:plugin/types": super::provider_world::seam::plugin::types,
                    "seam:plugin/host": super::provider_world::seam::plugin::host,
                },
            });
        }
    };
}
use bindings;

pub mod convert;
pub mod delegate;
pub mod exports;
pub(crate) mod signals;
for_each_version!(declare_versions);

use std::path::{Path, PathBuf};

use seam_core::PluginKind;
use serde::Serialize;

/// The WIT package every version belongs to.
pub const PACKAGE: &str = "seam:plugin";

impl WitVersion {
    /// The version new components are built against: the list's last.
    pub const LATEST: WitVersion = Self::ALL[Self::ALL.len() - 1];

    /// The newest version whose `provider.run` is blocking: what the guest SDK and the
    /// templates of `seam new` that use no async export are written for.
    pub fn newest_blocking() -> WitVersion {
        Self::ALL
            .into_iter()
            .rev()
            .find(|v| !v.async_run())
            .unwrap_or(Self::ALL[0])
    }

    /// Its place in [`WitVersion::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for WitVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for WitVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A version of the package this host does not link.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "this host does not support `{PACKAGE}@{version}`; it supports {}",
    supported_versions()
)]
pub struct UnsupportedVersion {
    /// The version asked for or found.
    pub version: String,
}

impl std::str::FromStr for WitVersion {
    type Err = UnsupportedVersion;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == text)
            .ok_or_else(|| UnsupportedVersion {
                version: text.to_string(),
            })
    }
}

/// The supported versions in words: `0.1.0, 0.2.0, 0.3.0, 0.4.0 and 0.5.0`.
pub fn supported_versions() -> String {
    let names: Vec<&str> = WitVersion::ALL.iter().map(|v| v.as_str()).collect();
    match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The interface a component of `kind` exports.
fn exported_interface(kind: PluginKind) -> &'static str {
    match kind {
        PluginKind::Provider => "provider",
        PluginKind::Tool => "tool",
        PluginKind::Observer => "observer",
    }
}

/// The WIT world a component of `kind` targets (`provider-plugin`), in every version.
pub fn world_name(kind: PluginKind) -> &'static str {
    match kind {
        PluginKind::Provider => "provider-plugin",
        PluginKind::Tool => "tool-plugin",
        PluginKind::Observer => "observer-plugin",
    }
}

/// The fully qualified export name (`seam:plugin/provider@0.1.0`) of `kind` in `version`.
pub fn export_name(kind: PluginKind, version: WitVersion) -> String {
    format!("{PACKAGE}/{}@{version}", exported_interface(kind))
}

/// What a component's exports say it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recognised {
    /// A plugin of this kind, built against this supported version.
    Plugin(PluginKind, WitVersion),
    /// A Seam world of a version this host does not link (`9.9.0`).
    Unsupported(String),
    /// No Seam world at all.
    Foreign,
}

/// Recognises a component by its export names: the newest supported version wins when a
/// component exports several.
pub fn recognise<'a>(exports: impl IntoIterator<Item = &'a str>) -> Recognised {
    let prefix = format!("{PACKAGE}/");
    let mut best: Option<(PluginKind, WitVersion)> = None;
    let mut unsupported = None;
    for export in exports {
        let Some((interface, version)) = export
            .strip_prefix(&prefix)
            .and_then(|rest| rest.split_once('@'))
        else {
            continue;
        };
        let Some(kind) = PluginKind::ALL
            .into_iter()
            .find(|k| exported_interface(*k) == interface)
        else {
            continue;
        };
        match version.parse::<WitVersion>() {
            // An interface the version's WIT does not have is no plugin of it.
            Ok(v) if !v.kinds().contains(&kind) => {}
            Ok(v) if best.is_none_or(|(_, b)| v > b) => best = Some((kind, v)),
            Ok(_) => {}
            Err(e) => unsupported = unsupported.or(Some(e.version)),
        }
    }
    match (best, unsupported) {
        (Some((kind, version)), _) => Recognised::Plugin(kind, version),
        (None, Some(version)) => Recognised::Unsupported(version),
        (None, None) => Recognised::Foreign,
    }
}

/// The export names this host recognises, for error messages.
pub fn expected_exports() -> String {
    let mut names = Vec::new();
    for version in WitVersion::ALL {
        for &kind in version.kinds() {
            names.push(format!("`{}` ({kind})", export_name(kind, version)));
        }
    }
    names.join(", ")
}

/// One supported version of the WIT package, as this host was built with it.
#[derive(Debug, Clone, Copy)]
pub struct WitPackage {
    /// The package version.
    pub version: WitVersion,
    /// Its files, by file name, and their text.
    pub files: &'static [(&'static str, &'static str)],
}

/// Why the WIT could not be written out.
#[derive(Debug, thiserror::Error)]
pub enum WitError {
    /// The version asked for is not one this host links.
    #[error(transparent)]
    Unsupported(#[from] UnsupportedVersion),
    /// A file could not be written.
    #[error("cannot write `{}`: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Writes the WIT package `version` (the latest if `None`) into `out`, in the layout
/// wit-bindgen, componentize-py and componentize-js read as it is: the package's files directly
/// in `out` (a guest's `wit/` folder), and any package it depends on under `out/deps/`. Returns
/// the files written.
pub fn write_package(out: &Path, version: Option<&str>) -> Result<Vec<PathBuf>, WitError> {
    let version = match version {
        None => WitVersion::LATEST,
        Some(v) => v.parse::<WitVersion>()?,
    };
    let package = version.package();
    let write = |path: PathBuf, text: &str| -> Result<PathBuf, WitError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| WitError::Write {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&path, text).map_err(|source| WitError::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    };
    package
        .files
        .iter()
        .map(|(name, text)| write(out.join(name), text))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_names_come_from_the_package_and_version() {
        assert_eq!(
            export_name(PluginKind::Tool, WitVersion::V0_1_0),
            "seam:plugin/tool@0.1.0"
        );
        let exports = ["wasi:cli/run@0.2.0", "seam:plugin/observer@0.1.0"];
        assert_eq!(
            recognise(exports),
            Recognised::Plugin(PluginKind::Observer, WitVersion::V0_1_0)
        );
        assert_eq!(
            recognise(["seam:plugin/provider@9.9.9"]),
            Recognised::Unsupported("9.9.9".into())
        );
        assert_eq!(recognise(["seam:plugin/types@0.4.0"]), Recognised::Foreign);
        // The newest supported version wins, whatever the order of the exports.
        assert_eq!(
            recognise([
                "seam:plugin/tool@0.2.0",
                "seam:plugin/tool@0.4.0",
                "seam:plugin/tool@0.1.0"
            ]),
            Recognised::Plugin(PluginKind::Tool, WitVersion::V0_4_0)
        );
        assert_eq!(supported_versions(), "0.1.0, 0.2.0, 0.3.0, 0.4.0 and 0.5.0");
    }

    /// A consumer that lists the numbers of the rows it is given.
    macro_rules! numbers {
        ([] $($v:ident $m:ident $n:literal [$($f:literal),*] {$($k:ident)*},)*) => {
            [$($n),*]
        };
    }

    #[test]
    fn a_kind_is_dispatched_only_in_the_versions_that_have_its_world() {
        // A grid with holes: a kind added by a later version, and one a version dropped.
        let tools: &[&str] = &rows_with! { [Tool, numbers]
            V1 m1 "1" [] {Provider},
            V2 m2 "2" [] {Provider Tool},
            V3 m3 "3" [] {Tool Observer},
        };
        assert_eq!(tools, ["2", "3"]);
        let providers: &[&str] = &rows_with! { [Provider, numbers]
            V1 m1 "1" [] {Provider},
            V2 m2 "2" [] {Provider Tool},
            V3 m3 "3" [] {Tool Observer},
        };
        assert_eq!(providers, ["1", "2"]);
        let observers: &[&str] = &rows_with! { [Observer, numbers]
            V1 m1 "1" [] {Provider},
            V2 m2 "2" [] {Provider Observer},
            V3 m3 "3" [] {Provider Tool Observer},
        };
        assert_eq!(observers, ["2", "3"]);
    }

    #[test]
    fn each_version_lists_its_kinds_in_plugin_kind_order() {
        for version in WitVersion::ALL {
            let places: Vec<usize> = version
                .kinds()
                .iter()
                .filter_map(|k| PluginKind::ALL.iter().position(|a| a == k))
                .collect();
            assert_eq!(places.len(), version.kinds().len(), "{version}");
            assert!(places.windows(2).all(|w| w[0] < w[1]), "{version}");
        }
    }

    #[test]
    fn every_version_is_listed_once_in_order() {
        for (i, version) in WitVersion::ALL.iter().enumerate() {
            assert_eq!(version.index(), i);
            assert_eq!(version.as_str().parse::<WitVersion>(), Ok(*version));
            assert_eq!(version.package().version, *version);
        }
        assert_eq!(WitVersion::ALL.last(), Some(&WitVersion::LATEST));
        // A new variant made LATEST without joining ALL is caught here.
        assert_eq!(WitVersion::LATEST.index(), WitVersion::ALL.len() - 1);
        assert_eq!(
            "9.9.0".parse::<WitVersion>(),
            Err(UnsupportedVersion {
                version: "9.9.0".into()
            })
        );
    }
}
