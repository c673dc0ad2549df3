//! Async provider: a Seam provider built for `seam:plugin@0.5.0` and WASI 0.3, whose `run` is an
//! async function, so that one instance can serve many runs at once (`share_instance`).
//!
//! Each run's prompt picks what it does:
//! - `wait`: declares readiness, then waits for its cancel or a steering message; answers
//!   `message: TEXT`, or ends `aborted` with `cancelled: REASON`.
//! - `sleep MS`: waits `MS` milliseconds on WASI 0.3's `monotonic-clock.wait-for` (or its
//!   cancel), then answers `slept MS`.
//! - `progress N`: reports `step 1` to `step N` through a progress stream, then answers
//!   `progressed N`.
//! - `trap`: panics (the instance traps).
//! - `context`: answers `cancelled false` from `run-context.is-cancelled`, which names no run:
//!   fine in an instance of its own run, a trap in a shared one.
//! - anything else: answers `echo: PROMPT`.
//!
//! Every answer ends with ` [run #SEQ, peak P]`: the run's number in this instance (from 1) and
//! the most runs this instance has served at once, so a test can tell which runs shared it.
//!
//! Config: `name` (the provider's name, `async` by default).

wit_bindgen::generate!({
    path: "../../wit/v0.5.0",
    world: "provider-plugin",
    generate_all,
});

use std::future::IntoFuture;
use std::sync::atomic::{AtomicU64, Ordering};

use exports::seam::plugin::provider::Guest;
use futures::future::{select, Either};
use seam::plugin::runs;
use seam::plugin::types::{
    Capabilities, ContentBlock, ProviderDescriptor, RuntimeFeatures, StartRequest, StopReason,
    SubagentResult,
};
use wit_bindgen::{FutureReader, StreamReader};

/// Runs started in this instance.
static STARTED: AtomicU64 = AtomicU64::new(0);
/// Runs in this instance now.
static LIVE: AtomicU64 = AtomicU64::new(0);
/// The most runs this instance has served at once.
static PEAK: AtomicU64 = AtomicU64::new(0);

struct Provider;

impl Guest for Provider {
    fn describe(config: String) -> Result<ProviderDescriptor, String> {
        let config: serde_json::Value =
            serde_json::from_str(&config).map_err(|e| format!("config is not JSON: {e}"))?;
        let name = config
            .get("name")
            .and_then(|n| n.as_str())
            .unwrap_or("async")
            .to_string();
        Ok(ProviderDescriptor {
            name,
            capabilities: Capabilities {
                output_schema: false,
                depth_limit: false,
                tool_filter: false,
                persona: false,
            },
            features: RuntimeFeatures {
                steering: true,
                resume: false,
            },
            inherits_parent_context: false,
        })
    }

    async fn run(
        _config: String,
        run_id: String,
        request: StartRequest,
        cancel: FutureReader<Option<String>>,
        messages: StreamReader<Vec<ContentBlock>>,
    ) -> Result<SubagentResult, String> {
        let seq = STARTED.fetch_add(1, Ordering::Relaxed) + 1;
        let live = LIVE.fetch_add(1, Ordering::Relaxed) + 1;
        PEAK.fetch_max(live, Ordering::Relaxed);
        let _live = Live;
        runs::ready(&run_id);
        let prompt = text(&request.prompt);
        let mut words = prompt.split_whitespace();
        let (stop, output) = match (words.next(), words.next()) {
            (Some("wait"), _) => wait(cancel, messages).await,
            (Some("sleep"), Some(ms)) => {
                let ms: u64 = ms.parse().map_err(|_| format!("not a number: {ms}"))?;
                let nap = wasip3::clocks::monotonic_clock::wait_for(ms * 1_000_000);
                match select(Box::pin(nap), Box::pin(cancel.into_future())).await {
                    Either::Left(((), _)) => (StopReason::Completed, format!("slept {ms}")),
                    Either::Right((reason, _)) => cancelled(reason),
                }
            }
            (Some("progress"), Some(n)) => {
                let n: u32 = n.parse().map_err(|_| format!("not a number: {n}"))?;
                let (mut writer, reader) = wit_stream::new::<Vec<ContentBlock>>();
                runs::progress_stream(&run_id, reader);
                for i in 1..=n {
                    if writer
                        .write_one(vec![ContentBlock::Text(format!("step {i}"))])
                        .await
                        .is_some()
                    {
                        break;
                    }
                }
                (StopReason::Completed, format!("progressed {n}"))
            }
            (Some("trap"), _) => panic!("asked to trap"),
            (Some("context"), _) => (
                StopReason::Completed,
                format!("cancelled {}", seam::plugin::run_context::is_cancelled()),
            ),
            _ => (StopReason::Completed, format!("echo: {prompt}")),
        };
        let peak = PEAK.load(Ordering::Relaxed);
        Ok(SubagentResult {
            output: vec![ContentBlock::Text(format!(
                "{output} [run #{seq}, peak {peak}]"
            ))],
            structured: None,
            stop_reason: stop,
            diagnostic: None,
        })
    }
}

/// Counts a run out of [`LIVE`] however it ends.
struct Live;

impl Drop for Live {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Waits for the run's cancel or its first steering message.
async fn wait(
    cancel: FutureReader<Option<String>>,
    mut messages: StreamReader<Vec<ContentBlock>>,
) -> (StopReason, String) {
    let next = Box::pin(async move { messages.next().await });
    match select(next, Box::pin(cancel.into_future())).await {
        Either::Left((Some(message), _)) => (
            StopReason::Completed,
            format!("message: {}", text(&message)),
        ),
        Either::Left((None, cancel)) => cancelled(cancel.await),
        Either::Right((reason, _)) => cancelled(reason),
    }
}

fn cancelled(reason: Option<String>) -> (StopReason, String) {
    (
        StopReason::Aborted,
        format!("cancelled: {}", reason.unwrap_or_default()),
    )
}

fn text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text(t) | ContentBlock::Json(t) => t.as_str(),
        })
        .collect::<Vec<_>>()
        .join("")
}

export!(Provider);
