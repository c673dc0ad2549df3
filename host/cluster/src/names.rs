//! Names checked before any subject is built from them, and the subjects.
//!
//! A subject is dot-separated tokens, where `*` and `>` are wildcards: a name that held any of
//! them, or a dot or a space, could reach another provider's or another run's subject. So every
//! part is checked against a strict alphabet first, and provider names (which may hold dots) are
//! encoded one-to-one.

use crate::error::ClusterError;

/// Longest cluster name or worker id.
pub const MAX_NAME: usize = 64;

/// Checks a cluster name or a worker id: 1 to 64 ASCII letters, digits, `-` or `_`.
pub fn check(what: &'static str, name: &str) -> Result<(), ClusterError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
    if ok {
        Ok(())
    } else {
        Err(ClusterError::BadName {
            what,
            name: name.escape_debug().to_string(),
        })
    }
}

/// A provider name as one subject token and key-value key part: the registry allows letters,
/// digits, `-`, `_` and `.`; a dot becomes `=`, which no provider name holds, so the mapping is
/// one-to-one. Anything else is refused.
pub fn provider_token(name: &str) -> Result<String, ClusterError> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok {
        return Err(ClusterError::BadName {
            what: "provider name",
            name: name.escape_debug().to_string(),
        });
    }
    Ok(name.replace('.', "="))
}

/// The provider name a [`provider_token`] stands for.
pub fn provider_name(token: &str) -> String {
    token.replace('=', ".")
}

/// The subjects and bucket of one cluster.
#[derive(Debug, Clone)]
pub struct Subjects {
    root: String,
    bucket: String,
}

impl Subjects {
    /// The subjects of the cluster `name` (checked).
    pub fn new(name: &str) -> Result<Self, ClusterError> {
        check("cluster name", name)?;
        Ok(Self {
            root: format!("seam.{name}"),
            bucket: format!("seam-{name}-providers"),
        })
    }

    /// The key-value bucket of the cluster's adverts.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Where starts of a provider go (a queue group of its replicas).
    pub fn start(&self, provider_token: &str) -> String {
        format!("{}.start.{provider_token}", self.root)
    }

    /// Where starts meant for one worker go (resumes).
    pub fn worker_start(&self, worker: &str) -> String {
        format!("{}.worker.{worker}.start", self.root)
    }

    /// A run's messages from its worker.
    pub fn out(&self, token: &str) -> String {
        format!("{}.run.{token}.out", self.root)
    }

    /// A run's control messages to its worker.
    pub fn control(&self, token: &str) -> String {
        format!("{}.run.{token}.ctl", self.root)
    }
}

/// The key of a worker's advert of a provider.
pub fn advert_key(provider_token: &str, worker: &str) -> String {
    format!("{provider_token}.{worker}")
}

/// The provider token and worker of an advert key.
pub fn parse_advert_key(key: &str) -> Option<(&str, &str)> {
    key.rsplit_once('.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_reach_another_subject_are_refused() {
        for bad in ["", "a.b", "a b", "*", ">", "a*", "x>", "é", &"x".repeat(65)] {
            assert!(check("worker id", bad).is_err(), "{bad:?}");
        }
        for good in ["w1", "worker-a_2", &"x".repeat(64)] {
            assert!(check("worker id", good).is_ok(), "{good:?}");
        }
        for bad in ["", "a*b", "a>b", "a b", "a=b"] {
            assert!(provider_token(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            provider_token("my.provider-1").expect("a name"),
            "my=provider-1"
        );
        assert_eq!(provider_name("my=provider-1"), "my.provider-1");
        let key = advert_key("my=provider-1", "w1");
        assert_eq!(parse_advert_key(&key), Some(("my=provider-1", "w1")));
    }
}
