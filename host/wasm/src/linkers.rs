//! One linker per world of every supported version, assembled once per engine from the WASI
//! shadows (`crate::wasi`) and the version's host imports: the latest's in `crate::interfaces`,
//! an older version's in its own folder's `imports`.

use seam_core::PluginKind;
use wasmtime::component::Linker;
use wasmtime::Engine;

use crate::store::StoreData;
use crate::versions::WitVersion;

/// The linkers, by version and kind.
pub struct Linkers {
    /// Indexed by [`WitVersion::index`], then [`kind_index`].
    worlds: Vec<[Linker<StoreData>; PluginKind::ALL.len()]>,
}

/// A kind's place in [`PluginKind::ALL`].
fn kind_index(kind: PluginKind) -> usize {
    match kind {
        PluginKind::Provider => 0,
        PluginKind::Tool => 1,
        PluginKind::Observer => 2,
    }
}

/// What every world links: WASI (with the host's shadows of what it must count or log) and
/// `wasi:http`, which refuses every origin the entry does not grant.
fn base(engine: &Engine) -> wasmtime::Result<Linker<StoreData>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
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

/// Adds `$version`'s host imports for `$kind` to `$linker`: each version's `imports` module
/// (the latest's is `crate::interfaces`; an older one's converts and delegates to it).
macro_rules! add_imports {
    ([$linker:ident, $version:ident, $kind:ident]
     $($variant:ident $module:ident $number:literal [$($file:literal),*],)+) => {
        match $version {
            $(WitVersion::$variant => {
                crate::versions::$module::imports::add_to_linker(&mut $linker, $kind)?
            })+
        }
    };
}
use add_imports;

impl Linkers {
    /// The linkers of every world of every supported version, on `engine`.
    pub fn new(engine: &Engine) -> wasmtime::Result<Self> {
        let worlds = WitVersion::ALL
            .into_iter()
            .map(|version| {
                let [p, t, o] = PluginKind::ALL;
                Ok([
                    world(engine, version, p)?,
                    world(engine, version, t)?,
                    world(engine, version, o)?,
                ])
            })
            .collect::<wasmtime::Result<_>>()?;
        Ok(Self { worlds })
    }

    /// The linker of `kind`'s world in `version`.
    pub fn of(&self, kind: PluginKind, version: WitVersion) -> &Linker<StoreData> {
        &self.worlds[version.index()][kind_index(kind)]
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
