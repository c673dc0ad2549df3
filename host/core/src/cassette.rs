//! Recordings, as data: one entry per input a run's outcome depended on ([`Entry`]), keyed by
//! where in the tree it was taken ([`Entry::key`]: `root`, then a child's key is its parent's,
//! the tool call that started it, and the run's place among that call's runs), and the
//! self-contained file `seam run --record` writes ([`Cassette`]). The live recorder and player
//! is `crate::tape`.

use serde::{Deserialize, Serialize};

/// The tape key of the top-level agent.
pub const ROOT_KEY: &str = "root";

/// What an entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A model call: what was sent (in digest) and the reply.
    Model,
    /// A result of a tool served outside Wasm (an MCP server's).
    Tool,
    /// The outcome of a run served outside Wasm (an ACP agent's).
    Run,
    /// A component's `wasi:http` response.
    Http,
    /// A run's clock and random seed, as its components saw them.
    Seed,
    /// The order in which an agent's background runs were seen to finish.
    Finish,
    /// What the recording ran with: the config file, the model, the working directory.
    Meta,
    /// The answer to a request for approval.
    Approval,
    /// A top-level turn began or ended: where a recording cut short (`kill -9`) stops.
    Turn,
    /// The id a run was given (models see it), which a replay gives it again.
    RunId,
    /// The session id a run's child agent was given (models see it as the child's durable id).
    Session,
}

impl Kind {
    /// Its name in stores and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Model => "model",
            Self::Tool => "tool",
            Self::Run => "run",
            Self::Http => "http",
            Self::Seed => "seed",
            Self::Finish => "finish",
            Self::Meta => "meta",
            Self::Approval => "approval",
            Self::Turn => "turn",
            Self::RunId => "run-id",
            Self::Session => "session",
        }
    }

    /// Parses [`Kind::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "model" => Self::Model,
            "tool" => Self::Tool,
            "run" => Self::Run,
            "http" => Self::Http,
            "seed" => Self::Seed,
            "finish" => Self::Finish,
            "meta" => Self::Meta,
            "approval" => Self::Approval,
            "turn" => Self::Turn,
            "run-id" => Self::RunId,
            "session" => Self::Session,
            _ => return None,
        })
    }
}

/// One recorded input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Where in the tree: [`ROOT_KEY`] or a child's key (`root/call-0-1.1`).
    pub key: String,
    /// What it records.
    pub kind: Kind,
    /// Its place among the entries of its key and kind, from 1.
    pub seq: u64,
    /// What was recorded (JSON).
    pub body: serde_json::Value,
}

/// The version of the cassette format this build writes and reads.
pub const CASSETTE_VERSION: u32 = 1;

/// A self-contained recording (`seam run --record FILE`): the config it ran with, the prompts
/// of its turns, and every entry, so that `seam replay FILE` needs nothing else but the
/// components the config names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cassette {
    /// [`CASSETTE_VERSION`].
    pub version: u32,
    /// The config file's text.
    pub config: String,
    /// The folder the config's relative paths were resolved against when it was recorded.
    pub config_dir: String,
    /// The top-level agent's model string, when the command overrode the config's.
    #[serde(default)]
    pub model: Option<String>,
    /// The working directory of the top-level agent.
    pub working_directory: String,
    /// The prompt of each turn, in order.
    pub prompts: Vec<String>,
    /// The recorded entries, in the order they were taken.
    pub entries: Vec<Entry>,
    /// What was not recorded, and why (an entry cut by a size bound, a plugin whose entry turns
    /// recording off): a replay names these rather than skipping them silently.
    #[serde(default)]
    pub gaps: Vec<String>,
}
