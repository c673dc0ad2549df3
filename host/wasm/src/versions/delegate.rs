//! How an older version's host imports delegate to the latest's: [`Convert`] carries a value
//! between a version's types and the latest's (through `Vec`, `Option` and `Result`), and
//! [`delegate!`] declares each import by its signature alone, converting every argument in and
//! the answer out. [`fields!`] and [`cases!`] declare [`Convert`] for records and variants whose
//! shape is the same in both versions.

use wasmtime::component::Resource;

use super::latest::provider_world::seam::plugin::types as latest;
use crate::store::view::ImportError;

/// A value of one version's type as another's: an older version's argument as the latest's, or
/// the latest's answer as an older version's.
pub trait Convert<T> {
    /// `self` as a `T`.
    fn convert(self) -> T;
}

impl<A: Convert<B>, B> Convert<Vec<B>> for Vec<A> {
    fn convert(self) -> Vec<B> {
        self.into_iter().map(Convert::convert).collect()
    }
}

impl<A: Convert<B>, B> Convert<Option<B>> for Option<A> {
    fn convert(self) -> Option<B> {
        self.map(Convert::convert)
    }
}

impl<A: Convert<B>, B, E: Convert<F>, F> Convert<Result<B, F>> for Result<A, E> {
    fn convert(self) -> Result<B, F> {
        self.map(Convert::convert).map_err(Convert::convert)
    }
}

/// What every version shares: passed on as it is.
macro_rules! same {
    ($($t:ty),*) => {
        $(impl Convert<$t> for $t {
            fn convert(self) -> $t {
                self
            }
        })*
    };
}
same!(String, bool, u32, i32, u64, f64, (), wasmtime::Error);

impl<T: 'static> Convert<Resource<T>> for Resource<T> {
    fn convert(self) -> Self {
        self
    }
}

// The failures are the latest version's in every version; each version's `convert_*_error`
// converts them.
impl<E> Convert<ImportError<E>> for ImportError<E> {
    fn convert(self) -> Self {
        self
    }
}

/// Declares [`Convert`] from record `$from` to record `$to`, field by field; `both A, B {..}`
/// declares it both ways. Fields the older version lacks follow in `new { field: value, .. }`:
/// an older record, as the latest's, has them so.
macro_rules! fields {
    () => {};
    (both $a:path, $b:path { $($field:ident),* $(,)? } new { $($extra:ident: $value:expr),* $(,)? }
     $($rest:tt)*) => {
        $crate::versions::delegate::fields! { $a => $b { $($field),* } new { $($extra: $value),* } }
        $crate::versions::delegate::fields! { $b => $a { $($field),* } $($rest)* }
    };
    ($from:ty => $to:path { $($field:ident),* $(,)? } new { $($extra:ident: $value:expr),* $(,)? }
     $($rest:tt)*) => {
        impl $crate::versions::delegate::Convert<$to> for $from {
            fn convert(self) -> $to {
                $to {
                    $($field: $crate::versions::delegate::Convert::convert(self.$field),)*
                    $($extra: $value,)*
                }
            }
        }
        $crate::versions::delegate::fields! { $($rest)* }
    };
    (both $a:path, $b:path { $($field:ident),* $(,)? } $($rest:tt)*) => {
        $crate::versions::delegate::fields! { $a => $b { $($field),* } }
        $crate::versions::delegate::fields! { $b => $a { $($field),* } $($rest)* }
    };
    ($from:ty => $to:path { $($field:ident),* $(,)? } $($rest:tt)*) => {
        impl $crate::versions::delegate::Convert<$to> for $from {
            fn convert(self) -> $to {
                $to { $($field: $crate::versions::delegate::Convert::convert(self.$field)),* }
            }
        }
        $crate::versions::delegate::fields! { $($rest)* }
    };
}

/// Declares [`Convert`] from variant or enum `$from` to `$to`, case by case (a case's payload,
/// if any, is converted too); `both A, B {..}` declares it both ways. A case the older version
/// lacks is mapped in an `else { PATTERN => EXPR, .. }` after the list (the latest's answer as
/// what the older version can carry).
macro_rules! cases {
    () => {};
    (both $a:ty, $b:ty { $($case:ident $(($x:ident))?),* $(,)? } $($rest:tt)*) => {
        $crate::versions::delegate::cases! { $a => $b { $($case $(($x))?),* } }
        $crate::versions::delegate::cases! { $b => $a { $($case $(($x))?),* } $($rest)* }
    };
    ($from:ty => $to:ty { $($case:ident $(($x:ident))?),* $(,)? }
     else { $($p:pat $(if $g:expr)? => $e:expr),* $(,)? } $($rest:tt)*) => {
        impl $crate::versions::delegate::Convert<$to> for $from {
            fn convert(self) -> $to {
                type To = $to;
                match self {
                    $(Self::$case $(($x))? => To::$case $(($crate::versions::delegate::Convert::convert($x)))?,)*
                    $($p $(if $g)? => $e,)*
                }
            }
        }
        $crate::versions::delegate::cases! { $($rest)* }
    };
    ($from:ty => $to:ty { $($case:ident $(($x:ident))?),* $(,)? } $($rest:tt)*) => {
        $crate::versions::delegate::cases! { $from => $to { $($case $(($x))?),* } else {} $($rest)* }
    };
}

/// Implements an older version's host traits on `PluginCtxView` by delegating to the latest's:
/// `impl old::Host => new::Host { fn f(a: A) -> R; }` converts each argument to the latest's
/// type, calls the latest's `f`, and converts its answer to `R`. An `errors { .. }` block lists
/// the trait's `convert_*_error` methods and the version's WIT error each returns.
macro_rules! delegate {
    ($(impl $old:path => $new:path {
        $(errors { $($conv:ident($from:ty) -> $err:ty),* $(,)? })?
        $(fn $f:ident($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty;)*
    })*) => {
        $(impl $old for $crate::store::view::PluginCtxView<'_> {
            $($(fn $conv(&mut self, err: $from) -> wasmtime::Result<$err> {
                Ok($crate::versions::delegate::Convert::convert(err.guest()?))
            })*)?
            $(async fn $f(&mut self, $($arg: $ty),*) -> $ret {
                $crate::versions::delegate::Convert::convert(
                    <Self as $new>::$f(self, $($crate::versions::delegate::Convert::convert($arg)),*).await,
                )
            })*
        })*
    };
}

/// Declares a frozen version's `add_to_linker`: its `types` (`wit`) and `host` for every kind,
/// then the interfaces each kind's world imports, each linked over the [`PluginView`]. A frozen
/// version never gains a kind: the linkers ask it only for the kinds its row in
/// `for_each_version!` lists, so a kind added later needs no arm.
///
/// [`PluginView`]: crate::store::view::PluginView
macro_rules! linker {
    ($version:literal, provider [$($p:ident),*], tool [$($t:ident),*]) => {
        #[doc = concat!("Adds the ", $version, " interfaces `kind`'s world imports to a linker ")]
        #[doc = "(WASI is added by the caller)."]
        pub fn add_to_linker<T: $crate::store::view::PluginView + 'static>(
            linker: &mut wasmtime::component::Linker<T>,
            kind: seam_core::PluginKind,
        ) -> wasmtime::Result<()> {
            use $crate::store::view::HasPlugin;
            use seam_core::PluginKind;
            wit::add_to_linker::<_, HasPlugin>(linker, T::plugin)?;
            host::add_to_linker::<_, HasPlugin>(linker, T::plugin)?;
            match kind {
                PluginKind::Provider => {
                    $($p::add_to_linker::<_, HasPlugin>(linker, T::plugin)?;)*
                    Ok(())
                }
                PluginKind::Tool => {
                    $($t::add_to_linker::<_, HasPlugin>(linker, T::plugin)?;)*
                    Ok(())
                }
                PluginKind::Observer => Ok(()),
                #[allow(unreachable_patterns)]
                other => Err(wasmtime::Error::msg(format!(
                    "this version has no `{other}` world"
                ))),
            }
        }
    };
}

pub(crate) use {cases, delegate, fields, linker};

// The exports convert every version's types through the latest's: the latest's own pass as
// they are.
same!(
    latest::ContentBlock,
    latest::ParentRef,
    latest::ProviderDescriptor,
    latest::StartRequest,
    latest::SubagentResult
);
