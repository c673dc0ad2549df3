//! `oci://REGISTRY/REPOSITORY:TAG` and `oci://REGISTRY/REPOSITORY@sha256:HEX`: what a config's
//! `component` names when the component comes from a registry, and the SHA-256 digests that
//! name what a registry holds.
//!
//! The grammar of the part after `oci://` is the distribution reference's, checked by `oci-spec`
//! (through `oci-client`) before a registry is asked anything; this module adds the rules Seam
//! needs on top: the registry is always written (no implicit `docker.io`), a tag or a digest is
//! always written (no implicit `latest`), and a digest is SHA-256 (the store is addressed by
//! it).

use std::fmt;
use std::str::FromStr;

use sha2::Digest as _;
use thiserror::Error;

/// The scheme of a registry reference in a config's `component`.
pub const SCHEME: &str = "oci://";

/// A SHA-256 content digest, written `sha256:<64 lowercase hex digits>`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest([u8; 32]);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(sha2::Sha256::digest(bytes).into())
    }

    /// Wraps a finished SHA-256.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The 64 hex digits, without the algorithm.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The tag cosign stores this manifest's signatures under: `sha256-<hex>.sig`.
    pub fn signature_tag(&self) -> String {
        format!("sha256-{}.sig", self.hex())
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A digest that is not `sha256:` and 64 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("`{0}` is not a SHA-256 digest (`sha256:` and 64 hex digits)")]
pub struct BadDigest(pub String);

impl FromStr for Digest {
    type Err = BadDigest;

    fn from_str(text: &str) -> Result<Self, BadDigest> {
        let bad = || BadDigest(text.to_string());
        let hex_part = text.strip_prefix("sha256:").ok_or_else(bad)?;
        // Upper-case hex is refused: a digest has one spelling, so that two spellings never name
        // two store entries or two lock lines.
        if hex_part.len() != 64 || hex_part.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex_part, &mut out).map_err(|_| bad())?;
        Ok(Self(out))
    }
}

/// A component in a registry: `oci://REGISTRY/REPOSITORY` with a tag, a digest, or both (the
/// digest then decides what is pulled; the tag is only a label).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct OciRef {
    registry: String,
    repository: String,
    tag: Option<String>,
    digest: Option<Digest>,
}

/// Why a `component = "oci://..."` is not a reference Seam can pull.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BadReference {
    /// It does not start with `oci://`.
    #[error("`{0}` is not an OCI reference: write `oci://REGISTRY/REPOSITORY:TAG` or `oci://REGISTRY/REPOSITORY@sha256:DIGEST`")]
    Scheme(String),
    /// The distribution grammar refused it.
    #[error("`{text}` is not an OCI reference: {reason}")]
    Syntax {
        /// The reference as written.
        text: String,
        /// The parser's explanation.
        reason: String,
    },
    /// The first path segment is not a registry host.
    #[error(
        "`{0}` does not start with a registry: the part after `oci://` and before the first `/` \
         must be a host with a dot or a port, or `localhost` (as in `oci://ghcr.io/org/plugin:1.0` \
         or `oci://127.0.0.1:5000/plugin:1.0`)"
    )]
    NoRegistry(String),
    /// Neither a tag nor a digest.
    #[error("`{0}` names neither a tag nor a digest: add `:TAG` or `@sha256:DIGEST` (Seam never assumes `latest`)")]
    Unpinned(String),
    /// A digest of another algorithm, or malformed.
    #[error("`{text}`: {source}")]
    Digest {
        /// The reference as written.
        text: String,
        /// What is wrong with its digest.
        source: BadDigest,
    },
}

impl OciRef {
    /// Parses `oci://REGISTRY/REPOSITORY[:TAG][@sha256:HEX]` into its parts, with Seam's rules
    /// (a registry, a tag or a digest, SHA-256). The distribution grammar of the parts is
    /// [`OciRef::check_grammar`]'s: it is checked before anything is asked of a registry and by
    /// `seam check`, not on every load, since `oci-spec` compiles a large regex for it (about
    /// 25 ms of CPU, once per process) and a locked or digest reference that is already pulled
    /// needs none of it.
    pub fn parse(text: &str) -> Result<Self, BadReference> {
        let rest = text
            .strip_prefix(SCHEME)
            .ok_or_else(|| BadReference::Scheme(text.to_string()))?;
        let Some((registry, path)) = rest.split_once('/') else {
            return Err(BadReference::NoRegistry(text.to_string()));
        };
        // The distribution's own rule for telling a registry from a Docker Hub namespace: a
        // dot, a port or `localhost`. Seam wants the registry written, so a first segment
        // without one is refused rather than sent to Docker Hub.
        let is_host = registry.contains(['.', ':']) || registry == "localhost";
        if registry.is_empty() || path.is_empty() || !is_host {
            return Err(BadReference::NoRegistry(text.to_string()));
        }
        let (named, digest) = match path.rsplit_once('@') {
            Some((named, digest)) => {
                let digest = digest
                    .parse::<Digest>()
                    .map_err(|source| BadReference::Digest {
                        text: text.to_string(),
                        source,
                    })?;
                (named, Some(digest))
            }
            None => (path, None),
        };
        let last = named.rsplit('/').next().unwrap_or(named);
        let (repository, tag) = match last.rsplit_once(':') {
            Some((_, tag)) => (&named[..named.len() - tag.len() - 1], Some(tag)),
            None => (named, None),
        };
        if tag.is_none() && digest.is_none() {
            return Err(BadReference::Unpinned(text.to_string()));
        }
        if repository.is_empty() || tag.is_some_and(str::is_empty) {
            return Err(BadReference::Syntax {
                text: text.to_string(),
                reason: "its repository or its tag is empty".into(),
            });
        }
        Ok(Self {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag: tag.map(str::to_string),
            digest,
        })
    }

    /// Checks the reference against the distribution grammar (`oci-spec`'s parser): the
    /// registry host, the repository's lower-case path components, the tag's characters and
    /// length.
    pub fn check_grammar(&self) -> Result<(), BadReference> {
        let written = self.to_string();
        let bare = &written[SCHEME.len()..];
        let parsed = oci_client::Reference::from_str(bare).map_err(|e| BadReference::Syntax {
            text: written.clone(),
            reason: e.to_string(),
        })?;
        // What the grammar read must be what `parse` split: otherwise the registry would be
        // asked for something other than what the config names.
        if parsed.registry() != self.registry
            || parsed.repository() != self.repository
            || parsed.tag() != self.tag.as_deref()
        {
            return Err(BadReference::Syntax {
                text: written,
                reason: format!(
                    "it reads as registry `{}`, repository `{}`, tag `{}`",
                    parsed.registry(),
                    parsed.repository(),
                    parsed.tag().unwrap_or("")
                ),
            });
        }
        Ok(())
    }

    /// The registry host (with its port, if written).
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// The repository inside the registry.
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The tag, if one is written.
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The digest, if one is written.
    pub fn digest(&self) -> Option<Digest> {
        self.digest
    }

    /// The same repository at exactly `digest` (the tag dropped): what is pulled once a tag is
    /// resolved or locked.
    pub fn at(&self, digest: Digest) -> Self {
        Self {
            registry: self.registry.clone(),
            repository: self.repository.clone(),
            tag: None,
            digest: Some(digest),
        }
    }

    /// The same repository at `tag` (no digest): where cosign keeps a manifest's signatures.
    pub fn tagged(&self, tag: &str) -> Self {
        Self {
            registry: self.registry.clone(),
            repository: self.repository.clone(),
            tag: Some(tag.to_string()),
            digest: None,
        }
    }

    /// `REGISTRY/REPOSITORY`: what a cosign signature names as its `docker-reference`.
    pub fn repository_path(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// The reference as the registry client takes it.
    pub fn to_client(&self) -> oci_client::Reference {
        match (&self.tag, self.digest) {
            (_, Some(digest)) => oci_client::Reference::with_digest(
                self.registry.clone(),
                self.repository.clone(),
                digest.to_string(),
            ),
            (Some(tag), None) => oci_client::Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                tag.clone(),
            ),
            // `parse` refuses a reference with neither.
            (None, None) => oci_client::Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                "latest".into(),
            ),
        }
    }

    /// Whether the registry is this machine (`localhost`, `127.0.0.0/8`, `::1`): the only ones
    /// plain HTTP is allowed for without `insecure = true`.
    pub fn is_loopback(&self) -> bool {
        registry_is_loopback(&self.registry)
    }
}

/// Whether a registry host (`HOST`, `HOST:PORT`, `[V6]:PORT`) is this machine.
pub fn registry_is_loopback(registry: &str) -> bool {
    let host = if let Some(rest) = registry.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else {
        match registry.rsplit_once(':') {
            Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
            _ => registry,
        }
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

impl fmt::Display for OciRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for OciRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "f3cfc9d0dbf931d3db4685ec659b7ac68e2a578219da4aae65427886e649b06b";

    #[test]
    fn tags_digests_and_both_parse_and_print_back() {
        let r = OciRef::parse("oci://127.0.0.1:5000/seam/mock:1.0").unwrap();
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(r.repository(), "seam/mock");
        assert_eq!(r.tag(), Some("1.0"));
        assert_eq!(r.digest(), None);
        assert!(r.is_loopback());
        assert_eq!(r.to_string(), "oci://127.0.0.1:5000/seam/mock:1.0");

        let text = format!("oci://ghcr.io/org/plugin@sha256:{HEX}");
        let r = OciRef::parse(&text).unwrap();
        assert_eq!(r.digest().unwrap().hex(), HEX);
        assert_eq!(r.tag(), None);
        assert!(!r.is_loopback());
        assert_eq!(r.to_string(), text);
        assert_eq!(r.repository_path(), "ghcr.io/org/plugin");

        let both = OciRef::parse(&format!("oci://localhost/p:v2@sha256:{HEX}")).unwrap();
        assert_eq!((both.tag(), both.digest().is_some()), (Some("v2"), true));
        assert_eq!(
            both.at(both.digest().unwrap()).to_string(),
            format!("oci://localhost/p@sha256:{HEX}")
        );
        assert_eq!(
            both.tagged(&both.digest().unwrap().signature_tag())
                .to_string(),
            format!("oci://localhost/p:sha256-{HEX}.sig")
        );
    }

    #[test]
    fn what_is_refused_says_why() {
        for (text, wanted) in [
            ("ghcr.io/org/p:1", "is not an OCI reference"),
            ("oci://org/p:1", "does not start with a registry"),
            ("oci://ghcr.io", "does not start with a registry"),
            ("oci://ghcr.io/org/p", "names neither a tag nor a digest"),
            ("oci://ghcr.io/org/p@sha512:00", "is not a SHA-256 digest"),
            ("oci://ghcr.io/org/p:", "is empty"),
            ("oci://ghcr.io/:1", "is empty"),
        ] {
            let e = OciRef::parse(text).unwrap_err().to_string();
            assert!(e.contains(wanted), "{text}: {e}");
        }
        // The grammar's refusals come from its check, which parsing defers.
        for text in [
            "oci://ghcr.io/Org/p:1",
            "oci://ghcr.io/org/p:-bad",
            "oci://ghcr.io/org//p:1",
        ] {
            let parsed = OciRef::parse(text).unwrap();
            let e = parsed.check_grammar().expect_err(text).to_string();
            assert!(e.contains("is not an OCI reference"), "{text}: {e}");
        }
        let good = OciRef::parse(&format!("oci://127.0.0.1:5000/seam/mock:1.0@sha256:{HEX}"));
        good.unwrap().check_grammar().unwrap();
        let upper = format!("sha256:{}", HEX.to_uppercase());
        assert!(upper.parse::<Digest>().is_err());
        assert_eq!(
            format!("sha256:{HEX}").parse::<Digest>().unwrap().hex(),
            HEX
        );
    }

    #[test]
    fn loopback_registries_are_recognised() {
        for (registry, loopback) in [
            ("localhost", true),
            ("localhost:5000", true),
            ("127.0.0.1:5000", true),
            ("127.1.2.3", true),
            ("[::1]:5000", true),
            ("10.0.0.1:5000", false),
            ("ghcr.io", false),
            ("localhost.evil.com", false),
        ] {
            assert_eq!(registry_is_loopback(registry), loopback, "{registry}");
        }
    }
}
