//! Compilation, through an on-disk cache of compiled artifacts.
//!
//! An artifact is native code that the host maps and runs, so the cache must be trusted, and
//! three things make it so:
//!
//! - **The directory is the user's own.** It is created `0700`; one owned by another user or
//!   writable by group or others is refused (a warning names it and says why) and the host
//!   compiles without a cache.
//! - **No plugin can reach it.** A `dirs` grant that is the cache directory, inside it or above
//!   it (symlinks resolved) fails that plugin's load ([`CompileCache::guarded_dir`], checked by
//!   [`Grants::resolve_avoiding`](crate::sandbox::Grants::resolve_avoiding)).
//! - **Each artifact is bound to its source and its engine.** It ends with a trailer: a magic,
//!   the BLAKE3 digest of the component's bytes, a digest of the engine's compatibility hash
//!   (its target, compiler flags, tunables, features and wasmtime's version) and of this
//!   crate's version, and the length and BLAKE3 digest of the artifact body. The trailer and
//!   the body are checked before wasmtime maps the file, so an artifact copied over another
//!   one's name, a file without the trailer, a truncated or edited body are all recompiled and
//!   rewritten, never run.
//!
//! The body comes first, as wasmtime wrote it, so that wasmtime maps the file itself
//! ([`Component::deserialize_file`]): a hit copies nothing, and only the pages of code that
//! run are ever touched. The cache never changes a file in place (it writes a new one and
//! renames it over the old), which is what a mapping needs; the docs' security chapter has the
//! threat model.
//!
//! The directory is `$SEAM_CACHE_DIR`, `$XDG_CACHE_HOME/seam` or `~/.cache/seam` by default.
//!
//! The cache is bounded: a hit marks its artifact used (its modification time), and after each
//! write the least recently used artifacts are removed until the rest fit the cap
//! (`$SEAM_CACHE_MAX_MB`, 1 GiB by default). [`cache_entries`], [`prune_cache`] and
//! [`clear_cache`] are what `seam cache` runs.

use seam_core::sync::lock;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use seam_core::types::PluginKind;

use crate::versions::{Recognised, WitVersion};
use seam_sandbox::trusted_dir::{new_private_file, prepare_dir};
use thiserror::Error;
use wasmtime::component::Component;
use wasmtime::Engine;

use crate::engine::EngineError;

/// Where a loaded component's native code came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Its cached artifact.
    Cached,
    /// Compiled now.
    Compiled,
    /// Another load of the same bytes at the same time.
    Shared,
}

impl Origin {
    /// Its name in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cached => "cache-hit",
            Self::Compiled => "compiled",
            Self::Shared => "shared",
        }
    }
}

/// A component compiled (or read from its artifact) from a file.
pub struct Compiled {
    /// The compiled component.
    pub component: Component,
    /// Where its code came from (compiled now, or a cached artifact).
    pub origin: Origin,
    /// The BLAKE3 of the bytes it was compiled from (what its artifacts are named by).
    pub source: [u8; 32],
}

/// How a [`CompileCache::compile`] got its component, for tests and diagnostics.
#[derive(Debug, Default)]
pub struct CacheStats {
    /// Components compiled from source (a miss, a stale entry, or no cache).
    pub compiled: AtomicU64,
    /// Components loaded from a cached artifact.
    pub hits: AtomicU64,
    /// Cached artifacts that could not be used and were rewritten.
    pub rewritten: AtomicU64,
    /// Loads that took the component another load of the same bytes was compiling or reading
    /// at the same time (several entries of one component, loaded concurrently).
    pub shared: AtomicU64,
}

/// The first bytes of every artifact's trailer; the version is the format's. Version 01 was a
/// header before the body, hashed with SHA-256; its entries have other names (the magic is part
/// of the engine digest) and are never read, only pruned in time.
const MAGIC: &[u8; 16] = b"seam-artifact-02";
/// Magic, source digest, engine digest, body length (u64, little-endian), body digest.
const TRAILER_LEN: usize = MAGIC.len() + 32 + 32 + 8 + 32;

/// One engine's compiler, and what its artifacts name as their engine.
struct Tier {
    engine: Engine,
    /// What an artifact's trailer must name as its engine.
    digest: [u8; 32],
}

impl Tier {
    fn new(engine: Engine) -> Self {
        Self {
            digest: engine_digest(&engine),
            engine,
        }
    }
}

/// Whether a compile may start a component on Winch's code (a tiered host's first load of a
/// large component) or must produce the optimised code (`seam compile`, a tier-up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tiering {
    /// Winch first for a large component without an optimised artifact, if the host is tiered.
    Allowed,
    /// The main engine's code only.
    Optimised,
}

/// Compiles components for the host's engine (and, on a tiered host, for Winch's first),
/// through its artifact cache.
pub struct CompileCache {
    /// The main engine: Cranelift, unless `SEAM_COMPILER` forces Winch.
    main: Tier,
    /// A tiered host's Winch engine, and the smallest component it compiles first.
    baseline: Option<(Tier, u64)>,
    /// Where artifacts are read and written (canonical); `None` when no cache is configured or
    /// the configured one was refused.
    dir: Option<PathBuf>,
    /// The configured directory, canonical as far as it exists, whether or not it is in use:
    /// no grant may reach it.
    guarded: Option<PathBuf>,
    /// Most bytes of artifacts to keep.
    max_bytes: u64,
    stats: CacheStats,
    /// The compiles in progress, by source digest: a second load of the same bytes waits for
    /// the first and takes its component. An entry lives only while someone holds it.
    flights: Mutex<HashMap<[u8; 32], Flight>>,
}

/// One compile in progress: its component once it succeeded.
type Flight = Arc<Mutex<Option<Component>>>;

impl CompileCache {
    /// A cache in `dir` (none: compile every time) for `engine`. The directory is created
    /// `0700` if it is missing; if it is not the user's own, or group or others can write to
    /// it, a warning says so and the host compiles without a cache.
    ///
    /// `baseline`: a tiered host's Winch engine and the smallest component it compiles first.
    pub fn new(
        engine: Engine,
        baseline: Option<(Engine, u64)>,
        dir: Option<PathBuf>,
        max_bytes: u64,
    ) -> Self {
        let (dir, guarded) = match dir {
            None => (None, None),
            Some(configured) => {
                let usable = match prepare_dir(&configured) {
                    Ok(dir) => Some(dir),
                    Err(reason) => {
                        tracing::warn!(
                            dir = %configured.display(),
                            "refusing the compile cache directory `{}`: {reason}; compiling without a cache",
                            configured.display()
                        );
                        None
                    }
                };
                (usable, Some(canonical_lenient(&configured)))
            }
        };
        Self {
            main: Tier::new(engine),
            baseline: baseline.map(|(engine, min_bytes)| (Tier::new(engine), min_bytes)),
            dir,
            guarded,
            max_bytes,
            stats: CacheStats::default(),
            flights: Mutex::default(),
        }
    }

    /// What the cache did so far.
    pub fn stats(&self) -> &CacheStats {
        &self.stats
    }

    /// The configured cache directory (canonical as far as it exists), which no grant may
    /// reach; `None` when no cache is configured.
    pub fn guarded_dir(&self) -> Option<&Path> {
        self.guarded.as_deref()
    }

    /// The cache directory in use (canonical), or why there is none: `Err(None)` when no cache
    /// is configured, `Err(Some(dir))` when the configured one was refused (a warning said why).
    /// The OCI store lives inside it, under the same trust.
    pub fn usable_dir(&self) -> Result<&Path, Option<&Path>> {
        match (&self.dir, &self.guarded) {
            (Some(dir), _) => Ok(dir),
            (None, guarded) => Err(guarded.as_deref()),
        }
    }

    /// Reads and compiles a component, through the artifact cache when one is in use. Loads of
    /// the same bytes at the same time compile once: several entries of one component, which
    /// the loader loads concurrently, would otherwise each compile it (seconds for a Python or
    /// JavaScript guest) or each read its artifact.
    ///
    /// `checked` is the BLAKE3 of the file's bytes when the caller has just hashed them (the OCI
    /// store checks a pulled layer that way): the file is then not hashed again, and a miss
    /// compiles it only if its bytes still have that digest.
    ///
    /// `tiering` says whether a tiered host may start the component on Winch's code
    /// ([`CompileCache::is_baseline`] then says so, and [`CompileCache::tier_up`] makes the
    /// optimised code later).
    pub fn compile(
        &self,
        path: &Path,
        checked: Option<[u8; 32]>,
        tiering: Tiering,
    ) -> Result<Compiled, EngineError> {
        let read_error = |source| EngineError::Read {
            path: path.to_path_buf(),
            source,
        };
        // Hashed as it is read, into a small buffer: a hit needs only the digest, and a
        // large guest's bytes are not worth a copy in memory.
        let source: [u8; 32] = match checked {
            Some(digest) => digest,
            None => std::fs::File::open(path)
                .and_then(|file| {
                    blake3::Hasher::new()
                        .update_reader(file)
                        .map(|h| h.finalize())
                })
                .map_err(read_error)?
                .into(),
        };
        let flight = lock(&self.flights).entry(source).or_default().clone();
        let result = {
            let mut done = lock(&flight);
            match done.as_ref() {
                Some(component) => {
                    self.stats.shared.fetch_add(1, Ordering::Relaxed);
                    Ok((component.clone(), Origin::Shared))
                }
                None => {
                    let result = self.compile_source(path, &source, checked.is_some(), tiering);
                    if let Ok((component, _)) = &result {
                        *done = Some(component.clone());
                    }
                    result
                }
            }
        };
        // The last holder (besides the map) ends the flight; a load that comes later reads the
        // artifact as usual.
        let mut flights = lock(&self.flights);
        if Arc::strong_count(&flight) == 2 {
            flights.remove(&source);
        }
        result.map(|(component, origin)| Compiled {
            component,
            origin,
            source,
        })
    }

    /// The component whose bytes at `path` hashed to `source`: from its cached artifact when
    /// there is a good one, else compiled (and its artifact written). The optimised artifact is
    /// looked for first; a large component without one may start on Winch's (`tiering`).
    /// `pinned`: the bytes must be exactly `source`'s (they were checked against it), so a file
    /// that changed since is refused rather than compiled.
    fn compile_source(
        &self,
        path: &Path,
        source: &[u8; 32],
        pinned: bool,
        tiering: Tiering,
    ) -> Result<(Component, Origin), EngineError> {
        let mut stale = false;
        if let Some(dir) = &self.dir {
            match self.load_artifact(
                &self.main,
                &self.artifact_path(dir, &self.main, source),
                source,
            ) {
                Lookup::Hit(component) => return Ok((component, Origin::Cached)),
                Lookup::Missing => {}
                Lookup::Unusable => stale = true,
            }
        }
        let tier = match (&self.baseline, tiering) {
            (Some((baseline, min_bytes)), Tiering::Allowed)
                if std::fs::metadata(path).is_ok_and(|m| m.len() >= *min_bytes) =>
            {
                if let Some(dir) = &self.dir {
                    let cached = self.artifact_path(dir, baseline, source);
                    match self.load_artifact(baseline, &cached, source) {
                        Lookup::Hit(component) => return Ok((component, Origin::Cached)),
                        Lookup::Missing => {}
                        Lookup::Unusable => stale = true,
                    }
                }
                baseline
            }
            _ => &self.main,
        };
        self.compile_into_cache(tier, path, source, pinned, stale)
            .map(|component| (component, Origin::Compiled))
    }

    /// Compiles the component at `path` (whose bytes hashed to `source`) for `tier`, and
    /// writes its artifact when there is a cache.
    fn compile_into_cache(
        &self,
        tier: &Tier,
        path: &Path,
        source: &[u8; 32],
        pinned: bool,
        stale: bool,
    ) -> Result<Component, EngineError> {
        let (component, compiled) = self.compile_file(tier, path)?;
        if pinned && compiled != *source {
            return Err(EngineError::ChangedSinceChecked {
                path: path.to_path_buf(),
            });
        }
        let Some(dir) = &self.dir else {
            return Ok(component);
        };
        // The file changed since it was hashed: the artifact is named after what was compiled.
        let cached = self.artifact_path(dir, tier, &compiled);
        match self.store_artifact(tier, &component, &compiled, &cached) {
            Ok(()) => {
                if stale {
                    self.stats.rewritten.fetch_add(1, Ordering::Relaxed);
                }
                if let Err(e) = prune_cache(dir, self.max_bytes, Some(&cached)) {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot prune the compile cache");
                }
            }
            // A cache that cannot be written only costs time on the next start.
            Err(e) => {
                tracing::warn!(file = %cached.display(), error = %e, "cannot write compile cache")
            }
        }
        Ok(component)
    }

    /// Whether `component` runs Winch's code on a tiered host (so it awaits its tier-up).
    pub fn is_baseline(&self, component: &Component) -> bool {
        self.baseline
            .as_ref()
            .is_some_and(|(tier, _)| Engine::same(&tier.engine, component.engine()))
    }

    /// The optimised code of the component at `path` whose bytes were checked to hash to
    /// `source` (the digest its Winch code was compiled from): compiled and cached. Meant for
    /// a background thread; a file that changed since is refused.
    pub fn tier_up(&self, path: &Path, source: &[u8; 32]) -> Result<Component, EngineError> {
        if let Some(dir) = &self.dir {
            // Another process (or `seam compile`) may have made it meanwhile.
            let cached = self.artifact_path(dir, &self.main, source);
            if let Lookup::Hit(component) = self.load_artifact(&self.main, &cached, source) {
                return Ok(component);
            }
        }
        self.compile_into_cache(&self.main, path, source, true, false)
    }

    /// Where the artifact of the component with digest `source` is kept, for `tier`.
    fn artifact_path(&self, dir: &Path, tier: &Tier, source: &[u8; 32]) -> PathBuf {
        dir.join(format!("{}-{}.cwasm", hex(source), hex(&tier.digest[..8])))
    }

    /// Reads and compiles the component at `path` for `tier`; returns it with the digest of
    /// the bytes compiled.
    fn compile_file(&self, tier: &Tier, path: &Path) -> Result<(Component, [u8; 32]), EngineError> {
        let bytes = std::fs::read(path).map_err(|source| EngineError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        self.stats.compiled.fetch_add(1, Ordering::Relaxed);
        let component = Component::new(&tier.engine, &bytes).map_err(|e| EngineError::Invalid {
            path: path.to_path_buf(),
            reason: crate::fault::one_line(&format!("{e:#}")),
        })?;
        Ok((component, blake3::hash(&bytes).into()))
    }

    /// The component of the artifact at `cached`, if it is there and good; one that is there
    /// and cannot be used is said in a warning.
    fn load_artifact(&self, tier: &Tier, cached: &Path, source: &[u8; 32]) -> Lookup {
        let refused = |reason: &dyn std::fmt::Display| {
            tracing::warn!(
                file = %cached.display(),
                "refusing compile cache entry `{}`: {reason}; recompiling",
                cached.display()
            );
            Lookup::Unusable
        };
        let file = match std::fs::File::open(cached) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Lookup::Missing,
            Err(e) => return refused(&format_args!("cannot read it: {e}")),
        };
        // SAFETY: the mapping is only read, and only while this function runs. The file is an
        // artifact in the user's own private cache directory, which the host writes only as a
        // new file renamed into place, never in place: nothing changes the mapped file unless
        // the user edits it in place meanwhile (the threat model in the docs' security chapter).
        // Populated at once: every page is about to be hashed.
        let checked = match unsafe { memmap2::MmapOptions::new().populate().map(&file) } {
            Ok(map) => verify(tier, &map, source),
            Err(e) => return refused(&format_args!("cannot map it: {e}")),
        };
        if let Err(reason) = checked {
            return refused(&reason);
        }
        // SAFETY: `deserialize_file` maps the file as native code for this engine, so it must
        // be an artifact this engine wrote for this component, and must not change while the
        // component lives. The trust model: the cache directory is the user's own and no one
        // else can write to it (checked in `new`: owned by this user, not writable by group or
        // others, created 0700); no plugin can reach it (a `dirs` grant at, above or below it
        // fails the plugin's load); the trailer just checked binds the body to the digest of
        // this component's bytes, to this engine's compatibility hash and to the body's own
        // BLAKE3 digest; and wasmtime maps the very file that was checked (`same_file`). The
        // host never writes an artifact in place, so the file stays as checked. wasmtime checks
        // its own header and engine settings again; it reads its image by the ELF's offsets
        // (header, section table, sections), so the trailer after the image is never read.
        match unsafe { Component::deserialize_file(&tier.engine, same_file(&file, cached)) } {
            Ok(component) => {
                self.stats.hits.fetch_add(1, Ordering::Relaxed);
                mark_used(cached);
                Lookup::Hit(component)
            }
            Err(e) => {
                tracing::warn!(
                    file = %cached.display(),
                    error = %format!("{e:#}"),
                    "wasmtime refused a compile cache entry; recompiling"
                );
                Lookup::Unusable
            }
        }
    }

    fn store_artifact(
        &self,
        tier: &Tier,
        component: &Component,
        source: &[u8; 32],
        path: &Path,
    ) -> std::io::Result<()> {
        let body = component
            .serialize()
            .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
        let mut trailer = Vec::with_capacity(TRAILER_LEN);
        trailer.extend_from_slice(MAGIC);
        trailer.extend_from_slice(source);
        trailer.extend_from_slice(&tier.digest);
        trailer.extend_from_slice(&(body.len() as u64).to_le_bytes());
        trailer.extend_from_slice(blake3::hash(&body).as_bytes());
        debug_assert_eq!(trailer.len(), TRAILER_LEN);
        let dir = path.parent().unwrap_or(Path::new("."));
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
        let written = (|| {
            let mut file = new_private_file(&tmp)?;
            file.write_all(&body)?;
            file.write_all(&trailer)?;
            file.flush()?;
            drop(file);
            std::fs::rename(&tmp, path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    /// [`CompileCache::compile`] on a blocking thread (compiling is CPU-bound), then what the
    /// component is: the one path from a file to a recognised component, for loading,
    /// inspecting and `seam compile`.
    /// `checked` and `tiering` as for [`CompileCache::compile`].
    pub async fn compile_and_recognise(
        self: &Arc<Self>,
        path: &Path,
        checked: Option<[u8; 32]>,
        tiering: Tiering,
    ) -> Result<(Compiled, PluginKind, WitVersion), EngineError> {
        let compiled = {
            let path = path.to_path_buf();
            let cache = self.clone();
            tokio::task::spawn_blocking(move || cache.compile(&path, checked, tiering))
                .await
                .map_err(|source| EngineError::Task {
                    what: "compile",
                    source,
                })??
        };
        let (kind, version) = self.kind_of(path, &compiled.component)?;
        Ok((compiled, kind, version))
    }

    /// The kind of plugin `component` is, by its exports, and the package version it was built
    /// against.
    pub fn kind_of(
        &self,
        path: &Path,
        component: &Component,
    ) -> Result<(PluginKind, WitVersion), EngineError> {
        let ty = component.component_type();
        let exports: Vec<String> = ty
            .exports(component.engine())
            .map(|(n, _)| n.to_string())
            .collect();
        match crate::versions::recognise(exports.iter().map(String::as_str)) {
            Recognised::Plugin(kind, version) => Ok((kind, version)),
            Recognised::Unsupported(found) => Err(EngineError::UnsupportedVersion {
                path: path.to_path_buf(),
                found,
            }),
            Recognised::Foreign => Err(EngineError::WrongWorld {
                path: path.to_path_buf(),
                exports: exports.join(", "),
            }),
        }
    }
}

/// What the cache holds for a component.
enum Lookup {
    /// A good artifact, mapped.
    Hit(Component),
    /// No artifact.
    Missing,
    /// An artifact that cannot be used (a warning said why): it is rewritten.
    Unusable,
}

/// Checks an artifact file's trailer against the component's digest and this engine, and
/// its body against the trailer.
fn verify(tier: &Tier, file: &[u8], source: &[u8; 32]) -> Result<(), StaleArtifact> {
    let no_trailer = StaleArtifact::NoTrailer { len: file.len() };
    let Some(at) = file.len().checked_sub(TRAILER_LEN) else {
        return Err(no_trailer);
    };
    let (body, trailer) = file.split_at(at);
    let Some(rest) = trailer.strip_prefix(MAGIC.as_slice()) else {
        return Err(no_trailer);
    };
    let (source_digest, rest) = rest.split_at(32);
    let (engine_digest, rest) = rest.split_at(32);
    let (body_len, body_digest) = rest.split_at(8);
    if source_digest != source.as_slice() {
        return Err(StaleArtifact::OtherSource {
            found: hex(source_digest),
            expected: hex(source),
        });
    }
    if engine_digest != tier.digest.as_slice() {
        return Err(StaleArtifact::OtherEngine);
    }
    let body_len = u64::from_le_bytes(body_len.try_into().expect("8 bytes"));
    if body_len != body.len() as u64 {
        return Err(StaleArtifact::Length {
            len: body.len(),
            trailer: body_len,
        });
    }
    if blake3::hash(body).as_bytes() != body_digest {
        return Err(StaleArtifact::Digest);
    }
    Ok(())
}

/// A path that opens the very file `file` is, where the OS has one (Linux's `/proc/self/fd`):
/// wasmtime then maps the file just checked even if another was renamed over its name since.
/// Elsewhere, `path`.
fn same_file(file: &std::fs::File, path: &Path) -> PathBuf {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let fd = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        if fd.exists() {
            return fd;
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = file;
    path.to_path_buf()
}

/// Marks an artifact as just used (its modification time), for the least-recently-used order.
fn mark_used(path: &Path) {
    // A hit that cannot be marked is evicted a little early, nothing worse.
    if let Ok(file) = std::fs::File::options().append(true).open(path) {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// One artifact in a compile cache directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheEntry {
    /// The artifact file.
    pub path: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// When it was last written or loaded.
    pub last_used: SystemTime,
}

/// The artifacts in `dir`, most recently used first. A missing directory has none.
pub fn cache_entries(dir: &Path) -> std::io::Result<Vec<CacheEntry>> {
    let read = match std::fs::read_dir(dir) {
        Ok(read) => read,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut entries = Vec::new();
    for item in read {
        let item = item?;
        let path = item.path();
        if path.extension().and_then(|e| e.to_str()) != Some("cwasm") {
            continue;
        }
        // Another process may remove it meanwhile.
        let Ok(meta) = item.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        entries.push(CacheEntry {
            path,
            bytes: meta.len(),
            last_used: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        });
    }
    entries.sort_by(|a, b| b.last_used.cmp(&a.last_used).then(a.path.cmp(&b.path)));
    Ok(entries)
}

/// Removes the least recently used artifacts of `dir` until the rest take at most `max_bytes`,
/// never `keep` (the artifact just written). Returns what it removed.
pub fn prune_cache(
    dir: &Path,
    max_bytes: u64,
    keep: Option<&Path>,
) -> std::io::Result<Vec<CacheEntry>> {
    let entries = cache_entries(dir)?;
    let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
    let mut removed = Vec::new();
    for entry in entries.into_iter().rev() {
        if total <= max_bytes {
            break;
        }
        if keep.is_some_and(|k| k == entry.path) {
            continue;
        }
        match std::fs::remove_file(&entry.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        total = total.saturating_sub(entry.bytes);
        removed.push(entry);
    }
    Ok(removed)
}

/// Removes every artifact of `dir`; returns what it removed.
pub fn clear_cache(dir: &Path) -> std::io::Result<Vec<CacheEntry>> {
    prune_cache(dir, 0, None)
}

/// Feeds whatever a `Hash` impl writes into BLAKE3.
struct DigestHasher(blake3::Hasher);

impl Hasher for DigestHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        unreachable!("only the digest is used")
    }
}

/// What binds an artifact to the engine that can run it: the header format, this crate's
/// version and wasmtime's compatibility hash (target, compiler and ISA flags, tunables, wasm
/// features, and wasmtime's own version).
fn engine_digest(engine: &Engine) -> [u8; 32] {
    let mut hasher = DigestHasher(blake3::Hasher::new());
    hasher.write(MAGIC);
    hasher.write(concat!("seam-host ", env!("CARGO_PKG_VERSION"), "\0").as_bytes());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.0.finalize().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `path` made canonical as far as it exists (the missing tail appended as written), so that a
/// cache directory that could not be created is still guarded.
fn canonical_lenient(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        match std::env::current_dir() {
            Ok(cwd) => cwd.join(path),
            Err(_) => path.to_path_buf(),
        }
    };
    let mut missing = Vec::new();
    let mut at = absolute.as_path();
    loop {
        if let Ok(mut canonical) = std::fs::canonicalize(at) {
            canonical.extend(missing.iter().rev());
            return canonical;
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_os_string());
                at = parent;
            }
            _ => return absolute,
        }
    }
}

/// Why a cached artifact is not used (it is recompiled and rewritten).
#[derive(Debug, Error)]
enum StaleArtifact {
    #[error("it does not end with a Seam artifact trailer ({len} bytes)")]
    NoTrailer { len: usize },
    #[error("it was compiled from another component (source digest {found}, expected {expected})")]
    OtherSource { found: String, expected: String },
    #[error("it was compiled by another engine or engine configuration")]
    OtherEngine,
    #[error("its body is {len} bytes, the trailer says {trailer}")]
    Length { len: usize, trailer: u64 },
    #[error("its body does not match the digest in its trailer")]
    Digest,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tail_is_kept_after_the_canonical_part() {
        let dir = std::env::temp_dir();
        let canonical = std::fs::canonicalize(&dir).unwrap();
        assert_eq!(
            canonical_lenient(&dir.join("seam-surely-missing").join("cache")),
            canonical.join("seam-surely-missing").join("cache")
        );
    }

    #[test]
    fn bytes_checked_elsewhere_are_not_hashed_again_and_are_refused_if_they_changed() {
        // The header of an empty component: the smallest thing wasmtime compiles.
        const EMPTY: &[u8] = b"\0asm\x0d\x00\x01\x00";
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("empty.wasm");
        std::fs::write(&file, EMPTY).unwrap();
        let cache_dir = dir.path().join("cache");
        let cache = CompileCache::new(Engine::default(), None, Some(cache_dir), u64::MAX);
        let digest: [u8; 32] = blake3::hash(EMPTY).into();

        let compiled = cache
            .compile(&file, Some(digest), Tiering::Allowed)
            .unwrap();
        assert_eq!(compiled.origin, Origin::Compiled);
        // A hit by the digest given: the file is not read, so even a file gone loads.
        std::fs::remove_file(&file).unwrap();
        let compiled = cache
            .compile(&file, Some(digest), Tiering::Allowed)
            .unwrap();
        assert_eq!(compiled.origin, Origin::Cached);

        // A miss compiles only bytes that still have the digest they were checked by.
        std::fs::write(&file, EMPTY).unwrap();
        let other = [7u8; 32];
        match cache.compile(&file, Some(other), Tiering::Allowed) {
            Err(EngineError::ChangedSinceChecked { path }) => assert_eq!(path, file),
            Err(e) => panic!("refused for another reason: {e}"),
            Ok(_) => panic!("compiled bytes that are not the ones checked"),
        }
    }
}
