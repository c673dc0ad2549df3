//! The `run-context` interface: a provider's run declares readiness, reports progress, takes
//! steering messages and watches for its cancel.

use seam_core::budget::Charge;
use seam_core::subagent::RunContext;
use seam_core::types::ContentBlock;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::p2::{subscribe, DynPollable, Pollable};

use crate::sandbox::gate::blocks_size;
use crate::sandbox::Limit;
use crate::store::context::{RunEnv, MESSAGE_OVERHEAD};
use crate::store::view::{HasPlugin, PluginCtxView, PluginView};
use crate::versions::convert::SubagentFailure;
use crate::versions::latest::provider_world::seam::plugin::run_context as wit;
use crate::versions::latest::provider_world::seam::plugin::types as wit_types;

/// Host bytes one pollable costs the plugin while it lives (its table entries and waker).
const POLLABLE_BYTES: usize = 256;

/// What a `cancelled` or `message-waiting` pollable waits on. It holds the plugin's charge for
/// as long as the guest keeps the pollable, so a guest that makes them in a loop without
/// dropping them runs into `host_memory_mb`.
struct Watch {
    ctx: RunContext,
    what: Watched,
    _charge: Charge,
}

enum Watched {
    Cancel,
    Message,
}

#[wasmtime_wasi::async_trait]
impl Pollable for Watch {
    async fn ready(&mut self) {
        match self.what {
            Watched::Cancel => self.ctx.cancelled().await,
            Watched::Message => self.ctx.message_waiting().await,
        }
    }
}

/// Adds `run-context` to a linker.
pub fn add_to_linker<T: PluginView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wit::add_to_linker::<_, HasPlugin>(linker, T::plugin)
}

/// What a `run-context` call that refers to no run says: the store serves none, or several
/// (`share_instance`), whose calls name their run through `runs`.
const NO_RUN: &str = "run-context is only available in an instance serving one run; an instance \
                      shared by several runs (`share_instance`) names its run through `runs`";

/// Reports `update` as the progress of the run `env` serves: it counts against the run's
/// output cap, and past it is dropped (logged once), not buffered.
pub(crate) fn report_progress(env: &mut RunEnv, update: Vec<wit_types::ContentBlock>) {
    let update: Vec<ContentBlock> = update.into_iter().map(Into::into).collect();
    // Progress crosses into the host and out to every listener. Each block counts its overhead
    // too, so that a flood of empty updates is not free.
    let size = blocks_size(&update) + MESSAGE_OVERHEAD * update.len().max(1);
    let max = env.max_output_bytes;
    if env.progress_bytes.saturating_add(size) > max {
        if !env.progress_cut {
            env.progress_cut = true;
            env.quota.hit(Limit::Output {
                max,
                size: env.progress_bytes.saturating_add(size),
            });
        }
        return;
    }
    env.progress_bytes += size;
    env.ctx.progress(update);
}

/// Charges a model call the run made itself to its tree; fails with `budget-exhausted` (and
/// stops the run) once the tree's budget has nothing left.
pub(crate) fn report_usage(
    ctx: &RunContext,
    usage: wit_types::ModelUsage,
) -> Result<(), SubagentFailure> {
    let cost = match usage.cost_usd {
        None => 0,
        Some(usd) if usd.is_finite() && usd >= 0.0 => (usd * 1_000_000.0).ceil() as u64,
        Some(usd) => {
            return Err(wit_types::SubagentError::InvalidRequest(format!(
                "report-usage: cost-usd must be a non-negative number of dollars, not {usd}"
            ))
            .into())
        }
    };
    let used = seam_core::types::Usage {
        prompt_tokens: usage.input_tokens,
        completion_tokens: usage.output_tokens,
    };
    let account = ctx.account().clone();
    ctx.store()
        .commit_later(account.charge(seam_core::spend::Spent::model_call(used, cost)));
    // Spent already: what is left decides whether the run may go on.
    if let Err(why) = account.check() {
        let text = why.to_string();
        ctx.stop_for_budget(why);
        return Err(wit_types::SubagentError::BudgetExhausted(text).into());
    }
    Ok(())
}

/// The output tokens the run's tree may still spend, when its budget bounds them.
pub(crate) fn output_tokens_left(ctx: &RunContext) -> Option<u64> {
    ctx.account()
        .remaining()
        .get(seam_core::spend::Dimension::OutputTokens)
}

impl PluginCtxView<'_> {
    /// Traps in an instance shared by several runs, where no call names its run.
    fn not_shared(&self) -> wasmtime::Result<()> {
        match self.serving.shared {
            Some(_) => Err(wasmtime::Error::msg(NO_RUN)),
            None => Ok(()),
        }
    }

    fn run_ctx(&self) -> Option<&RunContext> {
        self.serving.run.as_ref().map(|env| &env.ctx)
    }

    /// A pollable on the run's cancel or inbox, charged to the plugin while it lives.
    fn watch(&mut self, what: Watched) -> wasmtime::Result<Resource<DynPollable>> {
        let Some(env) = self.serving.run.as_ref() else {
            return Err(wasmtime::Error::msg(NO_RUN));
        };
        let watch = Watch {
            ctx: env.ctx.clone(),
            what,
            _charge: env.quota.charge(POLLABLE_BYTES)?,
        };
        let handle = self.table.push(watch)?;
        subscribe(self.table, handle)
    }
}

impl wit::Host for PluginCtxView<'_> {
    async fn ready(&mut self) -> wasmtime::Result<()> {
        self.not_shared()?;
        if let Some(ctx) = self.run_ctx() {
            ctx.ready();
        }
        Ok(())
    }

    async fn cancel_reason(&mut self) -> wasmtime::Result<Option<String>> {
        self.not_shared()?;
        Ok(self.run_ctx().and_then(RunContext::cancel_reason))
    }

    async fn is_cancelled(&mut self) -> wasmtime::Result<bool> {
        self.not_shared()?;
        Ok(self.run_ctx().is_some_and(RunContext::is_cancelled))
    }

    async fn progress(&mut self, update: Vec<wit_types::ContentBlock>) -> wasmtime::Result<()> {
        self.not_shared()?;
        if let Some(env) = self.serving.run.as_mut() {
            report_progress(env, update);
        }
        Ok(())
    }

    async fn cancelled(&mut self) -> wasmtime::Result<Resource<DynPollable>> {
        self.not_shared()?;
        self.watch(Watched::Cancel)
    }

    async fn next_message(&mut self) -> wasmtime::Result<Option<Vec<wit_types::ContentBlock>>> {
        self.not_shared()?;
        Ok(self
            .run_ctx()
            .and_then(RunContext::next_message)
            .map(|m| m.into_iter().map(Into::into).collect()))
    }

    async fn message_waiting(&mut self) -> wasmtime::Result<Resource<DynPollable>> {
        self.not_shared()?;
        self.watch(Watched::Message)
    }

    async fn report_usage(&mut self, usage: wit_types::ModelUsage) -> Result<(), SubagentFailure> {
        self.not_shared()?;
        let Some(ctx) = self.run_ctx() else {
            return Err(wasmtime::Error::msg(NO_RUN).into());
        };
        report_usage(ctx, usage)
    }

    async fn output_tokens_left(&mut self) -> wasmtime::Result<Option<u64>> {
        self.not_shared()?;
        Ok(self.run_ctx().and_then(output_tokens_left))
    }

    async fn sleep(&mut self, ms: u64) -> wasmtime::Result<bool> {
        self.not_shared()?;
        let nap = tokio::time::sleep(std::time::Duration::from_millis(ms));
        Ok(match self.run_ctx() {
            Some(ctx) => {
                tokio::select! {
                    _ = nap => !ctx.is_cancelled(),
                    _ = ctx.cancelled() => false,
                }
            }
            None => {
                nap.await;
                true
            }
        })
    }
}
