//! What the Seam interfaces see of a store: [`PluginView`] gives them a [`PluginCtxView`], as
//! `wasmtime_wasi::WasiView` gives WASI its `WasiCtxView`, so that they are written against the
//! parts of a store they use and not one concrete store type. [`ImportError`] is what a fallible
//! import returns: a trap, or the WIT error the guest gets.

use wasmtime::component::{HasData, ResourceTable, ResourceTableError};

use super::output::LogBudget;
use super::{Serving, StoreData};

/// A store's data that the Seam interfaces can be linked for.
pub trait PluginView: Send {
    /// The interfaces' view of this store's data.
    fn plugin(&mut self) -> PluginCtxView<'_>;
}

/// The parts of a store the Seam interfaces use.
pub struct PluginCtxView<'a> {
    /// The plugin's name, for its log lines.
    pub plugin: &'a str,
    /// The call or run the store serves, if any.
    pub serving: &'a mut Serving,
    /// The budget `host.log` shares with the guest's stdout and stderr.
    pub log_budget: &'a LogBudget,
    /// The store's resources (runs, children, pollables).
    pub table: &'a mut ResourceTable,
}

/// The [`HasData`] marker the interfaces are added to a linker with: their host data is a
/// [`PluginCtxView`].
pub struct HasPlugin;

impl HasData for HasPlugin {
    type Data<'a> = PluginCtxView<'a>;
}

impl PluginView for StoreData {
    fn plugin(&mut self) -> PluginCtxView<'_> {
        PluginCtxView {
            plugin: &self.plugin,
            serving: &mut self.serving,
            log_budget: &self.log_budget,
            table: &mut self.table,
        }
    }
}

/// A fallible import's failure, the `trappable_error_type` of each WIT error type: `?` turns a
/// host error into a trap and a WIT error into the guest's `err`, and each version's
/// `convert_*_error` says which the guest gets.
#[derive(Debug)]
pub enum ImportError<E> {
    /// The guest traps with this error.
    Trap(wasmtime::Error),
    /// The guest gets this error as its call's `err`.
    Guest(E),
}

impl<E> ImportError<E> {
    /// The guest's error, or the trap as `Err`: what a version's `convert_*_error` returns.
    pub fn guest(self) -> wasmtime::Result<E> {
        match self {
            Self::Trap(e) => Err(e),
            Self::Guest(e) => Ok(e),
        }
    }
}

impl<E> From<wasmtime::Error> for ImportError<E> {
    fn from(e: wasmtime::Error) -> Self {
        Self::Trap(e)
    }
}

impl<E> From<ResourceTableError> for ImportError<E> {
    fn from(e: ResourceTableError) -> Self {
        Self::Trap(e.into())
    }
}

impl<E> From<crate::sandbox::LimitHit> for ImportError<E> {
    fn from(e: crate::sandbox::LimitHit) -> Self {
        Self::Trap(e.into())
    }
}
