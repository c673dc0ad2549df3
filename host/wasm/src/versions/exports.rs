//! The machinery a kind uses to call its world's exports whatever version of the package a
//! component was built against, in `seam-core`'s types: `versioned!` declares a kind's
//! per-version enums (a component ready to instantiate, an instance), `per_version!` runs one
//! body against whichever version's bindings a value holds, `mismatched!` names the export
//! whose type differs from this host's. Each kind's module (`crate::kinds::<kind>`) uses them
//! for its own world, so a kind touches no file here; outside this folder, nothing sees a
//! version's bindings.

use wasmtime::component::{Instance, InstancePre};
use wasmtime::Store;

use crate::store::StoreData;

/// The error a guest's export returned itself (the `string` of the WIT's `result<_, string>`):
/// its own words, never the host's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct GuestError(pub String);

/// A call's outcome: the trap or host error, or the guest's own answer.
pub(crate) type Answer<T> = wasmtime::Result<Result<T, GuestError>>;

/// One provider run, as each version's `run` export is called with it (each version module's
/// `call_run` and `call_run_concurrent`).
pub(crate) struct RunCall<'a> {
    /// The plugin's config (a JSON object).
    pub config: &'a str,
    /// The run.
    pub ctx: &'a seam_core::subagent::RunContext,
    /// What it was started with.
    pub request: &'a seam_core::types::StartRequest,
}

/// Declares, in a version module whose `provider.run` is blocking (0.1.0 to 0.4.0), how it is
/// called: `call_run` on an instance of its own run (the guest reads its cancel and messages
/// through `run-context`); `call_run_concurrent` refuses, since such a `run` cannot share an
/// instance (`CONCURRENT_RUN`, checked at load). A version whose `run` is async writes these
/// itself.
macro_rules! blocking_run {
    () => {
        /// Whether one instance can serve several runs at once: not with a blocking `run`.
        pub(crate) const CONCURRENT_RUN: bool = false;

        /// `provider.run`'s parameters, to name a mismatch in them.
        pub(crate) type RunParams<'a> = (
            &'a str,
            &'a str,
            &'a provider_world::seam::plugin::types::StartRequest,
        );

        /// `provider.run`, blocking, on an instance of its own run.
        pub(crate) async fn call_run(
            i: &provider_world::ProviderPlugin,
            store: &mut wasmtime::Store<$crate::store::StoreData>,
            call: $crate::versions::exports::RunCall<'_>,
        ) -> $crate::versions::exports::Answer<seam_core::types::SubagentResult> {
            use $crate::versions::convert;
            use $crate::versions::delegate::Convert;
            Ok(i.seam_plugin_provider()
                .call_run(
                    store,
                    call.config,
                    call.ctx.id(),
                    &convert::request_to_wit(call.request).convert(),
                )
                .await?
                .map(|r| convert::result_from_wit(r.convert()))
                .map_err($crate::versions::exports::GuestError))
        }

        /// A blocking `run` cannot share an instance: the load refuses `share_instance`.
        pub(crate) async fn call_run_concurrent(
            _i: &provider_world::ProviderPlugin,
            _accessor: &wasmtime::component::Accessor<$crate::store::StoreData>,
            _call: $crate::versions::exports::RunCall<'_>,
        ) -> $crate::versions::exports::Answer<seam_core::types::SubagentResult> {
            Err(wasmtime::Error::msg(
                "this version's `provider.run` is blocking: it cannot share an instance",
            ))
        }
    };
}

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
     $($name:literal : ($($param:ty),*) -> $result:ty),* $(,)?) => {
        $crate::versions::exports::mismatched!(@ $store, $instance, $export, $short,
            $($name : [($($param,)*)] -> $result),*)
    };
    // Each function's parameters as one tuple type (`[(A, B,)]`, or a version's alias of one).
    (@ $store:expr, $instance:expr, $export:expr, $short:literal,
     $($name:literal : [$params:ty] -> $result:ty),* $(,)?) => {{
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
                            .get_typed_func::<$params, ($result,)>(&mut *store, &index)
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
pub(crate) use {blocking_run, mismatched, per_version, per_version_arms, versioned, wit_result};
