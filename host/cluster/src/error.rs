//! The cluster's errors: each names the server, the cluster, the worker or the provider.

use thiserror::Error;

/// Why joining, serving or running on a cluster failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// A cluster name, worker id or provider name that no subject may be built from.
    #[error(
        "{what} `{name}` may only contain ASCII letters, digits, `-` and `_` (1 to 64 of them)"
    )]
    BadName {
        /// What the name is of.
        what: &'static str,
        /// The name, escaped.
        name: String,
    },
    /// The NATS server could not be reached or refused the credentials.
    #[error("cannot connect to NATS at `{url}`: {message}")]
    Connect {
        /// The server's URL.
        url: String,
        /// Why.
        message: String,
    },
    /// A `[cluster]` key is wrong, or a credential it names cannot be read.
    #[error("[cluster] key `{key}`: {message}")]
    Config {
        /// The config key.
        key: &'static str,
        /// Why.
        message: String,
    },
    /// JetStream (the adverts' key-value bucket) failed.
    #[error("JetStream bucket `{bucket}`: {message}")]
    JetStream {
        /// The bucket.
        bucket: String,
        /// Why.
        message: String,
    },
    /// A subscription could not be made.
    #[error("cannot subscribe to `{subject}`: {message}")]
    Subscribe {
        /// The subject.
        subject: String,
        /// Why.
        message: String,
    },
    /// A message would exceed the server's `max_payload`: refused, never truncated.
    #[error("{what} is {size} bytes, over the NATS server's max_payload of {max} bytes")]
    TooLarge {
        /// What the message is.
        what: String,
        /// Its size.
        size: usize,
        /// The server's limit.
        max: usize,
    },
    /// A provider the worker was asked to serve is not in its registry.
    #[error("provider `{0}` is not loaded by this worker's config")]
    NotLoaded(String),
}
