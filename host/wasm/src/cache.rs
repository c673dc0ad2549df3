//! Compilation, through an on-disk cache of compiled artifacts.
//!
//! An artifact is native code that the host maps and runs, so the cache is trusted: its entries
//! are named after the component's digest and the engine's compatibility hash, and it lives in a
//! directory of the user's own (`$SEAM_CACHE_DIR`, `$XDG_CACHE_HOME/seam` or `~/.cache/seam`).
//! An entry that wasmtime refuses to deserialize is recompiled and rewritten.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use seam_core::types::PluginKind;
use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::Engine;

use crate::engine::EngineError;

/// How a [`CompileCache::compile`] got its component, for tests and diagnostics.
#[derive(Debug, Default)]
pub struct CacheStats {
    /// Components compiled from source (a miss, a stale entry, or no cache).
    pub compiled: AtomicU64,
    /// Components loaded from a cached artifact.
    pub hits: AtomicU64,
    /// Cached artifacts that could not be used and were rewritten.
    pub rewritten: AtomicU64,
}

/// Compiles components for one engine, through its artifact cache.
pub(crate) struct CompileCache {
    engine: Engine,
    dir: Option<PathBuf>,
    stats: CacheStats,
}

impl CompileCache {
    /// A cache in `dir` (none: compile every time) for `engine`.
    pub(crate) fn new(engine: Engine, dir: Option<PathBuf>) -> Self {
        Self {
            engine,
            dir,
            stats: CacheStats::default(),
        }
    }

    /// What the cache did so far.
    pub(crate) fn stats(&self) -> &CacheStats {
        &self.stats
    }

    /// Reads and compiles a component, through the artifact cache when one is configured.
    pub(crate) fn compile(&self, path: &Path) -> Result<Component, EngineError> {
        let bytes = std::fs::read(path).map_err(|source| EngineError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let invalid = |e: wasmtime::Error| EngineError::Invalid {
            path: path.to_path_buf(),
            reason: format!("{e:#}"),
        };
        let Some(cached) = self.entry_path(&bytes) else {
            self.stats.compiled.fetch_add(1, Ordering::Relaxed);
            return Component::new(&self.engine, &bytes).map_err(invalid);
        };
        let mut stale = false;
        if cached.is_file() {
            // SAFETY: the artifact is native code for this engine. The cache directory is the
            // user's own, and the entry's name binds it to this source and this engine
            // configuration; wasmtime checks the artifact's header and engine settings and
            // refuses a file that is not one of its artifacts.
            match unsafe { Component::deserialize_file(&self.engine, &cached) } {
                Ok(component) => {
                    self.stats.hits.fetch_add(1, Ordering::Relaxed);
                    return Ok(component);
                }
                Err(e) => {
                    stale = true;
                    tracing::warn!(file = %cached.display(), error = %e, "stale compile cache entry; recompiling")
                }
            }
        }
        self.stats.compiled.fetch_add(1, Ordering::Relaxed);
        let component = Component::new(&self.engine, &bytes).map_err(invalid)?;
        match self.store_artifact(&component, &cached) {
            Ok(()) if stale => {
                self.stats.rewritten.fetch_add(1, Ordering::Relaxed);
            }
            Ok(()) => {}
            // A cache that cannot be written only costs time on the next start.
            Err(e) => {
                tracing::warn!(file = %cached.display(), error = %e, "cannot write compile cache")
            }
        }
        Ok(component)
    }

    fn entry_path(&self, bytes: &[u8]) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        let mut engine_hash = std::collections::hash_map::DefaultHasher::new();
        self.engine
            .precompile_compatibility_hash()
            .hash(&mut engine_hash);
        let digest = Sha256::digest(bytes);
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        Some(dir.join(format!("{hex}-{:016x}.cwasm", engine_hash.finish())))
    }

    fn store_artifact(&self, component: &Component, path: &Path) -> std::io::Result<()> {
        let artifact = component
            .serialize()
            .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        // Write then rename, so a concurrent reader never sees half a file; the temporary name
        // is unique so that two plugins compiling the same component do not collide.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let tmp = dir.join(format!(
            ".{}.{}.{}.tmp",
            path.file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("artifact"),
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&tmp, artifact)?;
        std::fs::rename(&tmp, path)
    }

    /// The kind of plugin `component` is, by its exports.
    pub(crate) fn kind_of(
        &self,
        path: &Path,
        component: &Component,
    ) -> Result<PluginKind, EngineError> {
        let ty = component.component_type();
        let exports: Vec<String> = ty
            .exports(&self.engine)
            .map(|(n, _)| n.to_string())
            .collect();
        match crate::wit::recognise(exports.iter().map(String::as_str)) {
            Some((kind, _version)) => Ok(kind),
            None => Err(EngineError::WrongWorld {
                path: path.to_path_buf(),
                exports: exports.join(", "),
            }),
        }
    }
}
