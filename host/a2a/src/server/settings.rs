//! `[a2a]`: how `seam a2a` presents the top-level agent (its card) and where it may send push
//! notifications.

use seam_sandbox::HttpOrigin;
use serde::Deserialize;
use thiserror::Error;

/// The `[a2a]` table of a config. Every key is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct A2aSettings {
    /// The card's `name` (default `seam`).
    #[serde(default)]
    pub name: Option<String>,
    /// The card's `description` (default: the first line of the agent's system prompt, or a
    /// fixed text).
    #[serde(default)]
    pub description: Option<String>,
    /// The URL clients reach the server at, as the card's interface names it (default
    /// `http://ADDR/`, the bound address): set it when a proxy or a name stands in front.
    #[serde(default)]
    pub url: Option<String>,
    /// Providers offered as skills of the card, besides the `agent` skill (each must be
    /// loaded).
    #[serde(default)]
    pub skills: Vec<String>,
    /// The origins push-notification webhooks may be at (`scheme://host[:port]`, as a grant's
    /// `http` origins are written); a webhook elsewhere is refused.
    #[serde(default)]
    pub push_origins: Vec<String>,
}

/// A key of `[a2a]` with a value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("key `{key}`: {message}")]
pub struct SettingsError {
    /// The key.
    pub key: String,
    /// Why.
    pub message: String,
}

impl A2aSettings {
    /// Checks the values serde cannot: the URL's and the push origins' shapes.
    pub fn validate(&self) -> Result<(), SettingsError> {
        self.origins()?;
        if let Some(url) = &self.url {
            let ok = url
                .parse::<http::Uri>()
                .ok()
                .is_some_and(|u| HttpOrigin::of(&u).is_some());
            if !ok {
                return Err(SettingsError {
                    key: "url".into(),
                    message: format!("`{url}` is not an http or https URL"),
                });
            }
        }
        for (i, skill) in self.skills.iter().enumerate() {
            if skill.is_empty() || self.skills[..i].contains(skill) {
                return Err(SettingsError {
                    key: "skills".into(),
                    message: format!("`{skill}` is empty or listed twice"),
                });
            }
        }
        Ok(())
    }

    /// The push origins, parsed.
    pub fn origins(&self) -> Result<Vec<HttpOrigin>, SettingsError> {
        self.push_origins
            .iter()
            .map(|o| {
                o.parse::<HttpOrigin>().map_err(|e| SettingsError {
                    key: "push_origins".into(),
                    message: e.to_string(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_read_and_checked() {
        let s: A2aSettings = toml::from_str(
            "name = \"n\"\nskills = [\"spawn\"]\npush_origins = [\"http://127.0.0.1:9\"]\n",
        )
        .unwrap();
        assert_eq!(s.name.as_deref(), Some("n"));
        assert!(s.validate().is_ok());
        let unknown = toml::from_str::<A2aSettings>("nmae = \"n\"\n").unwrap_err();
        assert!(unknown.message().contains("nmae"), "{unknown}");
        let bad = A2aSettings {
            push_origins: vec!["ftp://x".into()],
            ..Default::default()
        };
        assert_eq!(bad.validate().unwrap_err().key, "push_origins");
        let bad = A2aSettings {
            url: Some("not a url".into()),
            ..Default::default()
        };
        assert_eq!(bad.validate().unwrap_err().key, "url");
    }
}
