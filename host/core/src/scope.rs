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
}

/// A scope written wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("key `config.scope`: {0} (keys: dirs, write, http, network, env)")]
pub struct ScopeError(pub String);

impl Scope {
    /// The scope a plugin entry's `config.scope` puts on each run its calls start (`None`: no
    /// key).
    pub fn of_entry_config(config: &serde_json::Value) -> Result<Option<Self>, ScopeError> {
        let Some(value) = config.get("scope") else {
            return Ok(None);
        };
        let scope: Self =
            serde_json::from_value(value.clone()).map_err(|e| ScopeError(e.to_string()))?;
        for dir in scope.dirs.iter().flatten() {
            if !dir.is_absolute() {
                return Err(ScopeError(format!(
                    "`dirs` holds `{}`: a scope's directories are absolute host paths",
                    dir.display()
                )));
            }
        }
        for addr in scope.network.iter().flatten() {
            if addr.parse::<std::net::SocketAddr>().is_err() {
                return Err(ScopeError(format!(
                    "`network` holds `{addr}`, which is not an ip:port address"
                )));
            }
        }
        Ok(Some(scope))
    }
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
        ] {
            let e = Scope::of_entry_config(&bad).unwrap_err().to_string();
            assert!(e.starts_with("key `config.scope`"), "{e}");
        }
    }
}
