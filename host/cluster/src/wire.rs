//! What front-ends and workers say to each other: JSON bodies, one type per subject.
//!
//! Every type carries only `seam-core` vocabulary and names; nothing a front-end sends can make a
//! worker load code or reach past the providers its own config loaded.

use serde::{Deserialize, Deserializer, Serialize};

use seam_core::subagent::SubagentError;
use seam_core::types::{ContentBlock, ProviderDescriptor, RequestSnapshot, SubagentResult};

/// The cluster protocol's version, in every advert: a front-end uses only workers that speak it.
///
/// Within a version, additions are optional fields and a control message a peer asks for: an
/// older peer leaves them out or ignores them, and a newer one then does what the older
/// protocol did (leases, [`Control::Lease`], typed refusals, [`StartReply::Refused`]'s
/// `error`, and answers that carry readiness and a settled run, [`Start::early`], came this
/// way).
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
    /// The run's lease, in milliseconds: the worker cancels the run (and lets go of it, once
    /// finished) when it has had no word from the front-end ([`Control::Lease`] or any other
    /// control message) for that long. Absent from a front-end that sends no leases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
    /// The front-end takes the run's readiness, and its end when it has settled, in the
    /// start's answer ([`StartReply::Accepted`]'s `ready` and `settled`): a worker then waits
    /// briefly for readiness before it answers, so that a run that settles at once costs one
    /// request and its answer instead of three messages more. Absent from an older front-end,
    /// which is told both on the run's `out` subject.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub early: bool,
}

/// A worker's answer to a [`Start`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "answer")]
pub enum StartReply {
    /// Started; its messages follow on the run's `out` subject.
    Accepted {
        /// The worker's id.
        worker: String,
        /// Whether the worker keeps the run to the start's lease ([`Control::Lease`]): the
        /// front-end then renews it, and sends an older worker (which says nothing) none, that
        /// it would log as garbage.
        #[serde(default)]
        leases: bool,
        /// The child exists already (only to a start that asked, [`Start::early`]): the run's
        /// messages on `out` then begin after its `ready`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        ready: bool,
        /// The run settled already, and this is its end ([`OutBody::Result`] or
        /// [`OutBody::Failed`]; only after `ready`): nothing more comes on `out`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        settled: Option<Box<OutBody>>,
    },
    /// At capacity or draining: another replica may take it.
    Busy {
        /// The worker's id.
        worker: String,
        /// Why, in words.
        reason: String,
    },
    /// Refused for good (the request, the provider, the resume token). Made by
    /// [`StartReply::refused`], from the worker's registry's own error.
    Refused {
        /// The worker's id.
        worker: String,
        /// The error's code ([`SubagentError::code`]), for front-ends that predate `error`.
        code: String,
        /// The error, in words.
        message: String,
        /// The error itself, typed: a front-end rejects the start with it, so that the code is
        /// a local start's. Absent from an older worker, and read as absent when it is of a
        /// code this side does not know.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "known_error"
        )]
        error: Option<SubagentError>,
    },
}

impl StartReply {
    /// A refusal with `error`, the code and words taken from it.
    pub fn refused(worker: String, error: SubagentError) -> Self {
        Self::Refused {
            worker,
            code: error.code().to_string(),
            message: error.to_string(),
            error: Some(error),
        }
    }
}

/// An error of a code this side knows, else none (a newer peer's code falls back on the
/// words).
fn known_error<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SubagentError>, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    Ok(serde_json::from_value(value).ok())
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
        /// What the run's tree spent on the worker: the front-end charges it to the run's
        /// account. Absent from an older worker.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        spent: Option<seam_core::spend::Spent>,
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
    /// The front-end still holds the run (its result, or a handle to resume it): sent every
    /// front-end heartbeat, to a worker whose advert says `leases`.
    Lease,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_error() -> Vec<SubagentError> {
        use SubagentError as E;
        let s = || "x".to_string();
        vec![
            E::DuplicateProvider(s()),
            E::NoProvider(s()),
            E::UnsupportedCapability {
                provider: s(),
                capability: s(),
            },
            E::UnsupportedFeature {
                provider: s(),
                feature: s(),
            },
            E::InvalidState(s()),
            E::InvalidRequest(s()),
            E::InvalidDescriptor {
                plugin: s(),
                reason: s(),
            },
            E::DepthExceeded {
                attempted: 2,
                max: 1,
            },
            E::Aborted(None),
            E::Aborted(Some(s())),
            E::StartFailed(s()),
            E::Disposed,
            E::Internal(s()),
            E::NoRun(s()),
        ]
    }

    #[test]
    fn a_refusal_carries_the_registry_error_typed_its_code_spelled_as_core_spells_it() {
        for error in every_error() {
            let reply = StartReply::refused("w1".into(), error.clone());
            let json: serde_json::Value = serde_json::to_value(&reply).expect("a reply serializes");
            assert_eq!(json["code"], error.code(), "{json}");
            assert_eq!(json["error"]["code"], error.code(), "{json}");
            assert_eq!(json["message"], error.to_string(), "{json}");
            let back: StartReply = serde_json::from_value(json).expect("and back");
            assert_eq!(back, reply);
        }
    }

    #[test]
    fn a_refusal_from_an_older_or_newer_worker_is_still_read() {
        // An older worker: a code and words, no typed error.
        let old = r#"{"answer":"refused","worker":"w1","code":"NO_PROVIDER","message":"gone"}"#;
        let StartReply::Refused { code, error, .. } =
            serde_json::from_str(old).expect("an older refusal")
        else {
            panic!("a refusal");
        };
        assert_eq!((code.as_str(), error), ("NO_PROVIDER", None));
        // A newer worker: a code this side does not know is read as no typed error.
        let new = r#"{"answer":"refused","worker":"w1","code":"LATER","message":"m",
            "error":{"code":"LATER","detail":1}}"#;
        let StartReply::Refused { error, .. } = serde_json::from_str(new).expect("a newer refusal")
        else {
            panic!("a refusal");
        };
        assert_eq!(error, None);
    }

    #[test]
    fn a_start_without_a_lease_is_an_older_front_ends() {
        let request = RequestSnapshot::of(&seam_core::types::StartRequest::new(
            "q",
            seam_core::types::ParentRef::top_level("cli", "/"),
        ));
        let start = Start {
            token: "t".into(),
            provider: "p".into(),
            request,
            resume: None,
            lease_ms: None,
            early: false,
        };
        let json = serde_json::to_value(&start).expect("a start serializes");
        assert!(json.get("lease-ms").is_none(), "{json}");
        assert!(json.get("early").is_none(), "{json}");
        let back: Start = serde_json::from_value(json).expect("and back");
        assert_eq!(back.lease_ms, None);
        assert_eq!(
            serde_json::to_string(&Control::Lease).expect("json"),
            r#"{"kind":"lease"}"#
        );
    }
}
