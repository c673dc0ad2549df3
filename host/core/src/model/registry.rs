//! Model strings resolved to adapter instances, from the current `[models]` config.

use std::sync::{Arc, RwLock};

use super::{openai, scripted, Model, ModelError, ModelsConfig};

/// Resolves model strings to fresh adapter instances, from the current config.
#[derive(Default)]
pub struct ModelRegistry {
    config: RwLock<ModelsConfig>,
}

impl ModelRegistry {
    /// Replaces the config (on load or reconfigure).
    pub fn configure(&self, config: ModelsConfig) {
        *crate::sync::write(&self.config) = config;
    }

    /// A new model instance for `model` (each agent gets its own, so a script starts at its
    /// first step for every agent).
    pub fn resolve(&self, model: &str) -> Result<Arc<dyn Model>, ModelError> {
        let config = crate::sync::read(&self.config);
        if let Some(endpoint) = config.endpoints.get(model) {
            return Ok(Arc::new(openai::OpenAiModel::new(endpoint.clone())?));
        }
        let (kind, rest) = match model.split_once(':') {
            Some((k, r)) => (k, Some(r)),
            None => (model, None),
        };
        match kind {
            "scripted" => {
                let name = rest.unwrap_or("default");
                let script =
                    config
                        .scripts
                        .get(name)
                        .cloned()
                        .ok_or_else(|| ModelError::Config {
                            model: model.to_string(),
                            message: format!("no script `{name}` under [models.scripts]"),
                        })?;
                Ok(Arc::new(scripted::ScriptedModel::new(name, script)))
            }
            "openai" => {
                let mut openai = config.openai.clone().ok_or_else(|| ModelError::Config {
                    model: model.to_string(),
                    message: "no [models.openai] section in the config".into(),
                })?;
                if let Some(name) = rest.filter(|r| !r.is_empty()) {
                    openai.model = name.to_string();
                }
                Ok(Arc::new(openai::OpenAiModel::new(openai)?))
            }
            other => Err(ModelError::Config {
                model: model.to_string(),
                message: format!(
                    "unknown adapter `{other}` (expected `scripted:NAME`, `openai[:MODEL]` or \
                     the name of an endpoint under [models.endpoints])"
                ),
            }),
        }
    }
}
