//! Strict reading of a plugin's JSON config object: [`typed`] into a serde type, or
//! [`Section`] by hand.
//!
//! Every guest receives its config as a JSON object string. Mistakes in it should surface as
//! load-time errors naming the offending key, never as silently ignored settings, so unknown keys
//! and wrong types are both rejected.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// Parses the config text into `T`, refusing any key `T` does not read, at any depth, with a
/// message naming it. An empty config (`""`, which the host sends when an entry has none)
/// reads as `{}`.
pub fn typed<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    let text = if text.trim().is_empty() { "{}" } else { text };
    typed_json(text, "config")
}

/// Parses `text` into `T` like [`typed`]; `what` names it in errors (`config`, `arguments`).
pub fn typed_json<T: DeserializeOwned>(text: &str, what: &str) -> Result<T, String> {
    let mut unknown = Vec::new();
    let mut de = serde_json::Deserializer::from_str(text);
    let value: T = serde_ignored::deserialize(&mut de, |path| unknown.push(path.to_string()))
        .map_err(|e| format!("{what}: {e}"))?;
    de.end().map_err(|e| format!("{what}: {e}"))?;
    match unknown.first() {
        Some(key) => Err(format!("unknown {what} key `{key}`")),
        None => Ok(value),
    }
}

/// One JSON object of the config: the root, or a nested object under some key.
pub struct Section<'a> {
    /// Dotted path of this object from the root (empty for the root), for error messages.
    path: String,
    fields: &'a Map<String, Value>,
}

/// Parses the config text, which must be a JSON object.
pub fn parse(text: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(fields)) => Ok(fields),
        Ok(_) => Err("config must be a JSON object".to_owned()),
        Err(err) => Err(format!("config is not valid JSON: {err}")),
    }
}

impl<'a> Section<'a> {
    /// The root object, refusing any key not in `allowed`.
    pub fn root(fields: &'a Map<String, Value>, allowed: &[&str]) -> Result<Self, String> {
        let section = Section {
            path: String::new(),
            fields,
        };
        section.check_keys(allowed)?;
        Ok(section)
    }

    /// The object under `key`, if present, refusing any key of it not in `allowed`.
    pub fn object(&self, key: &str, allowed: &[&str]) -> Result<Option<Section<'a>>, String> {
        let Some(value) = self.fields.get(key) else {
            return Ok(None);
        };
        let path = self.key_path(key);
        let Value::Object(fields) = value else {
            return Err(format!("config key `{path}`: expected an object"));
        };
        let section = Section { path, fields };
        section.check_keys(allowed)?;
        Ok(Some(section))
    }

    /// The raw JSON value under `key`, of any type.
    pub fn value(&self, key: &str) -> Option<&'a Value> {
        self.fields.get(key)
    }

    /// Whether `key` is present at all.
    pub fn has(&self, key: &str) -> bool {
        self.fields.contains_key(key)
    }

    /// The string under `key`, if present.
    pub fn string(&self, key: &str) -> Result<Option<String>, String> {
        self.typed(key, "a string", |value| value.as_str().map(str::to_owned))
    }

    /// The string under `key`, which must be present and non-empty.
    pub fn required_string(&self, key: &str) -> Result<String, String> {
        match self.string(key)? {
            None => Err(format!("config key `{}` is required", self.key_path(key))),
            Some(text) if text.is_empty() => Err(format!(
                "config key `{}`: expected a non-empty string",
                self.key_path(key)
            )),
            Some(text) => Ok(text),
        }
    }

    /// The string under `key`, which must be non-empty when present.
    pub fn non_empty_string(&self, key: &str) -> Result<Option<String>, String> {
        match self.string(key)? {
            Some(text) if text.is_empty() => Err(format!(
                "config key `{}`: expected a non-empty string",
                self.key_path(key)
            )),
            other => Ok(other),
        }
    }

    /// The boolean under `key`, if present.
    pub fn bool(&self, key: &str) -> Result<Option<bool>, String> {
        self.typed(key, "a boolean", Value::as_bool)
    }

    /// The non-negative integer under `key`, if present.
    pub fn u64(&self, key: &str) -> Result<Option<u64>, String> {
        self.typed(key, "a non-negative integer", Value::as_u64)
    }

    /// The list of strings under `key`, if present.
    pub fn string_list(&self, key: &str) -> Result<Option<Vec<String>>, String> {
        self.typed(key, "an array of strings", |value| {
            value
                .as_array()?
                .iter()
                .map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
    }

    /// The error for a value under `key` that has the right type but is still unacceptable.
    pub fn invalid(&self, key: &str, expected: &str) -> String {
        format!("config key `{}`: expected {expected}", self.key_path(key))
    }

    /// Reads `key` with `convert`, which yields `None` when the value has the wrong type.
    fn typed<T>(
        &self,
        key: &str,
        expected: &str,
        convert: impl FnOnce(&Value) -> Option<T>,
    ) -> Result<Option<T>, String> {
        match self.fields.get(key) {
            None => Ok(None),
            Some(value) => convert(value)
                .map(Some)
                .ok_or_else(|| self.invalid(key, expected)),
        }
    }

    fn check_keys(&self, allowed: &[&str]) -> Result<(), String> {
        match self
            .fields
            .keys()
            .find(|key| !allowed.contains(&key.as_str()))
        {
            Some(key) => Err(format!("unknown config key `{}`", self.key_path(key))),
            None => Ok(()),
        }
    }

    fn key_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }
}

/// Keys of a provider's `capabilities` config object.
pub const CAPABILITY_KEYS: &[&str] = &["outputSchema", "depthLimit", "toolFilter", "persona"];

/// Reads the optional `capabilities` object as `[output-schema, depth-limit, tool-filter,
/// persona]`; a missing object or key means "not supported".
pub fn capability_flags(root: &Section) -> Result<[bool; 4], String> {
    let Some(section) = root.object("capabilities", CAPABILITY_KEYS)? else {
        return Ok([false; 4]);
    };
    Ok([
        section.bool("outputSchema")?.unwrap_or(false),
        section.bool("depthLimit")?.unwrap_or(false),
        section.bool("toolFilter")?.unwrap_or(false),
        section.bool("persona")?.unwrap_or(false),
    ])
}
