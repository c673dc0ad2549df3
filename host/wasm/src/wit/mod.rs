//! Generated bindings, one module per supported version of the `seam:plugin` WIT package.
//!
//! The host supports [`v0_1_0`] and [`v0_2_0`], which is [`latest`]. The host interfaces are
//! implemented once, against the latest bindings (in `plugin/`); an older module converts its
//! types and delegates to them (as Zed's extension host does), so that components built against
//! it keep loading. `plugin::guest` calls a component's exports whatever its version, in
//! `seam-core`'s types, and `plugin::v0_1_0` holds 0.1.0's host imports.
//!
//! Export names are derived here, from [`PACKAGE`] and each version's `VERSION`, and nowhere
//! else.

pub(crate) mod v0_1_0;
pub(crate) mod v0_2_0;

pub(crate) use v0_2_0 as latest;

use std::path::{Path, PathBuf};

use seam_core::PluginKind;

/// The WIT package every version belongs to.
pub const PACKAGE: &str = "seam:plugin";

/// Versions of the package this host links, oldest first.
pub const SUPPORTED_VERSIONS: &[&str] = &[v0_1_0::VERSION, v0_2_0::VERSION];

/// The supported versions in words: `0.1.0 and 0.2.0`.
pub fn supported_versions() -> String {
    match SUPPORTED_VERSIONS.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The version of `seam:plugin` a component's exports name, supported or not: for one that
/// exports `seam:plugin/provider@0.3.0`, `0.3.0`.
pub fn exported_version<'a>(exports: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let prefix = format!("{PACKAGE}/");
    exports.into_iter().find_map(|e| {
        let rest = e.strip_prefix(&prefix)?;
        let (interface, version) = rest.split_once('@')?;
        let known = [PluginKind::Provider, PluginKind::Tool, PluginKind::Observer]
            .iter()
            .any(|k| exported_interface(*k) == interface);
        known.then(|| version.to_string())
    })
}

/// The interface a component of `kind` exports.
fn exported_interface(kind: PluginKind) -> &'static str {
    match kind {
        PluginKind::Provider => "provider",
        PluginKind::Tool => "tool",
        PluginKind::Observer => "observer",
    }
}

/// The fully qualified export name (`seam:plugin/provider@0.1.0`) of `kind` in `version`.
pub fn export_name(kind: PluginKind, version: &str) -> String {
    format!("{PACKAGE}/{}@{version}", exported_interface(kind))
}

/// Recognises a component by its exports: its kind and the package version it was built
/// against, or `None` if it exports no Seam world this host supports.
pub fn recognise<'a>(
    exports: impl IntoIterator<Item = &'a str> + Clone,
) -> Option<(PluginKind, &'static str)> {
    const KINDS: [PluginKind; 3] = [PluginKind::Provider, PluginKind::Tool, PluginKind::Observer];
    for version in SUPPORTED_VERSIONS.iter().rev() {
        for kind in KINDS {
            let name = export_name(kind, version);
            if exports.clone().into_iter().any(|e| e == name) {
                return Some((kind, version));
            }
        }
    }
    None
}

/// The export names this host recognises, for error messages.
pub fn expected_exports() -> String {
    let mut names = Vec::new();
    for version in SUPPORTED_VERSIONS {
        for kind in [PluginKind::Provider, PluginKind::Tool, PluginKind::Observer] {
            names.push(format!("`{}` ({kind})", export_name(kind, version)));
        }
    }
    names.join(", ")
}

/// One supported version of the WIT package, as this host was built with it.
#[derive(Debug, Clone, Copy)]
pub struct WitPackage {
    /// The package version (`0.1.0`).
    pub version: &'static str,
    /// Its files, by file name, and their text.
    pub files: &'static [(&'static str, &'static str)],
}

/// The WIT packages embedded in the host, oldest first; the last one is the latest.
pub const EMBEDDED: &[WitPackage] = &[
    WitPackage {
        version: v0_1_0::VERSION,
        files: &[("seam.wit", include_str!("../../../../wit/v0.1.0/seam.wit"))],
    },
    WitPackage {
        version: v0_2_0::VERSION,
        files: &[
            ("seam.wit", include_str!("../../../../wit/seam.wit")),
            (
                "deps/io/poll.wit",
                include_str!("../../../../wit/deps/io/poll.wit"),
            ),
        ],
    },
];

/// Why the WIT could not be written out.
#[derive(Debug, thiserror::Error)]
pub enum WitError {
    /// No embedded package has this version.
    #[error("this host does not support `{PACKAGE}@{version}`; it supports {}", SUPPORTED_VERSIONS.join(", "))]
    UnknownVersion {
        /// The version asked for.
        version: String,
    },
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
    let package = match version {
        None => EMBEDDED.last().copied(),
        Some(v) => EMBEDDED.iter().copied().find(|p| p.version == v),
    }
    .ok_or_else(|| WitError::UnknownVersion {
        version: version.unwrap_or_default().to_string(),
    })?;
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
            export_name(PluginKind::Tool, "0.1.0"),
            "seam:plugin/tool@0.1.0"
        );
        let exports = ["wasi:cli/run@0.2.0", "seam:plugin/observer@0.1.0"];
        assert_eq!(
            recognise(exports.iter().copied()),
            Some((PluginKind::Observer, "0.1.0"))
        );
        assert_eq!(
            recognise(["seam:plugin/provider@9.9.9"].iter().copied()),
            None
        );
        assert_eq!(
            exported_version(["wasi:cli/run@0.2.0", "seam:plugin/tool@0.3.0"]),
            Some("0.3.0".to_string())
        );
        assert_eq!(exported_version(["seam:plugin/types@0.3.0"]), None);
        assert_eq!(supported_versions(), "0.1.0 and 0.2.0");
    }
}
