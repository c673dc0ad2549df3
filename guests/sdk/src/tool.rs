//! The [`Tool`] trait and [`export_tool!`](crate::export_tool).

use serde::de::DeserializeOwned;

pub use crate::exports::tool::exports::seam::plugin::tool::{
    ToolBinding, ToolDescriptor, ToolResult,
};
use crate::types::{ContentBlock, ParentRef, ProviderDescriptor};

/// A model-facing tool. Its config is parsed by [`config::typed`](crate::config::typed) and
/// the model's arguments into [`Tool::Args`] before any method runs: an unknown config key
/// refuses the plugin, and arguments that do not parse answer the model with an error result
/// naming the problem.
pub trait Tool {
    /// The plugin's config.
    type Config: DeserializeOwned;
    /// The call's arguments, as the model sends them (a JSON object).
    type Args: DeserializeOwned;

    /// Says how the tool binds: its name, and the provider it follows, if any.
    fn bind(config: &Self::Config) -> Result<ToolBinding, String>;

    /// Describes the tool to the model, given the bound provider's descriptor while it exists.
    fn describe(
        config: &Self::Config,
        provider: Option<ProviderDescriptor>,
    ) -> Result<ToolDescriptor, String>;

    /// Executes one call on behalf of `caller`.
    fn execute(config: Self::Config, caller: ParentRef, args: Self::Args) -> ToolResult;
}

/// A successful tool result with one text block.
pub fn ok(text: impl Into<String>) -> ToolResult {
    ToolResult {
        content: vec![ContentBlock::Text(text.into())],
        is_error: false,
    }
}

/// A failed tool result with one text block.
pub fn error(text: impl Into<String>) -> ToolResult {
    ToolResult {
        content: vec![ContentBlock::Text(text.into())],
        is_error: true,
    }
}

#[doc(hidden)]
pub fn bind<T: Tool>(config: &str) -> Result<ToolBinding, String> {
    T::bind(&crate::config::typed(config)?)
}

#[doc(hidden)]
pub fn describe<T: Tool>(
    config: &str,
    provider: Option<ProviderDescriptor>,
) -> Result<ToolDescriptor, String> {
    T::describe(&crate::config::typed(config)?, provider)
}

#[doc(hidden)]
pub fn execute<T: Tool>(config: &str, caller: ParentRef, arguments: &str) -> ToolResult {
    let config = match crate::config::typed(config) {
        Ok(config) => config,
        Err(why) => return error(why),
    };
    match crate::config::typed_json::<T::Args>(arguments, "arguments") {
        Ok(args) => T::execute(config, caller, args),
        Err(why) => error(why),
    }
}

/// Exports `$ty`, which implements [`Tool`], as the component's `tool`.
#[macro_export]
macro_rules! export_tool {
    ($ty:ident) => {
        const _: () = {
            use ::std::string::String;
            use $crate::exports::tool::exports::seam::plugin::tool::Guest;
            use $crate::tool::{ToolBinding, ToolDescriptor, ToolResult};
            use $crate::types::{ParentRef, ProviderDescriptor};

            impl Guest for $ty {
                fn bind(config: String) -> ::std::result::Result<ToolBinding, String> {
                    $crate::tool::bind::<$ty>(&config)
                }
                fn describe(
                    config: String,
                    provider: ::std::option::Option<ProviderDescriptor>,
                ) -> ::std::result::Result<ToolDescriptor, String> {
                    $crate::tool::describe::<$ty>(&config, provider)
                }
                fn execute(config: String, caller: ParentRef, arguments: String) -> ToolResult {
                    $crate::tool::execute::<$ty>(&config, caller, &arguments)
                }
            }

    $crate::exports::tool::export_tool_world!($ty with_types_in $crate::exports::tool);
        };
    };
}
