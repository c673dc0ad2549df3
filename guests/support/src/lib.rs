//! Code shared by Seam's guest components, built with them for wasm32-wasip2.
//!
//! - [`config`]: strict reading of a plugin's JSON config object, for every guest.
//! - [`inprocess`]: the body of the in-process providers (`spawn`, `fork`), with
//!   [`in_process_provider!`] to export one.
//! - [`bindings`]: the `provider-plugin` world's bindings that [`inprocess`] is written against.
//!
//! A component that uses [`inprocess`] uses these bindings instead of generating its own; one
//! that only reads its config generates its own bindings as usual.

#![warn(missing_docs)]

pub mod config;
pub mod inprocess;

/// Bindings for the `provider-plugin` world (`wit/seam.wit`).
///
/// They are generated here with a public export macro, so a library can hold them: this crate
/// only describes the world's imports, which `wit-component` drops from a component that does
/// not use them, and nothing is exported until a component invokes [`bindings::export!`] (as
/// [`in_process_provider!`] does). A component exports the world either through these or through
/// bindings of its own (the providers that only use [`config`] generate their own), never both.
#[allow(missing_docs)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "provider-plugin",
        pub_export_macro: true,
        default_bindings_module: "seam_guest_support::bindings",
        generate_all,
    });
}
