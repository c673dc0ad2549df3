//! One linker per world of every supported version, assembled once per engine from the WASI
//! shadows (`crate::wasi`) and the version's host imports: the latest's in `crate::interfaces`,
//! an older version's in its own folder's `imports`.

use seam_core::PluginKind;
use wasmtime::component::Linker;
use wasmtime::Engine;

use crate::store::StoreData;
use crate::versions::WitVersion;

/// The linkers, by version and kind: none where the version has no world of the kind.
pub struct Linkers {
    /// Indexed by [`WitVersion::index`], then [`kind_index`].
    worlds: Vec<[Option<Linker<StoreData>>; PluginKind::ALL.len()]>,
}

/// A kind's place in [`PluginKind::ALL`].
fn kind_index(kind: PluginKind) -> usize {
    PluginKind::ALL
        .iter()
        .position(|k| *k == kind)
        .unwrap_or_default()
}

/// What every world links: WASI 0.2 and 0.3 (with the host's shadows of what it must count or
/// log) and `wasi:http` of both, which refuse every origin the entry does not grant. Both in one
/// linker: a component built for 0.3 still imports 0.2 from Rust's and Python's standard
/// libraries.
fn base(engine: &Engine) -> wasmtime::Result<Linker<StoreData>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    wasmtime_wasi::p3::add_to_linker(&mut linker)?;
    wasmtime_wasi_http::p3::add_to_linker(&mut linker)?;
    crate::wasi::add_to_linker(&mut linker)?;
    Ok(linker)
}

/// The linker of `kind`'s world in `version`.
fn world(
    engine: &Engine,
    version: WitVersion,
    kind: PluginKind,
) -> wasmtime::Result<Linker<StoreData>> {
    let mut linker = base(engine)?;
    crate::versions::for_each_version!(add_imports, linker, version, kind);
    Ok(linker)
}

/// Adds `$version`'s host imports for `$kind` to `$linker`: the latest's are the host's own
/// interfaces (`crate::interfaces`); an older version's are its module's `imports`, which
/// convert and delegate to them. The match's arms are gathered row by row, the last row (the
/// latest) apart.
macro_rules! add_imports {
    ([$linker:ident, $version:ident, $kind:ident] $($rows:tt)*) => {
        add_imports!(@ [$linker, $version, $kind] [] $($rows)*)
    };
    (@ [$linker:ident, $version:ident, $kind:ident] [$($arms:tt)*]
     $v:ident $m:ident $n:literal [$($f:literal),*] {$($k:ident)*},) => {
        match $version {
            $($arms)*
            WitVersion::$v => crate::interfaces::add_to_linker(&mut $linker, $kind)?,
        }
    };
    (@ [$linker:ident, $version:ident, $kind:ident] [$($arms:tt)*]
     $v:ident $m:ident $n:literal [$($f:literal),*] {$($k:ident)*}, $($rows:tt)+) => {
        add_imports!(@ [$linker, $version, $kind] [
            $($arms)*
            WitVersion::$v => crate::versions::$m::imports::add_to_linker(&mut $linker, $kind)?,
        ] $($rows)+)
    };
}
use add_imports;

impl Linkers {
    /// The linkers of every world of every supported version, on `engine`.
    pub fn new(engine: &Engine) -> wasmtime::Result<Self> {
        let worlds = WitVersion::ALL
            .into_iter()
            .map(|version| {
                let mut linkers: [Option<Linker<StoreData>>; PluginKind::ALL.len()] =
                    std::array::from_fn(|_| None);
                for &kind in version.kinds() {
                    linkers[kind_index(kind)] = Some(world(engine, version, kind)?);
                }
                Ok(linkers)
            })
            .collect::<wasmtime::Result<_>>()?;
        Ok(Self { worlds })
    }

    /// The linker of `kind`'s world in `version`, if the version has that world.
    pub fn of(&self, kind: PluginKind, version: WitVersion) -> Option<&Linker<StoreData>> {
        self.worlds[version.index()][kind_index(kind)].as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_place() {
        for (i, kind) in PluginKind::ALL.into_iter().enumerate() {
            assert_eq!(kind_index(kind), i);
        }
    }
}
