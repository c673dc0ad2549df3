//! A `kind = "mcp"` entry's `config` table: how its server's tools are named and bounded.

use std::collections::BTreeMap;

use serde::Deserialize;

use seam_sandbox::EntryError;

/// What an MCP entry's `config` says.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSettings {
    /// Tool names are `<prefix>__<tool>`; the entry id by default.
    pub prefix: Option<String>,
    /// A server tool's Seam name, instead of `<prefix>__<tool>`.
    #[serde(default)]
    pub rename: BTreeMap<String, String>,
    /// Only these server tools are mounted (by the server's names).
    pub allow: Option<Vec<String>>,
    /// These server tools are never mounted.
    #[serde(default)]
    pub deny: Vec<String>,
    /// How long one call may take.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// How long the server may take to answer `initialize` and `tools/list`.
    #[serde(default = "default_init_timeout_ms")]
    pub init_timeout_ms: u64,
    /// The largest result text a call may return.
    #[serde(default = "default_max_output_bytes")]
    pub max_output_bytes: usize,
    /// The most tools the server may offer.
    #[serde(default = "default_max_tools")]
    pub max_tools: usize,
    /// The largest input schema of one tool, as JSON.
    #[serde(default = "default_max_schema_bytes")]
    pub max_schema_bytes: usize,
    /// HTTP headers sent to a `url` server, each taken from an environment variable the entry
    /// is granted (`headers = { Authorization = "NOTES_AUTH" }`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

fn default_timeout_ms() -> u64 {
    60_000
}
fn default_init_timeout_ms() -> u64 {
    10_000
}
fn default_max_output_bytes() -> usize {
    1 << 20
}
fn default_max_tools() -> usize {
    256
}
fn default_max_schema_bytes() -> usize {
    64 << 10
}

impl McpSettings {
    /// Reads the entry's `config`; the error names the key.
    pub fn parse(config: &serde_json::Value) -> Result<Self, EntryError> {
        let settings: Self = serde_json::from_value(config.clone())
            .map_err(|e| EntryError::new("config", format!("key `config`: {e}")))?;
        for (key, value) in [
            ("timeout_ms", settings.timeout_ms as usize),
            ("init_timeout_ms", settings.init_timeout_ms as usize),
            ("max_output_bytes", settings.max_output_bytes),
            ("max_tools", settings.max_tools),
            ("max_schema_bytes", settings.max_schema_bytes),
        ] {
            if value == 0 {
                return Err(EntryError::new(
                    "config",
                    format!("key `config.{key}` must be at least 1"),
                ));
            }
        }
        Ok(settings)
    }

    /// Whether the server tool `name` is mounted.
    pub fn admits(&self, name: &str) -> bool {
        self.allow
            .as_ref()
            .is_none_or(|allow| allow.iter().any(|a| a == name))
            && !self.deny.iter().any(|d| d == name)
    }

    /// The Seam name of the server tool `name`, for the entry `id`.
    pub fn seam_name(&self, id: &str, name: &str) -> String {
        match self.rename.get(name) {
            Some(renamed) => renamed.clone(),
            None => format!("{}__{name}", self.prefix.as_deref().unwrap_or(id)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_filters_and_bounds() {
        let s = McpSettings::parse(&serde_json::json!({
            "rename": {"search": "find"}, "deny": ["delete"], "allow": ["search", "read", "delete"]
        }))
        .unwrap();
        assert_eq!(s.seam_name("notes", "read"), "notes__read");
        assert_eq!(s.seam_name("notes", "search"), "find");
        assert!(s.admits("read") && !s.admits("delete") && !s.admits("write"));
        let s = McpSettings::parse(&serde_json::json!({"prefix": "n"})).unwrap();
        assert_eq!(s.seam_name("notes", "read"), "n__read");
        let e = McpSettings::parse(&serde_json::json!({"timeout": 3})).unwrap_err();
        assert!(e.to_string().contains("timeout"), "{e}");
        let e = McpSettings::parse(&serde_json::json!({"max_tools": 0})).unwrap_err();
        assert!(e.to_string().contains("config.max_tools"), "{e}");
    }
}
