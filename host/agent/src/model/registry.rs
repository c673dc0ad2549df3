//! Model strings resolved to adapter instances, from the current `[models]` config.

use std::sync::{Arc, RwLock};

use super::{scripted, Model, ModelError, ModelsConfig, OpenAiConfig};

/// Builds a model for an OpenAI-compatible endpoint's config (the `seam-model-openai` crate's
/// `adapter()`): kept out of this crate, so that a host with no endpoint builds no HTTP client.
pub type EndpointAdapter = dyn Fn(OpenAiConfig) -> Result<Arc<dyn Model>, ModelError> + Send + Sync;

/// Resolves model strings to fresh adapter instances, from the current config.
#[derive(Default)]
pub struct ModelRegistry {
    config: RwLock<ModelsConfig>,
    endpoints: RwLock<Option<Arc<EndpointAdapter>>>,
}

impl ModelRegistry {
    /// A registry whose endpoint models are built by `adapter`.
    pub fn with_endpoints(adapter: Arc<EndpointAdapter>) -> Self {
        Self {
            config: RwLock::default(),
            endpoints: RwLock::new(Some(adapter)),
        }
    }

    /// Sets what builds endpoint models (a host sets it once, as it starts).
    pub fn set_endpoints(&self, adapter: Arc<EndpointAdapter>) {
        *seam_core::sync::write(&self.endpoints) = Some(adapter);
    }

    /// An endpoint model for `config`, or why there is none (`model` names the model string).
    fn endpoint(&self, model: &str, config: OpenAiConfig) -> Result<Arc<dyn Model>, ModelError> {
        let adapter = seam_core::sync::read(&self.endpoints).clone();
        match adapter {
            Some(build) => build(config),
            None => Err(ModelError::Config {
                model: model.to_string(),
                message: "this host has no OpenAI-compatible adapter (seam-host's `openai` \
                          feature is off)"
                    .into(),
            }),
        }
    }

    /// Replaces the config (on load or reconfigure).
    pub fn configure(&self, config: ModelsConfig) {
        *seam_core::sync::write(&self.config) = config;
    }

    /// A new model instance for `model` (each agent gets its own, so a script starts at its
    /// first step for every agent).
    pub fn resolve(&self, model: &str) -> Result<Arc<dyn Model>, ModelError> {
        let config = seam_core::sync::read(&self.config);
        if let Some(endpoint) = config.endpoints.get(model).cloned() {
            drop(config);
            return self.endpoint(model, endpoint);
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
                drop(config);
                self.endpoint(model, openai)
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
