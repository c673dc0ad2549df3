//! A `kind = "a2a"` entry's `config` table: how its agent is named, reached and bounded.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use seam_sandbox::EntryError;

/// What an A2A entry's `config` says.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct A2aSettings {
    /// The provider's registry name (default: the entry id).
    pub name: Option<String>,
    /// HTTP headers sent with every request, card included, each taken from an environment
    /// variable the entry is granted (`headers = { Authorization = "AGENT_AUTH" }`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// How long the card, and each call that is not a stream, may take.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// How many times a dropped stream is followed again (`SubscribeToTask`, then `GetTask`)
    /// before the run fails; 0 fails it at the first drop.
    #[serde(default = "default_reconnects")]
    pub reconnects: u32,
    /// The largest Agent Card accepted, in bytes.
    #[serde(default = "default_max_card_bytes")]
    pub max_card_bytes: usize,
    /// Keep each run's exchange as the child's session in the store, with the remote task and
    /// context it followed, so that the child can be continued (in the same A2A context) and a
    /// restarted Seam follows the same task (on by default).
    #[serde(default = "default_resume")]
    pub resume: bool,
}

fn default_timeout_ms() -> u64 {
    30_000
}
fn default_reconnects() -> u32 {
    5
}
fn default_max_card_bytes() -> usize {
    256 << 10
}
fn default_resume() -> bool {
    true
}

impl A2aSettings {
    /// Reads the entry's `config`; the error names the key.
    pub fn parse(config: &serde_json::Value) -> Result<Self, EntryError> {
        let config = match config {
            serde_json::Value::Null => serde_json::json!({}),
            other => other.clone(),
        };
        let settings: Self = serde_json::from_value(config).map_err(|e| {
            EntryError::new(
                "config",
                format!(
                    "key `config`: {e} (an A2A entry takes `name`, `headers`, `timeout_ms`, \
                     `reconnects`, `max_card_bytes` and `resume`)"
                ),
            )
        })?;
        for (key, value) in [
            ("timeout_ms", settings.timeout_ms as usize),
            ("max_card_bytes", settings.max_card_bytes),
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

    /// [`A2aSettings::timeout_ms`] as a duration.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_bounds_and_unknown_keys() {
        let s = A2aSettings::parse(&serde_json::Value::Null).unwrap();
        assert_eq!((s.timeout_ms, s.reconnects, s.resume), (30_000, 5, true));
        let e = A2aSettings::parse(&serde_json::json!({"timeout": 3})).unwrap_err();
        assert!(e.to_string().contains("timeout"), "{e}");
        let e = A2aSettings::parse(&serde_json::json!({"max_card_bytes": 0})).unwrap_err();
        assert!(e.to_string().contains("config.max_card_bytes"), "{e}");
    }
}
