//! The content-addressed store of what was pulled: `<cache dir>/oci/blobs/sha256/<hex>`, beside
//! the compile cache and under the same trust rules (the user's own directory, `0700`, files
//! `0600`, never reachable by a grant since the cache directory is guarded whole).
//!
//! A blob's name is the SHA-256 of its bytes, and that is checked on every read: a blob whose
//! bytes hash to something else (a damaged disk, an edit) is removed with a warning and reads as
//! missing, so that it is pulled again. Blobs are written as a new file renamed into place, never
//! in place.
//!
//! A component layer is large (18 MB for a Python provider) and SHA-256 over it costs a load
//! about 45 ms here, so a layer keeps a sidecar, `<hex>.b3`: the BLAKE3 of its bytes, written
//! when they were checked against their SHA-256 name (at the pull, or at a full check). A later
//! read hashes the file with BLAKE3 (several times SHA-256's speed) and compares it with the
//! sidecar; anything else (no sidecar, a mismatch) falls back to the full SHA-256 check. The
//! sidecar lives in the same `0700` store as the blob, out of reach of every grant: whoever could
//! rewrite it could rewrite the blob, which is the compile cache's trust rule too.
//!
//! Beside the blobs, `signatures/<manifest hex>` names the manifest of a component's cosign
//! signatures (the last one that verified), so that a signed component loads offline. That file
//! is not integrity-protected and need not be: whatever it names is a blob checked on read, and
//! a signature in it still has to verify against the config's key.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::Digest as _;

use super::reference::Digest;
use super::OciError;
use seam_sandbox::trusted_dir::{new_private_file, prepare_dir};

/// The store, opened.
#[derive(Debug)]
pub struct BlobStore {
    /// `<cache dir>/oci`, canonical.
    root: PathBuf,
}

impl BlobStore {
    /// Opens (creating it `0700` if needed) the store inside the compile cache directory
    /// `cache_dir`, which the caller has already checked.
    pub fn open(cache_dir: &Path) -> Result<Self, OciError> {
        let root = cache_dir.join("oci");
        let store_error = |dir: &Path, reason: String| OciError::Store {
            dir: dir.to_path_buf(),
            reason,
        };
        let root = prepare_dir(&root).map_err(|e| store_error(&root, e.to_string()))?;
        for sub in [root.join("blobs").join("sha256"), root.join("signatures")] {
            // `prepare_dir` creates one level at a time with the mode checked, so the parents
            // go first.
            if let Some(parent) = sub.parent().filter(|p| *p != root) {
                prepare_dir(parent).map_err(|e| store_error(parent, e.to_string()))?;
            }
            prepare_dir(&sub).map_err(|e| store_error(&sub, e.to_string()))?;
        }
        Ok(Self { root })
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.root.join("blobs").join("sha256").join(digest.hex())
    }

    /// The bytes of blob `digest`, checked; `None` if it is missing or was damaged (then it is
    /// removed, and a warning says so).
    pub fn read(&self, digest: &Digest) -> Option<Vec<u8>> {
        let path = self.blob_path(digest);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "cannot read OCI store blob; pulling it again");
                return None;
            }
        };
        let found = Digest::of(&bytes);
        if found != *digest {
            self.discard(&path, digest, &found);
            return None;
        }
        Some(bytes)
    }

    /// The path of blob `digest` after checking its bytes (hashed as they are read, not held in
    /// memory: a layer can be large), by its BLAKE3 sidecar when it has one, else by its
    /// SHA-256 name, with the BLAKE3 of the bytes checked (which the compile cache names
    /// artifacts by, so that a load hashes the layer once); `None` if it is missing or was
    /// damaged (then removed).
    pub fn verified_path(&self, digest: &Digest) -> Option<(PathBuf, [u8; 32])> {
        let path = self.blob_path(digest);
        let unreadable = |e: &dyn std::fmt::Display| {
            tracing::warn!(file = %path.display(), error = %e, "cannot read OCI store blob; pulling it again");
        };
        let recorded = std::fs::read_to_string(sidecar(&path))
            .ok()
            .and_then(|text| blake3::Hash::from_hex(text.trim()).ok());
        if let Some(recorded) = recorded {
            match blake3_of(&path) {
                Ok(found) if found == recorded => return Some((path, found.into())),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
                Err(e) => {
                    unreadable(&e);
                    return None;
                }
            }
        }
        let mut file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                unreadable(&e);
                return None;
            }
        };
        let mut hasher = sha2::Sha256::new();
        let mut fast = blake3::Hasher::new();
        let mut buffer = vec![0u8; 1 << 16];
        loop {
            match file.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => {
                    hasher.update(&buffer[..n]);
                    fast.update(&buffer[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    unreadable(&e);
                    return None;
                }
            }
        }
        let found = Digest::from_bytes(hasher.finalize().into());
        if found != *digest {
            self.discard(&path, digest, &found);
            return None;
        }
        // Checked in full: later reads may go by the sidecar.
        let fast = fast.finalize();
        let _ = self.write_file(&sidecar(&path), fast.to_hex().as_bytes());
        Some((path, fast.into()))
    }

    fn discard(&self, path: &Path, digest: &Digest, found: &Digest) {
        tracing::warn!(
            file = %path.display(),
            "refusing OCI store blob `{}`: its bytes hash to {found}, not {digest}; removing it \
             and pulling it again",
            path.display()
        );
        let _ = std::fs::remove_file(path);
        let _ = std::fs::remove_file(sidecar(path));
    }

    /// Stores `bytes`, whose digest the caller checked is `digest`, with their BLAKE3 sidecar;
    /// returns the blob's path and that BLAKE3.
    pub fn write(&self, digest: &Digest, bytes: &[u8]) -> Result<(PathBuf, [u8; 32]), OciError> {
        debug_assert_eq!(Digest::of(bytes), *digest);
        let path = self.blob_path(digest);
        // The sidecar goes first: a blob is never found with an older sidecar than its bytes.
        let _ = std::fs::remove_file(sidecar(&path));
        self.write_file(&path, bytes)?;
        let fast = blake3::hash(bytes);
        self.write_file(&sidecar(&path), fast.to_hex().as_bytes())?;
        Ok((path, fast.into()))
    }

    /// The manifest of the signatures that last verified for manifest `digest`, if recorded.
    pub fn signatures_of(&self, digest: &Digest) -> Option<Digest> {
        let path = self.root.join("signatures").join(digest.hex());
        std::fs::read_to_string(path).ok()?.trim().parse().ok()
    }

    /// Records that `signatures` is the signature manifest that verified for `digest`.
    pub fn set_signatures_of(&self, digest: &Digest, signatures: &Digest) -> Result<(), OciError> {
        let path = self.root.join("signatures").join(digest.hex());
        self.write_file(&path, format!("{signatures}\n").as_bytes())
    }

    /// Writes `bytes` to `path` through a new private file renamed into place, so that a reader
    /// never sees half a file.
    fn write_file(&self, path: &Path, bytes: &[u8]) -> Result<(), OciError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = path.parent().unwrap_or(&self.root);
        let tmp = dir.join(format!(
            ".{}.{}.{}.tmp",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("blob"),
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut file = new_private_file(&tmp)?;
            file.write_all(bytes)?;
            file.flush()?;
            drop(file);
            std::fs::rename(&tmp, path)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(OciError::Store {
                dir: self.root.clone(),
                reason: format!("cannot write `{}`: {e}", path.display()),
            });
        }
        Ok(())
    }
}

/// The BLAKE3 sidecar of blob `path`.
fn sidecar(path: &Path) -> PathBuf {
    path.with_extension("b3")
}

/// The BLAKE3 of the file at `path`, hashed as it is read.
fn blake3_of(path: &Path) -> std::io::Result<blake3::Hash> {
    let file = std::fs::File::open(path)?;
    Ok(blake3::Hasher::new().update_reader(file)?.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_reads_back_and_a_damaged_one_reads_as_missing() {
        let cache = tempfile::tempdir().unwrap();
        let store = BlobStore::open(cache.path()).unwrap();
        let digest = Digest::of(b"a component");
        let (path, fast) = store.write(&digest, b"a component").unwrap();
        assert_eq!(fast, *blake3::hash(b"a component").as_bytes());
        assert_eq!(store.read(&digest).as_deref(), Some(&b"a component"[..]));
        assert_eq!(store.verified_path(&digest), Some((path.clone(), fast)));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&path), 0o600);
            assert_eq!(mode(store.dir()), 0o700);
            assert_eq!(mode(&store.dir().join("blobs").join("sha256")), 0o700);
        }
        assert!(sidecar(&path).exists(), "a stored blob has its sidecar");
        std::fs::write(&path, b"another component").unwrap();
        assert_eq!(store.verified_path(&digest), None);
        assert!(!path.exists(), "a damaged blob is removed");
        assert!(!sidecar(&path).exists(), "with its sidecar");
        // A blob found without a sidecar is checked in full, and gets one.
        store.write(&digest, b"a component").unwrap();
        std::fs::remove_file(sidecar(&path)).unwrap();
        assert_eq!(store.verified_path(&digest), Some((path.clone(), fast)));
        assert!(sidecar(&path).exists());
        // A sidecar that does not match falls back to the full check, which keeps the intact
        // blob and writes the sidecar again.
        std::fs::write(sidecar(&path), blake3::hash(b"other").to_hex().as_bytes()).unwrap();
        assert_eq!(store.verified_path(&digest), Some((path.clone(), fast)));
        assert_eq!(
            std::fs::read_to_string(sidecar(&path)).unwrap(),
            blake3::hash(b"a component").to_hex().as_str()
        );
        store.write(&digest, b"a component").unwrap();
        std::fs::write(&path, b"edited").unwrap();
        assert_eq!(store.read(&digest), None);
        assert_eq!(store.read(&Digest::of(b"never stored")), None);

        let signatures = Digest::of(b"signatures");
        assert_eq!(store.signatures_of(&digest), None);
        store.set_signatures_of(&digest, &signatures).unwrap();
        assert_eq!(store.signatures_of(&digest), Some(signatures));
    }
}
