//! Scopes: what a delegation narrows its subtree's authority to. A scope never grants: the
//! effective grant of every tool call and component run in a subtree is its plugin entry's
//! grant intersected with the scope of every ancestor (see `seam-sandbox`'s
//! `Granted::narrowed`, applied to each store as it is made).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// What a delegation's subtree may still reach, each dimension a ceiling (`None`: as its
/// parent). Written as a tool entry's `config.scope`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    /// Host directories a granted directory must be within (or be) to stay granted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirs: Option<Vec<PathBuf>>,
    /// Whether granted directories keep their write access (`false`: every one read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<bool>,
    /// HTTP origins (`https://host[:port]`) a granted origin must be one of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<Vec<String>>,
    /// Socket addresses (`ip:port`) a granted address must be one of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Vec<String>>,
    /// Environment variable names a granted variable must be one of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<String>>,
    /// Tool-name patterns (`*` matches any run of characters) a tool must match to be seen and
    /// called below the delegation: an MCP server's tools are named `<prefix>__<tool>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
}

/// A scope written wrong, naming where it was written (`config.scope`, or a subagent tool's
/// `scope` argument).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("key `{key}`: {message} (keys: dirs, write, http, network, env, tools)")]
pub struct ScopeError {
    /// Where the scope was written.
    pub key: String,
    /// What is wrong with it.
    pub message: String,
}

impl Scope {
    /// The scope a plugin entry's `config.scope` puts on each run its calls start (`None`: no
    /// key).
    pub fn of_entry_config(config: &serde_json::Value) -> Result<Option<Self>, ScopeError> {
        config
            .get("scope")
            .map(|value| Self::from_value(value, "config.scope"))
            .transpose()
    }

    /// A scope written at `key` (for the error), checked: directories absolute, addresses
    /// `ip:port`, no unknown key.
    pub fn from_value(value: &serde_json::Value, key: &str) -> Result<Self, ScopeError> {
        let err = |message: String| ScopeError {
            key: key.to_string(),
            message,
        };
        let scope: Self = serde_json::from_value(value.clone()).map_err(|e| err(e.to_string()))?;
        for dir in scope.dirs.iter().flatten() {
            if !dir.is_absolute() {
                return Err(err(format!(
                    "`dirs` holds `{}`: a scope's directories are absolute host paths",
                    dir.display()
                )));
            }
        }
        for addr in scope.network.iter().flatten() {
            if addr.parse::<std::net::SocketAddr>().is_err() {
                return Err(err(format!(
                    "`network` holds `{addr}`, which is not an ip:port address"
                )));
            }
        }
        Ok(scope)
    }

    /// What both `self` and `other` allow, as one scope: what either removes stays removed.
    /// Directories keep the deeper of each pair where one is within the other; lists keep what
    /// both hold (origins compared as written, ignoring case and a trailing `/`); tool
    /// patterns keep each pattern of one that a pattern of the other covers. Where the exact
    /// meet cannot be written as one list of patterns (two wildcard patterns overlapping only
    /// in part), the result is narrower, never wider.
    pub fn narrower(&self, other: &Scope) -> Scope {
        Scope {
            dirs: meet(&self.dirs, &other.dirs, |a, b| {
                let mut out = Vec::new();
                for x in a {
                    for y in b {
                        if x.starts_with(y) {
                            out.push(x.clone());
                        } else if y.starts_with(x) {
                            out.push(y.clone());
                        }
                    }
                }
                dedup(out)
            }),
            write: match (self.write, other.write) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (a, b) => a.or(b),
            },
            http: meet(&self.http, &other.http, |a, b| {
                let same = |x: &String, y: &String| {
                    x.trim_end_matches('/')
                        .eq_ignore_ascii_case(y.trim_end_matches('/'))
                };
                a.iter()
                    .filter(|x| b.iter().any(|y| same(x, y)))
                    .cloned()
                    .collect()
            }),
            network: meet(&self.network, &other.network, |a, b| {
                let addr = |s: &String| s.parse::<std::net::SocketAddr>().ok();
                a.iter()
                    .filter(|x| b.iter().any(|y| addr(x).is_some() && addr(x) == addr(y)))
                    .cloned()
                    .collect()
            }),
            env: meet(&self.env, &other.env, |a, b| {
                a.iter().filter(|x| b.contains(x)).cloned().collect()
            }),
            tools: meet(&self.tools, &other.tools, |a, b| {
                // A pattern matching another written out (its `*` taken as characters) matches
                // every name the other does: the other is the narrower of the two.
                let covered = |p: &String, by: &[String]| {
                    by.iter().any(|q| crate::approval::glob_matches(q, p))
                };
                let mut out: Vec<String> = a.iter().filter(|p| covered(p, b)).cloned().collect();
                out.extend(b.iter().filter(|p| covered(p, a)).cloned());
                dedup(out)
            }),
        }
    }

    /// Every scope of `chain` as one (`None`: no scope at all): what a run on another process
    /// is narrowed to, where the accounts of its ancestors are not.
    pub fn merged(chain: &[(String, Scope)]) -> Option<Scope> {
        chain
            .iter()
            .map(|(_, s)| s)
            .fold(None, |acc: Option<Scope>, s| {
                Some(acc.map_or_else(|| s.clone(), |a| a.narrower(s)))
            })
    }

    /// Whether the tool `name` is one `tools` allows (`true` without the key).
    pub fn allows_tool(&self, name: &str) -> bool {
        self.tools.as_ref().is_none_or(|patterns| {
            patterns
                .iter()
                .any(|p| crate::approval::glob_matches(p, name))
        })
    }
}

/// The meet of two optional lists: either alone where the other is absent.
fn meet<T: Clone>(
    a: &Option<Vec<T>>,
    b: &Option<Vec<T>>,
    both: impl Fn(&[T], &[T]) -> Vec<T>,
) -> Option<Vec<T>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(both(a, b)),
        (a, b) => a.clone().or_else(|| b.clone()),
    }
}

fn dedup<T: PartialEq>(items: Vec<T>) -> Vec<T> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// The scopes over a call, nearest first, each with the agent or run that set it (for a
/// denial to name).
pub type ScopeChain = Vec<(String, Scope)>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_in_an_entry_config_is_read_and_checked_naming_the_key() {
        let ok = serde_json::json!({ "scope": { "dirs": ["/work/src"], "write": false } });
        let scope = Scope::of_entry_config(&ok).unwrap().unwrap();
        assert_eq!(scope.write, Some(false));
        assert_eq!(
            Scope::of_entry_config(&serde_json::json!({})).unwrap(),
            None
        );
        for bad in [
            serde_json::json!({ "scope": { "dirs": ["src"] } }),
            serde_json::json!({ "scope": { "network": ["nowhere"] } }),
            serde_json::json!({ "scope": { "files": [] } }),
            serde_json::json!({ "scope": { "tools": "fx__*" } }),
        ] {
            let e = Scope::of_entry_config(&bad).unwrap_err().to_string();
            assert!(e.starts_with("key `config.scope`"), "{e}");
        }
    }

    #[test]
    fn the_narrower_of_two_scopes_allows_only_what_both_allow() {
        let entry = Scope {
            dirs: Some(vec!["/work".into()]),
            http: Some(vec!["https://a.example".into(), "https://b.example".into()]),
            env: Some(vec!["A".into()]),
            tools: Some(vec!["fx__*".into(), "read".into()]),
            ..Scope::default()
        };
        let asked = Scope {
            dirs: Some(vec!["/work/src".into(), "/etc".into()]),
            write: Some(false),
            http: Some(vec![
                "https://B.example/".into(),
                "https://c.example".into(),
            ]),
            network: Some(vec!["127.0.0.1:80".into()]),
            tools: Some(vec!["fx__add".into(), "write".into(), "*".into()]),
            ..Scope::default()
        };
        let both = entry.narrower(&asked);
        assert_eq!(both.dirs, Some(vec!["/work/src".into()]));
        assert_eq!(both.write, Some(false));
        assert_eq!(both.http, Some(vec!["https://b.example".into()]));
        assert_eq!(both.network, Some(vec!["127.0.0.1:80".into()]));
        assert_eq!(both.env, Some(vec!["A".into()]));
        for (name, allowed) in [
            ("fx__add", true),
            ("fx__where", true),
            ("read", true),
            ("write", false),
            ("other", false),
        ] {
            assert_eq!(both.allows_tool(name), allowed, "{name}");
        }
        // Asking more than the entry allows gets nothing more.
        let wider = entry.narrower(&Scope {
            dirs: Some(vec!["/".into()]),
            tools: Some(vec!["*".into()]),
            ..Scope::default()
        });
        assert_eq!(wider.dirs, entry.dirs);
        assert!(!wider.allows_tool("write") && wider.allows_tool("fx__x"));
        assert_eq!(
            Scope::merged(&[("a".into(), entry.clone()), ("b".into(), asked.clone())]),
            Some(both)
        );
        assert_eq!(Scope::merged(&[]), None);
    }
}
