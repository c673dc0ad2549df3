//! Push notifications: webhooks a client set on a task (with a send's
//! `configuration.taskPushNotificationConfig`, or `CreateTaskPushNotificationConfig`), kept in
//! this process's memory only, each told of every change of its task's state as a
//! StreamResponse (`{"statusUpdate": ...}` while it runs, `{"task": ...}` when it ended).
//!
//! A webhook's origin must be one `[a2a] push_origins` allows. Notifications go out in order on
//! one task of their own, each POST with a timeout; a webhook that fails is logged and never
//! affects the task.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a::A2AError;
use seam_sandbox::HttpOrigin;
use tokio::sync::mpsc;

use crate::wire::{StreamResponse, TaskPushNotificationConfig};

use seam_core::sync::lock;

/// How long one webhook POST may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The header a config's token is sent in.
pub const TOKEN_HEADER: &str = "X-A2A-Notification-Token";

/// The configs a task has, per task id; and the queue of notifications to send.
#[derive(Clone)]
pub(crate) struct Push {
    configs: Arc<Mutex<HashMap<String, Vec<TaskPushNotificationConfig>>>>,
    origins: Arc<Vec<HttpOrigin>>,
    queue: mpsc::UnboundedSender<(Vec<TaskPushNotificationConfig>, StreamResponse)>,
    next: Arc<std::sync::atomic::AtomicU64>,
}

impl Push {
    /// Configs allowed at `origins`; the sender runs on a task of its own until every handle
    /// is dropped.
    pub fn new(origins: Vec<HttpOrigin>) -> Self {
        let (queue, mut rx) =
            mpsc::unbounded_channel::<(Vec<TaskPushNotificationConfig>, StreamResponse)>();
        tokio::spawn(async move {
            let client = match reqwest::Client::builder().timeout(TIMEOUT).build() {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "seam a2a: no HTTP client for push notifications");
                    return;
                }
            };
            while let Some((configs, body)) = rx.recv().await {
                let Ok(body) = serde_json::to_vec(&body) else {
                    continue;
                };
                for config in configs {
                    send(&client, &config, body.clone()).await;
                }
            }
        });
        Self {
            configs: Arc::default(),
            origins: Arc::new(origins),
            queue,
            next: Arc::default(),
        }
    }

    /// Adds `config` to `task` (its id made up if it has none); returns it as kept.
    pub fn add(
        &self,
        task: &str,
        mut config: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        self.allowed(&config.url)?;
        config.task_id = task.to_string();
        let id = config
            .id
            .clone()
            .filter(|i| !i.is_empty())
            .unwrap_or_else(|| {
                format!(
                    "push-{}",
                    self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
                )
            });
        config.id = Some(id.clone());
        let mut all = lock(&self.configs);
        let list = all.entry(task.to_string()).or_default();
        list.retain(|c| c.id.as_deref() != Some(&id));
        list.push(config.clone());
        Ok(config)
    }

    /// Whether a webhook may be at `url`.
    fn allowed(&self, url: &str) -> Result<(), A2AError> {
        let origin = url
            .parse::<http::Uri>()
            .ok()
            .and_then(|u| HttpOrigin::of(&u))
            .ok_or_else(|| A2AError::invalid_params(format!("`{url}` is not an http(s) URL")))?;
        if self.origins.contains(&origin) {
            return Ok(());
        }
        Err(A2AError::invalid_params(format!(
            "push notifications to `{origin}` are not allowed: add it to `push_origins` under \
             `[a2a]` in seam's config"
        )))
    }

    /// The configs of `task`.
    pub fn list(&self, task: &str) -> Vec<TaskPushNotificationConfig> {
        lock(&self.configs).get(task).cloned().unwrap_or_default()
    }

    /// Config `id` of `task`.
    pub fn get(&self, task: &str, id: &str) -> Option<TaskPushNotificationConfig> {
        self.list(task)
            .into_iter()
            .find(|c| c.id.as_deref() == Some(id))
    }

    /// Removes config `id` of `task`; whether it was there.
    pub fn delete(&self, task: &str, id: &str) -> bool {
        let mut all = lock(&self.configs);
        let Some(list) = all.get_mut(task) else {
            return false;
        };
        let before = list.len();
        list.retain(|c| c.id.as_deref() != Some(id));
        before != list.len()
    }

    /// Queues `body` for every webhook of `task`.
    pub fn notify(&self, task: &str, body: StreamResponse) {
        let configs = self.list(task);
        if !configs.is_empty() {
            let _ = self.queue.send((configs, body));
        }
    }
}

async fn send(client: &reqwest::Client, config: &TaskPushNotificationConfig, body: Vec<u8>) {
    let mut request = client
        .post(&config.url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body);
    if let Some(token) = &config.token {
        request = request.header(TOKEN_HEADER, token);
    }
    if let Some(auth) = &config.authentication {
        let value = match &auth.credentials {
            Some(credentials) => format!("{} {credentials}", auth.scheme),
            None => auth.scheme.clone(),
        };
        request = request.header(http::header::AUTHORIZATION, value);
    }
    match request.send().await {
        Ok(response) if response.status().is_success() => {}
        Ok(response) => tracing::warn!(
            url = %config.url, status = %response.status(),
            "seam a2a: a push notification webhook refused a notification"
        ),
        Err(e) => tracing::warn!(
            url = %config.url, error = %e,
            "seam a2a: a push notification webhook could not be reached"
        ),
    }
}
