//! The `run-context` interface: a provider's run declares readiness and watches for its cancel.

use seam_core::subagent::RunContext;
use wasmtime::component::{HasSelf, Linker};

use super::state::StoreData;
use crate::wit::latest::provider_world::seam::plugin::run_context as wit;

/// Adds `run-context` to a linker.
pub(crate) fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    wit::add_to_linker::<_, HasSelf<StoreData>>(linker, |s| s)
}

impl StoreData {
    fn run_ctx(&self) -> Option<&RunContext> {
        self.serving.run.as_ref().map(|env| &env.ctx)
    }
}

impl wit::Host for StoreData {
    async fn ready(&mut self) -> wasmtime::Result<()> {
        if let Some(ctx) = self.run_ctx() {
            ctx.ready();
        }
        Ok(())
    }

    async fn cancel_reason(&mut self) -> wasmtime::Result<Option<String>> {
        Ok(self.run_ctx().and_then(RunContext::cancel_reason))
    }

    async fn is_cancelled(&mut self) -> wasmtime::Result<bool> {
        Ok(self.run_ctx().is_some_and(RunContext::is_cancelled))
    }

    async fn sleep(&mut self, ms: u64) -> wasmtime::Result<bool> {
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
