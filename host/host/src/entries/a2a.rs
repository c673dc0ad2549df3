//! `kind = "a2a"`: a remote agent spoken to over A2A, as a provider (`seam-a2a`).

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use seam_core::types::PluginKind;

use super::backend::{BackendEntry, Context, Entry, EntryBackend, Made, Summary};
use crate::sandbox::{EntryError, Grants, SandboxError};

/// The `a2a` kind.
pub(super) struct A2a;

/// An A2A entry: the agent's base URL (its card is below it).
#[derive(Debug, PartialEq)]
struct A2aEntry(String);

impl EntryBackend for A2a {
    fn name(&self) -> &'static str {
        "a2a"
    }

    fn plugin_kind(&self) -> PluginKind {
        PluginKind::Provider
    }

    fn read(&self, table: &mut toml::Table, _base: &Path) -> Result<BackendEntry, EntryError> {
        table.remove("kind");
        if table.contains_key("component") {
            return Err(EntryError::new(
                "component",
                "key `component` does not apply to `kind = \"a2a\"`: the agent is at `url`"
                    .into(),
            ));
        }
        let Some(url) = table.remove("url") else {
            return Err(EntryError::new(
                "url",
                "key `url` is missing: an A2A entry names its agent's base URL, as \
                 `url = \"https://agent.example.com\"` (its card is at \
                 `/.well-known/agent-card.json` below it)"
                    .into(),
            ));
        };
        match url.as_str() {
            Some(u) if u.starts_with("http://") || u.starts_with("https://") => {
                Ok(BackendEntry::new(A2aEntry(u.to_string())))
            }
            _ => Err(EntryError::new(
                "url",
                "key `url` must be an http:// or https:// URL".into(),
            )),
        }
    }

    fn what(&self, p: &Summary<'_>) -> String {
        match p.name {
            Some(name) => format!(
                "provider `{name}`, A2A agent `{}`{}{}",
                p.written.display(),
                p.about.map(|a| format!(" ({a})")).unwrap_or_default(),
                p.stale
            ),
            None => String::new(),
        }
    }

    // An A2A agent is no component: of the limits, only its host memory applies.
    fn host_memory_only(&self) -> bool {
        true
    }
}

impl Entry for A2aEntry {
    fn backend(&self) -> &'static dyn EntryBackend {
        &A2a
    }

    fn written(&self) -> PathBuf {
        PathBuf::from(&self.0)
    }

    fn watched_file(&self) -> Option<PathBuf> {
        None
    }

    fn not_compiled(&self) -> &'static str {
        "a remote A2A agent, nothing to compile"
    }

    fn check_grants(&self, grants: &Grants) -> Result<(), SandboxError> {
        seam_a2a::client::check_grants(&self.0, grants)
    }

    // The card is fetched and checked now: an agent Seam cannot honour fails the load (a
    // replay, whose answers come from the recording, reaches no agent).
    fn prepare<'a>(&'a self, cx: Context<'a>) -> BoxFuture<'a, Result<Made, EntryError>> {
        Box::pin(async move {
            let (descriptor, provider) =
                seam_a2a::client::provider(cx.id, cx.config, &self.0, cx.sandbox, cx.replaying)
                    .await?;
            let about = provider.about();
            Ok(Made::Provider {
                descriptor,
                provider: Arc::new(provider),
                about,
            })
        })
    }

    fn same(&self, other: &dyn Any) -> bool {
        other.downcast_ref::<Self>() == Some(self)
    }
}
