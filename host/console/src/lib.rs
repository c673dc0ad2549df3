//! `seam ui CONFIG [--http ADDR]`: the console, a local web page where a person watches,
//! steers and approves trees of runs, over a JSON API a person can script as well.
//!
//! - [`host`]: the handle on a host it serves, and the replays it asks for;
//! - [`server`]: the HTTP side (the guards, the page, the API, the event stream);
//! - `api`: the JSON API's routes and actions (each through the host API the CLI uses);
//! - `views`: what the page shows, read from the store;
//! - `held`: the sessions this process has open, and their turns;
//! - `live`: the event stream (the bus, and other processes' writes to the store);
//! - `assets`: the page's files, compiled in.
//!
//! The page is server-data rendered by a small script: every text a plugin or a model wrote
//! (prompts, answers, tool output, diagnostics) is set as text, never as markup, and the
//! page's content security policy runs only its own script.

#![warn(missing_docs)]

mod api;
mod assets;
pub mod error;
mod held;
pub mod host;
mod live;
pub mod server;
mod views;

pub use api::BY;
pub use error::ApiError;
pub use host::{ConsoleHost, ReplayFailed, Replayer};
pub use server::{ConsoleServer, HttpOptions, ServeError, TOKEN_COOKIE};
