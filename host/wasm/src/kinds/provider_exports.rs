//! The provider world's exports in every version that has it (`describe`, and `run` as each
//! version calls it: blocking, or async on a store run concurrently), in `seam-core`'s types:
//! what [`super::provider`] and [`super::shared`] both call.

use seam_core::types::{ProviderDescriptor, SubagentResult};

use crate::store::StoreData;
use crate::versions::delegate::Convert;
use crate::versions::exports::{
    mismatched, per_version, per_version_arms, raw_instance, versioned, wit_result, Answer,
    GuestError, RunCall,
};
use crate::versions::latest::provider_world::seam::plugin::types as new;
use crate::versions::{for_each_version, rows_with};

// The provider world's exports, in every version that has it: the versions' bindings are
// dispatched on here, so that the kind is one module.
for_each_version!(
    rows_with,
    Provider,
    versioned,
    ProviderPre,
    ProviderInstance,
    provider_world::ProviderPluginPre,
    ProviderPlugin
);

impl ProviderPre {
    /// Whether its `run` is async, so that one instance can serve several runs at once.
    pub(crate) fn concurrent_run(&self) -> bool {
        per_version!(Provider: self, _i, v => v::CONCURRENT_RUN)
    }

    async fn mismatch(&self, store: &mut wasmtime::Store<StoreData>) -> Option<String> {
        use seam_core::PluginKind::Provider;
        let version = self.version();
        per_version!(Provider: self, pre, v => {
            use v::provider_world::seam::plugin::types as t;
            let i = raw_instance(pre.instance_pre(), store).await?;
            mismatched!(@ store, &i, (Provider, version), "provider",
                "describe": [(&str,)] -> wit_result!(t::ProviderDescriptor),
                "run": [v::RunParams<'_>] -> wit_result!(t::SubagentResult),
            )
        })
    }
}

impl ProviderInstance {
    /// `provider.describe`.
    pub async fn describe(
        &self,
        store: &mut wasmtime::Store<StoreData>,
        config: &str,
    ) -> Answer<ProviderDescriptor> {
        per_version!(Provider: self, i, _v => Ok(i
            .seam_plugin_provider()
            .call_describe(store, config)
            .await?
            .map(|d| Convert::<new::ProviderDescriptor>::convert(d).into())
            .map_err(GuestError)))
    }

    /// `provider.run`, on an instance of its own run.
    pub(crate) async fn run(
        &self,
        store: &mut wasmtime::Store<StoreData>,
        call: RunCall<'_>,
    ) -> Answer<SubagentResult> {
        per_version!(Provider: self, i, v => v::call_run(i, store, call).await)
    }

    /// `provider.run`, as one call among others on a store shared by several runs.
    pub(crate) async fn run_concurrent(
        &self,
        accessor: &wasmtime::component::Accessor<StoreData>,
        call: RunCall<'_>,
    ) -> Answer<SubagentResult> {
        per_version!(Provider: self, i, v => v::call_run_concurrent(i, accessor, call).await)
    }
}
