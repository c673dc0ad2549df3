//! A component's exports, whatever version of the package it was built against, called in
//! `seam-core`'s types. The plugin kinds use these and never see a version's bindings. The
//! macros that declare a kind's per-version enums and calls (`versioned!`, `per_version!`,
//! `mismatched!`) are the crate's, so that a kind's own module can hold its part (as
//! `kinds::observer` does).

use seam_core::tool::ToolBinding;
use seam_core::types::{ParentRef, ProviderDescriptor, StartRequest, SubagentResult, ToolResult};
use wasmtime::component::{Instance, InstancePre};
use wasmtime::Store;

use crate::store::StoreData;

/// A tool's description as the guest gave it, before the host checks its size and parses its
/// schema.
pub struct GuestToolDescriptor {
    /// The tool's name.
    pub name: String,
    /// What the model is told it does.
    pub description: String,
    /// Its parameters' JSON Schema, as text.
    pub parameters_schema: String,
}

/// The error a guest's export returned itself (the `string` of the WIT's `result<_, string>`):
/// its own words, never the host's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct GuestError(pub String);

/// A call's outcome: the trap or host error, or the guest's own answer.
pub(crate) type Answer<T> = wasmtime::Result<Result<T, GuestError>>;

/// The WIT's `result<T, string>` as wasmtime lifts it: the type of a guest export's answer,
/// named only to check a component's exports against this host's.
macro_rules! wit_result {
    ($ok:ty) => {
        std::result::Result<$ok, std::string::String>
    };
}

/// Which of the functions an export interface lists has another type than this host's, as
/// `interface.function: why` (`provider.run: type mismatch with results: expected record of
/// 4 fields, found 3 fields`). Each `name: (params) -> results` is checked in order.
macro_rules! mismatched {
    ($store:expr, $instance:expr, $export:expr, $short:literal,
     $($name:literal : ($($param:ty),*) -> $result:ty),* $(,)?) => {{
        let store: &mut wasmtime::Store<$crate::store::StoreData> = $store;
        let instance: &wasmtime::component::Instance = $instance;
        let export = $crate::versions::export_name($export.0, $export.1);
        let iface = instance.get_export_index(&mut *store, None, &export);
        let mut found = None;
        if let Some(iface) = iface {
            $(
                if found.is_none() {
                    found = match instance.get_export_index(&mut *store, Some(&iface), $name) {
                        None => Some(format!("{}.{}: missing", $short, $name)),
                        Some(index) => instance
                            .get_typed_func::<($($param,)*), ($result,)>(&mut *store, &index)
                            .err()
                            .map(|e| format!("{}.{}: {}", $short, $name, crate::fault::one_line(&format!("{e:#}")))),
                    };
                }
            )*
        }
        found
    }};
}

/// Instantiates `pre` without the generated bindings' checks, to name the export function
/// whose type does not match (the bindings' own error does not say which).
pub(crate) async fn raw_instance(
    pre: &InstancePre<StoreData>,
    store: &mut Store<StoreData>,
) -> Option<Instance> {
    pre.instantiate_async(&mut *store).await.ok()
}

/// Whether an instantiation failed because an export's type differs from this host's. wasmtime
/// gives this only as text (`type mismatch with results` / `with parameters`, a `.context` of a
/// string in its `func/typed.rs`); the one place that reads it (ARCHITECTURE.md lists it).
pub(crate) fn is_type_mismatch(error: &wasmtime::Error) -> bool {
    error
        .chain()
        .any(|cause| cause.to_string().starts_with("type mismatch"))
}

/// Adds the mismatched function's name to an instantiation error, when one is found.
pub(crate) fn named(error: wasmtime::Error, mismatch: Option<String>) -> wasmtime::Error {
    match mismatch {
        Some(m) => wasmtime::Error::msg(format!(
            "the component's export does not match this host's `seam:plugin` types: {m}"
        )),
        None => error,
    }
}

/// Declares a pre-instantiated component of one kind over every supported version (its world's
/// module, `Pre` type and instance type, found in each version's bindings), and its instance:
/// one variant per version of the list in `super::for_each_version`.
macro_rules! versioned {
    ([$pre:ident, $instance:ident, $world:ident :: $pre_ty:ident, $instance_ty:ident]
     $($variant:ident $module:ident $number:literal [$($file:literal),*] {$($kind:ident)*},)+) => {
        /// A component ready to instantiate, for each supported version.
        #[derive(Clone)]
        pub enum $pre {
            $(
                #[doc = concat!("Built against ", $number, ".")]
                $variant($crate::versions::$module::$world::$pre_ty<$crate::store::StoreData>),
            )+
        }

        /// A live instance, for each supported version.
        pub enum $instance {
            $(
                #[doc = concat!("Built against ", $number, ".")]
                $variant($crate::versions::$module::$world::$instance_ty),
            )+
        }

        impl $pre {
            /// Wraps `pre`, linked by the linker of `version`.
            pub fn new(
                version: $crate::versions::WitVersion,
                pre: wasmtime::component::InstancePre<$crate::store::StoreData>,
            ) -> wasmtime::Result<Self> {
                Ok(match version {
                    $($crate::versions::WitVersion::$variant => Self::$variant($crate::versions::$module::$world::$pre_ty::new(pre)?),)+
                    // The linkers link no kind in a version without its world.
                    #[allow(unreachable_patterns)]
                    other => return Err(wasmtime::Error::msg(format!(
                        "seam:plugin@{other} has no `{}` world", stringify!($world)
                    ))),
                })
            }

            /// The version it was built against.
            fn version(&self) -> $crate::versions::WitVersion {
                match self {
                    $(Self::$variant(_) => $crate::versions::WitVersion::$variant,)+
                }
            }

            /// A fresh instance in `store`. A type mismatch in its exports is named: which
            /// function, and how it differs.
            pub async fn instantiate(
                &self,
                store: &mut wasmtime::Store<$crate::store::StoreData>,
            ) -> wasmtime::Result<$instance> {
                let made = match self {
                    $(Self::$variant(pre) => pre
                        .instantiate_async(&mut *store)
                        .await
                        .map($instance::$variant),)+
                };
                match made {
                    Ok(instance) => Ok(instance),
                    Err(e) if $crate::versions::exports::is_type_mismatch(&e) => {
                        let mismatch = self.mismatch(store).await;
                        Err($crate::versions::exports::named(e, mismatch))
                    }
                    Err(e) => Err(e),
                }
            }
        }
    };
}

super::for_each_version!(
    rows_with,
    Provider,
    versioned,
    ProviderPre,
    ProviderInstance,
    provider_world::ProviderPluginPre,
    ProviderPlugin
);
super::for_each_version!(
    rows_with,
    Tool,
    versioned,
    ToolPre,
    ToolInstance,
    tool_world::ToolPluginPre,
    ToolPlugin
);

/// The arms of [`per_version!`], one per version of the list.
macro_rules! per_version_arms {
    ([$value:expr, $i:ident, $v:ident, $body:expr]
     $($variant:ident $module:ident $number:literal [$($file:literal),*] {$($kind:ident)*},)+) => {
        match $value {
            $(Self::$variant($i) => {
                // A body that needs no version-specific item leaves it unused.
                #[allow(unused_imports)]
                use $crate::versions::$module as $v;
                $body
            })+
        }
    };
}

/// Evaluates `$body` for whichever version `$value` (of `$kind`'s enums) holds, with `$i` bound
/// to what that variant holds and `$v` naming that version's bindings module: one body,
/// type-checked against each version's own types.
macro_rules! per_version {
    ($kind:ident: $value:expr, $i:ident, $v:ident => $body:expr) => {
        $crate::versions::for_each_version!(
            rows_with,
            $kind,
            per_version_arms,
            $value,
            $i,
            $v,
            $body
        )
    };
}
// A kind's own module (`crate::kinds::<kind>`) declares its `versioned!` enums and its export
// calls with these, so a new kind touches no file here. A consumer is called by name, so a
// module that uses one imports it, with `for_each_version` and `rows_with`.
pub(crate) use {mismatched, per_version, per_version_arms, versioned, wit_result};

impl ProviderPre {
    async fn mismatch(&self, store: &mut Store<StoreData>) -> Option<String> {
        use seam_core::PluginKind::Provider;
        let version = self.version();
        per_version!(Provider: self, pre, v => {
            use v::provider_world::seam::plugin::types as t;
            let i = raw_instance(pre.instance_pre(), store).await?;
            mismatched!(store, &i, (Provider, version), "provider",
                "describe": (&str) -> wit_result!(t::ProviderDescriptor),
                "run": (&str, &str, &t::StartRequest) -> wit_result!(t::SubagentResult),
            )
        })
    }
}

impl ToolPre {
    async fn mismatch(&self, store: &mut Store<StoreData>) -> Option<String> {
        use seam_core::PluginKind::Tool;
        let version = self.version();
        per_version!(Tool: self, pre, v => {
            use v::provider_world::seam::plugin::types as t;
            use v::tool_world::exports::seam::plugin::tool as x;
            let i = raw_instance(pre.instance_pre(), store).await?;
            mismatched!(store, &i, (Tool, version), "tool",
                "bind": (&str) -> wit_result!(x::ToolBinding),
                "describe": (&str, Option<&t::ProviderDescriptor>) -> wit_result!(x::ToolDescriptor),
                "execute": (&str, &t::ParentRef, &str) -> x::ToolResult,
            )
        })
    }
}

impl ProviderInstance {
    /// `provider.describe`.
    pub async fn describe(
        &self,
        store: &mut Store<StoreData>,
        config: &str,
    ) -> Answer<ProviderDescriptor> {
        per_version!(Provider: self, i, _v => Ok(i
            .seam_plugin_provider()
            .call_describe(store, config)
            .await?
            .map(Into::into)
            .map_err(GuestError)))
    }

    /// `provider.run`.
    pub async fn run(
        &self,
        store: &mut Store<StoreData>,
        config: &str,
        run_id: &str,
        request: &StartRequest,
    ) -> Answer<SubagentResult> {
        per_version!(Provider: self, i, v => Ok(i
            .seam_plugin_provider()
            .call_run(store, config, run_id, &v::request_to_wit(request))
            .await?
            .map(v::result_from_wit)
            .map_err(GuestError)))
    }
}

impl ToolInstance {
    /// `tool.bind`.
    pub async fn bind(&self, store: &mut Store<StoreData>, config: &str) -> Answer<ToolBinding> {
        per_version!(Tool: self, i, _v => Ok(i
        .seam_plugin_tool()
        .call_bind(store, config)
        .await?
        .map(|b| ToolBinding {
            tool_name: b.tool_name,
            provider: b.provider,
        })
        .map_err(GuestError)))
    }

    /// `tool.describe`.
    pub async fn describe(
        &self,
        store: &mut Store<StoreData>,
        config: &str,
        provider: Option<&ProviderDescriptor>,
    ) -> Answer<GuestToolDescriptor> {
        per_version!(Tool: self, i, v => {
            let provider = provider.map(v::wit_descriptor);
            Ok(i.seam_plugin_tool()
                .call_describe(store, config, provider.as_ref())
                .await?
                .map(|d| GuestToolDescriptor {
                    name: d.name,
                    description: d.description,
                    parameters_schema: d.parameters_schema,
                })
                .map_err(GuestError))
        })
    }

    /// `tool.execute`.
    pub async fn execute(
        &self,
        store: &mut Store<StoreData>,
        config: &str,
        caller: &ParentRef,
        arguments: &str,
    ) -> wasmtime::Result<ToolResult> {
        per_version!(Tool: self, i, _v => {
            let r = i
                .seam_plugin_tool()
                .call_execute(store, config, &caller.clone().into(), arguments)
                .await?;
            Ok(ToolResult {
                content: r.content.into_iter().map(Into::into).collect(),
                is_error: r.is_error,
            })
        })
    }
}
