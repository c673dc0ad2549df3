//! The `runs` interface (0.5.0): `run-context`'s calls for an async `run`, each naming its run,
//! so that an instance serving several runs at once (`share_instance`) reaches the right one.
//! Progress may come as a stream, read by [`ProgressStream`] as the guest writes it.

use std::pin::Pin;
use std::task::{Context, Poll};

use wasmtime::component::{Access, Linker, Source, StreamConsumer, StreamReader, StreamResult};
use wasmtime::StoreContextMut;

use super::run_context::{output_tokens_left, report_progress, report_usage};
use crate::store::view::{HasPlugin, PluginCtxView, PluginView};
use crate::versions::convert::SubagentFailure;
use crate::versions::latest::provider_world::seam::plugin::runs as wit;
use crate::versions::latest::provider_world::seam::plugin::types as wit_types;

/// Adds `runs` to a linker.
pub fn add_to_linker<T: PluginView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wit::add_to_linker::<_, HasPlugin>(linker, T::plugin)
}

impl wit::Host for PluginCtxView<'_> {
    async fn ready(&mut self, run_id: String) -> wasmtime::Result<()> {
        if let Some(env) = self.serving.run_named(&run_id) {
            env.ctx.ready();
        }
        Ok(())
    }

    async fn progress(
        &mut self,
        run_id: String,
        update: Vec<wit_types::ContentBlock>,
    ) -> wasmtime::Result<()> {
        if let Some(env) = self.serving.run_named(&run_id) {
            report_progress(env, update);
        }
        Ok(())
    }

    async fn report_usage(
        &mut self,
        run_id: String,
        usage: wit_types::ModelUsage,
    ) -> Result<(), SubagentFailure> {
        match self.serving.run_named(&run_id) {
            Some(env) => report_usage(&env.ctx, usage),
            None => Err(wit_types::SubagentError::NoRun(run_id).into()),
        }
    }

    async fn output_tokens_left(&mut self, run_id: String) -> wasmtime::Result<Option<u64>> {
        Ok(self
            .serving
            .run_named(&run_id)
            .and_then(|env| output_tokens_left(&env.ctx)))
    }
}

impl<T: PluginView + 'static> wit::HostWithStore<T> for HasPlugin {
    fn progress_stream(
        mut host: Access<T, Self>,
        run_id: String,
        updates: StreamReader<Vec<wit_types::ContentBlock>>,
    ) -> wasmtime::Result<()> {
        updates.pipe(&mut host, ProgressStream { run_id })
    }
}

/// Reads a run's progress stream: each item is reported as `runs.progress` reports it. The
/// stream is dropped (the guest's writes fail) once the run it names is over.
struct ProgressStream {
    run_id: String,
}

impl<T: PluginView> StreamConsumer<T> for ProgressStream {
    type Item = Vec<wit_types::ContentBlock>;

    fn poll_consume(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        mut store: StoreContextMut<T>,
        mut source: Source<'_, Self::Item>,
        _finish: bool,
    ) -> Poll<wasmtime::Result<StreamResult>> {
        // One update at a time: each is reported before the guest's next write completes.
        let mut item: Option<Self::Item> = None;
        if let Err(e) = source.read(&mut store, &mut item) {
            return Poll::Ready(Err(e));
        }
        let view = store.data_mut().plugin();
        let Some(env) = view.serving.run_named(&self.run_id) else {
            return Poll::Ready(Ok(StreamResult::Dropped));
        };
        if let Some(update) = item {
            report_progress(env, update);
        }
        Poll::Ready(Ok(StreamResult::Completed))
    }
}
