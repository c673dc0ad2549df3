//! Seam beyond one machine: workers serve their config's providers over NATS, and front-ends
//! see them as providers of their own registry, with every guarantee of a local run.
//!
//! - [`Worker`] (`seam worker`): each provider on a queue-group subject shared by its
//!   replicas; its advert (frozen descriptor, capacity, contract version) in a JetStream
//!   key-value bucket, put again at every heartbeat; drained on request.
//! - [`ClusterFront`] (`[cluster]` of a config): registers what the bucket advertises, checked
//!   for capabilities exactly like local providers, and runs each start on a worker
//!   ([`remote`]), ending a run `error` with a diagnostic naming the worker whenever the worker
//!   or the path to it fails.
//!
//! - [`JetStreamStore`] (`[sessions] store = "nats"`): the session store in the cluster's
//!   JetStream, so that runs are listed, read and continued from any front-end.
//!
//! Subjects are built only from checked names ([`names`]); messages over the server's
//! `max_payload` are refused with an error, never truncated. The protocol is in [`wire`].

mod connect;
mod error;
mod front;
mod members;
pub mod names;
mod remote;
mod store;
pub mod wire;
mod worker;

pub use connect::{ClusterConfig, DEFAULT_CLUSTER, DEFAULT_HEARTBEAT_MS, DEFAULT_START_TIMEOUT_MS};
pub use error::ClusterError;
pub use front::ClusterFront;
pub use members::plugin_name;
pub use store::JetStreamStore;
pub use worker::{Served, Worker, WorkerOptions, DEFAULT_KEEP_FINISHED};
