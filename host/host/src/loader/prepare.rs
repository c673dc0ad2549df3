//! Phase one of a load: compile, recognise, sandbox, link and ask the plugin what it declares.
//! Nothing here touches a registry, so entries are prepared concurrently.

use std::sync::Arc;

use seam_core::types::PluginKind;

use super::{Linked, LoadError, Loader, PluginInfo, Prepared};
use crate::cache::Tiering;
use crate::config::{EntrySource, PluginEntry};
use crate::engine::EngineError;
use crate::entries::{BackendEntry, Context, Made};
use crate::kinds::link;
use crate::sandbox::{Sandbox, SandboxError};

impl Loader {
    /// Phase one: compile, recognise, sandbox, link and describe. Touches no registry.
    pub(super) async fn prepare_entry(
        &self,
        entry: &PluginEntry,
    ) -> Option<(PluginInfo, Result<Prepared, LoadError>)> {
        if entry.disabled {
            return None;
        }
        let mut info = Self::info_for(entry);
        let result = self.prepare(entry, &mut info).await;
        Some((info, result))
    }

    async fn prepare(
        &self,
        entry: &PluginEntry,
        info: &mut PluginInfo,
    ) -> Result<Prepared, LoadError> {
        let id = entry.id.clone();
        let engine_err = |source| LoadError::Engine {
            id: id.clone(),
            source,
        };
        let (path, checked) = match &entry.source {
            EntrySource::Component(path) => (path.clone(), None),
            // A component from a registry is pulled and checked (digest, lock, signature, size)
            // before a byte of it is compiled; then its file in the store is compiled like any.
            #[cfg(feature = "oci")]
            EntrySource::Oci(source) => {
                let resolved = self
                    .oci
                    .resolve(source)
                    .await
                    .map_err(|source| LoadError::Oci {
                        id: id.clone(),
                        source: Box::new(source),
                    })?;
                info.pulled = Some(super::Pulled {
                    digest: resolved.digest.to_string(),
                    size: resolved.size,
                    signer: resolved.signer.map(|s| (s.name, s.fingerprint)),
                });
                (resolved.path, Some(resolved.blake3))
            }
            EntrySource::Backend(source) => return self.prepare_backend(entry, source, info).await,
        };
        #[cfg(feature = "telemetry")]
        let began = std::time::SystemTime::now();
        let compiled = self
            .cache
            .compile_and_recognise(&path, checked, Tiering::Allowed)
            .await;
        #[cfg(feature = "telemetry")]
        if let Some(telemetry) = crate::telemetry::Telemetry::installed() {
            telemetry.plugin_load(
                &entry.id,
                &path,
                began,
                compiled.as_ref().map(|(c, _, _)| c.origin.as_str()),
            );
        }
        let (compiled, kind, version) = compiled.map_err(engine_err)?;
        info.kind = Some(kind);
        info.version = Some(version);
        if let Some(expected) = entry.kind.filter(|k| *k != kind) {
            return Err(engine_err(EngineError::KindMismatch {
                path: entry.component(),
                expected,
                found: kind,
            }));
        }
        let baseline = self.cache.is_baseline(&compiled.component);
        info.compiler = Some(if baseline {
            crate::engine::Compiler::Winch
        } else {
            match self.engine_options.compiler {
                crate::engine::Compiler::Winch => crate::engine::Compiler::Winch,
                _ => crate::engine::Compiler::Cranelift,
            }
        });
        let tier_up = baseline.then(|| super::TierUp {
            id: entry.id.clone(),
            path: path.clone(),
            source: compiled.source,
        });
        self.link_compiled(entry, info, &compiled.component, kind, version, tier_up)
            .await
    }

    /// The rest of phase one for a compiled component: sandbox, link, describe.
    pub(super) async fn link_compiled(
        &self,
        entry: &PluginEntry,
        info: &mut PluginInfo,
        component: &wasmtime::component::Component,
        kind: PluginKind,
        version: crate::versions::WitVersion,
        tier_up: Option<super::TierUp>,
    ) -> Result<Prepared, LoadError> {
        approve_only_on_tools(entry, kind)?;
        if (entry.budget.is_some() || entry.scope.is_some() || entry.approver.is_some())
            && kind != PluginKind::Tool
        {
            return Err(LoadError::Sandbox {
                id: entry.id.clone(),
                source: SandboxError {
                    key: if entry.budget.is_some() {
                        "config.budget"
                    } else if entry.scope.is_some() {
                        "config.scope"
                    } else {
                        "config.approver"
                    }
                    .into(),
                    message: format!(
                        "a budget or a scope bounds the runs a tool's calls start; this entry \
                         is a {kind}, which starts none through a call (set it on the tool \
                         entry that delegates to it)"
                    ),
                },
            });
        }
        let sandbox = self
            .sandbox_for(entry, info)?
            .with_budget(entry.budget)
            .with_scope(entry.scope.clone())
            .with_approve(entry.approve.clone())
            .with_approver(entry.approver)
            .with_record(entry.record)
            .with_shared_runs(entry.share_instance);
        let sandbox_limits = sandbox.limits().clone();
        let linked = link(
            &self.runtime,
            entry.id.as_str().into(),
            (kind, version),
            component,
            entry.config.to_string().into(),
            sandbox,
        )
        .await
        .map_err(|source| LoadError::Guest {
            id: entry.id.clone(),
            component: entry.component(),
            source,
        })?;
        Ok(Prepared {
            linked: Linked::Plugin(linked),
            sandbox_limits,
            tier_up,
        })
    }

    /// An entry that is not a component: its backend checks the grants that apply to it and
    /// makes its provider, or the tools it mounts when committed.
    async fn prepare_backend(
        &self,
        entry: &PluginEntry,
        source: &BackendEntry,
        info: &mut PluginInfo,
    ) -> Result<Prepared, LoadError> {
        info.kind = Some(source.backend().plugin_kind());
        source
            .check_grants(&entry.grants)
            .map_err(|source| LoadError::Sandbox {
                id: entry.id.clone(),
                source,
            })?;
        approve_only_on_tools(entry, source.backend().plugin_kind())?;
        let sandbox = self
            .sandbox_for(entry, info)?
            .with_approve(entry.approve.clone());
        let made = source
            .prepare(Context {
                id: &entry.id,
                config: &entry.config,
                sandbox: &sandbox,
                cancel_grace: self.runtime.cancel_grace,
                live: self.runtime.live.clone(),
                agents: Arc::downgrade(&self.runtime.agents),
                replaying: self.runtime.subagents.recording().replay_pending(),
            })
            .await
            .map_err(|source| LoadError::Entry {
                id: entry.id.clone(),
                source,
            })?;
        Ok(Prepared {
            tier_up: None,
            linked: match made {
                Made::Provider {
                    descriptor,
                    provider,
                    about,
                } => {
                    info.about = about;
                    Linked::Plugin(crate::kinds::Linked::Provider(descriptor, provider))
                }
                Made::Tools(mounts) => Linked::Mounts(mounts),
            },
            sandbox_limits: sandbox.limits().clone(),
        })
    }

    /// The entry's sandbox: its limits over the host's defaults, its grants checked against the
    /// host (directories exist and open, environment values read now); `info` gets what it
    /// granted, its limits and its host-memory budget.
    fn sandbox_for(
        &self,
        entry: &PluginEntry,
        info: &mut PluginInfo,
    ) -> Result<Sandbox, LoadError> {
        let err = |key: &str, message: String| LoadError::Sandbox {
            id: entry.id.clone(),
            source: SandboxError {
                key: key.to_string(),
                message,
            },
        };
        let limits = entry.limits.apply(&self.defaults);
        let engine = &self.engine_options;
        if engine.pooling && limits.memory_bytes > engine.pool_memory_bytes {
            return Err(err(
                "limits.memory_mb",
                format!(
                    "{} MiB is more than the engine's memory slot of {} MiB",
                    limits.memory_bytes >> 20,
                    engine.pool_memory_bytes >> 20
                ),
            ));
        }
        if engine.pooling && limits.table_elements > engine.pool_table_elements {
            return Err(err(
                "limits.table_elements",
                format!(
                    "{} is more than the engine's table slot of {} elements",
                    limits.table_elements, engine.pool_table_elements
                ),
            ));
        }
        // No grant may reach the compile cache: its artifacts are native code the host runs.
        let grants = entry
            .grants
            .resolve_avoiding(self.cache.guarded_dir())
            .map_err(|source| LoadError::Sandbox {
                id: entry.id.clone(),
                source,
            })?;
        let sandbox = Sandbox::new(limits, grants, engine.epoch_tick);
        info.grants = Some(sandbox.grants().clone());
        info.limits = Some(sandbox.limits().clone());
        info.host_memory = Some(sandbox.host_memory().clone());
        Ok(sandbox)
    }
}

/// Refuses `config.approve` on an entry that is not a tool: it says which calls of a tool need a
/// yes first, and the model calls nothing else.
fn approve_only_on_tools(entry: &PluginEntry, kind: PluginKind) -> Result<(), LoadError> {
    if entry.approve.is_none() || kind == PluginKind::Tool {
        return Ok(());
    }
    Err(LoadError::Sandbox {
        id: entry.id.clone(),
        source: SandboxError {
            key: "config.approve".into(),
            message: format!(
                "`approve` says which calls of a tool need a yes first; this entry is a {kind}, \
                 which the model does not call"
            ),
        },
    })
}
