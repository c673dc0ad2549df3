//! What front-ends and workers say to each other: JSON bodies, one type per subject.
//!
//! Every type carries only `seam-core` vocabulary and names; nothing a front-end sends can make a
//! worker load code or reach past the providers its own config loaded.

use serde::{Deserialize, Serialize};

use seam_core::types::{ContentBlock, ProviderDescriptor, RequestSnapshot, SubagentResult};

/// The cluster protocol's version, in every advert: a front-end uses only workers that speak it.
pub const PROTOCOL: u32 = 1;

/// A worker's advert of one provider, the value of its key-value entry, put again at every
/// heartbeat (the put is the heartbeat).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Advert {
    /// The worker's id.
    pub worker: String,
    /// The provider's frozen descriptor, as the worker's registry holds it.
    pub descriptor: ProviderDescriptor,
    /// The Seam contract version the worker implements (`seam:plugin@...`).
    pub contract: String,
    /// [`PROTOCOL`].
    pub protocol: u32,
    /// Most runs of the provider the worker takes at once (its entry's `max_concurrent_runs`).
    pub capacity: u32,
    /// Whether a start beyond every replica's capacity waits (`on_concurrency = "wait"`) rather
    /// than being refused.
    pub waits: bool,
    /// How often the worker puts its adverts, in milliseconds: three of these without a put
    /// and a front-end counts it gone.
    pub heartbeat_ms: u64,
    /// Whether the worker is draining (taking no new runs).
    #[serde(default)]
    pub draining: bool,
}

/// A start, sent as a request to a provider's queue-group subject (or, for a resume, to the
/// worker that ran the run being resumed).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Start {
    /// The run's token: its subjects are `run.TOKEN.out` and `run.TOKEN.ctl`.
    pub token: String,
    /// The provider.
    pub provider: String,
    /// The request, without its signal.
    pub request: RequestSnapshot,
    /// To continue instead: the token of the finished run (on this worker) whose child goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<String>,
}

/// A worker's answer to a [`Start`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "answer")]
pub enum StartReply {
    /// Started; its messages follow on the run's `out` subject.
    Accepted {
        /// The worker's id.
        worker: String,
    },
    /// At capacity or draining: another replica may take it.
    Busy {
        /// The worker's id.
        worker: String,
        /// Why, in words.
        reason: String,
    },
    /// Refused for good (the request, the provider, the resume token).
    Refused {
        /// The worker's id.
        worker: String,
        /// The contract's error code (`INVALID_REQUEST`, `NO_PROVIDER`, ...).
        code: String,
        /// The error, in words.
        message: String,
    },
}

/// One message of a run from its worker, numbered from 1 so that a front-end sees a gap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Out {
    /// Its place in the run's stream.
    pub seq: u64,
    /// What it says.
    pub body: OutBody,
}

/// What a run's worker tells its front-end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum OutBody {
    /// The child exists.
    Ready,
    /// A progress update.
    Progress {
        /// What the run reported.
        content: Vec<ContentBlock>,
    },
    /// The run settled.
    Result {
        /// Its result.
        result: SubagentResult,
        /// Whether the worker keeps the child for a resume.
        resumable: bool,
    },
    /// The run failed before or after readiness (an infrastructure fault on the worker).
    Failed {
        /// Why, in words.
        message: String,
    },
}

/// What a front-end tells a run's worker, on the run's `ctl` subject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Control {
    /// Cancel the run.
    Cancel {
        /// Why.
        reason: Option<String>,
    },
    /// A steering message for the child.
    Steer {
        /// The message.
        content: Vec<ContentBlock>,
    },
    /// The front-end is done with the run: dispose of it.
    Dispose,
}
