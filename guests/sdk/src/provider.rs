//! The [`Provider`] trait and [`export_provider!`](crate::export_provider).

use serde::de::DeserializeOwned;

use crate::types::{ProviderDescriptor, StartRequest, SubagentResult};

/// One run of a provider: its id and what the caller asked for.
#[derive(Debug, Clone)]
pub struct Run {
    /// The run's id (the child's agent id).
    pub id: String,
    /// The caller's request.
    pub request: StartRequest,
}

impl Run {
    /// The prompt's text blocks, joined with newlines.
    pub fn prompt_text(&self) -> String {
        crate::text(&self.request.prompt)
    }
}

/// A subagent provider. The host calls [`describe`](Provider::describe) once at load and
/// [`run`](Provider::run) once per run, each in a fresh instance, with the config parsed by
/// [`config::typed`](crate::config::typed) (unknown keys are refused before either is called).
pub trait Provider {
    /// The plugin's config (`config = { ... }` of its entry).
    type Config: DeserializeOwned;

    /// Declares the provider; an error refuses the plugin.
    fn describe(config: &Self::Config) -> Result<ProviderDescriptor, String>;

    /// Runs one child to its end. Call [`ready`](crate::ready) once the child exists. `Err`
    /// means the attempt failed before the child existed; a child-level failure is
    /// `Ok(`[`failed`](crate::failed)`(..))`.
    fn run(config: Self::Config, run: Run) -> Result<SubagentResult, String>;
}

#[doc(hidden)]
pub fn describe<P: Provider>(config: &str) -> Result<ProviderDescriptor, String> {
    P::describe(&crate::config::typed(config)?)
}

#[doc(hidden)]
pub fn run<P: Provider>(
    config: &str,
    id: String,
    request: StartRequest,
) -> Result<SubagentResult, String> {
    P::run(crate::config::typed(config)?, Run { id, request })
}

/// Exports `$ty`, which implements [`Provider`], as the component's `provider`.
#[macro_export]
macro_rules! export_provider {
    ($ty:ident) => {
        const _: () = {
            use $crate::exports::provider::exports::seam::plugin::provider::Guest;
            use $crate::types::{ProviderDescriptor, StartRequest, SubagentResult};
            use ::std::string::String;

            impl Guest for $ty {
                fn describe(config: String) -> ::std::result::Result<ProviderDescriptor, String> {
                    $crate::provider::describe::<$ty>(&config)
                }
                fn run(
                    config: String,
                    run_id: String,
                    request: StartRequest,
                ) -> ::std::result::Result<SubagentResult, String> {
                    $crate::provider::run::<$ty>(&config, run_id, request)
                }
            }

            $crate::exports::provider::export_provider_world!($ty with_types_in $crate::exports::provider);
        };
    };
}
