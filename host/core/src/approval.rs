//! Approvals, as data: what may need a yes first ([`Policy`]), what is asked ([`Subject`]), the
//! record a store keeps of each request ([`ApprovalRecord`]), an answer, and the [`Surface`]
//! trait of whatever can give one (a terminal, an editor over ACP, an MCP client, the parent
//! agent). The engine that asks lives in `crate::approvals`.

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Whether a call, or a use of a grant, needs a yes first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Goes ahead (today's behaviour, the default).
    #[default]
    Allow,
    /// Waits for a surface to answer.
    Ask,
    /// Is refused, with no one asked.
    Deny,
}

impl Policy {
    /// Its name in config.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

/// A `config.approve` written wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("key `config.approve`: {0}")]
pub struct PolicyError(pub String);

/// What a plugin entry's `config.approve` says: one policy for every tool the entry mounts, or
/// a policy per pattern of the tools' names as the entry's server calls them (an MCP entry's
/// `{ "delete_*" = "ask", "*" = "allow" }`; the most specific pattern that matches wins).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntryPolicy {
    patterns: Vec<(String, Policy)>,
}

impl EntryPolicy {
    /// Reads `config.approve` (`None`: no key).
    pub fn of_entry_config(config: &serde_json::Value) -> Result<Option<Self>, PolicyError> {
        let Some(value) = config.get("approve") else {
            return Ok(None);
        };
        let parse = |v: &serde_json::Value| -> Result<Policy, PolicyError> {
            serde_json::from_value(v.clone()).map_err(|_| {
                PolicyError(format!(
                    "`{v}` is not a policy (one of \"allow\", \"ask\", \"deny\")"
                ))
            })
        };
        let patterns = match value {
            serde_json::Value::Object(map) => map
                .iter()
                .map(|(pattern, v)| Ok((pattern.clone(), parse(v)?)))
                .collect::<Result<Vec<_>, PolicyError>>()?,
            v => vec![("*".to_string(), parse(v)?)],
        };
        Ok(Some(Self { patterns }))
    }

    /// The policy for the tool its server calls `name`: that of the longest pattern matching
    /// it, or `allow`.
    pub fn for_tool(&self, name: &str) -> Policy {
        self.patterns
            .iter()
            .filter(|(p, _)| glob_matches(p, name))
            .max_by_key(|(p, _)| p.len())
            .map_or(Policy::Allow, |(_, policy)| *policy)
    }
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Who answers the requests made below a delegation, instead of the host's surfaces: a tool
/// entry's `config.approver`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Approver {
    /// The agent that made the call: its model is told of each request before its next step,
    /// and answers with the control tool (`action = "approve"`).
    Parent,
}

impl Approver {
    /// Reads `config.approver` (`None`: no key).
    pub fn of_entry_config(config: &serde_json::Value) -> Result<Option<Self>, ApproverError> {
        let Some(value) = config.get("approver") else {
            return Ok(None);
        };
        serde_json::from_value(value.clone())
            .map(Some)
            .map_err(|_| ApproverError(value.to_string()))
    }
}

/// A `config.approver` written wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("key `config.approver`: `{0}` is not an approver (the one there is: \"parent\")")]
pub struct ApproverError(pub String);

/// A class of grant whose use can need approval (`[approvals]` in config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GrantClass {
    /// Opening a file for writing, or creating one, in a granted directory.
    Write,
    /// An HTTP request to a granted origin.
    Http,
    /// Starting a process (an ACP agent, an MCP server over stdio).
    Process,
}

impl GrantClass {
    /// Its name in config and in events.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Http => "http",
            Self::Process => "process",
        }
    }
}

/// What a request asks to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Subject {
    /// A call of a tool.
    Tool {
        /// The tool's name.
        tool: String,
        /// The plugin that provides it.
        plugin: String,
        /// The call's arguments (JSON; a string when they were not valid JSON).
        arguments: serde_json::Value,
    },
    /// A use of a grant.
    Grant {
        /// Its class.
        class: GrantClass,
        /// The plugin that uses it.
        plugin: String,
        /// What it reaches: the directory, the origin, the program.
        target: String,
    },
}

impl Subject {
    /// What "allow always" remembers: the tool, or the grant class and what it reaches
    /// (not a call's arguments).
    pub fn key(&self) -> String {
        match self {
            Self::Tool { tool, .. } => format!("tool:{tool}"),
            Self::Grant {
                class,
                plugin,
                target,
            } => format!("{}:{plugin}:{target}", class.as_str()),
        }
    }

    /// One line, for a prompt or a listing.
    pub fn describe(&self) -> String {
        match self {
            Self::Tool {
                tool, arguments, ..
            } => format!("call tool `{tool}` with {arguments}"),
            Self::Grant {
                class: GrantClass::Write,
                plugin,
                target,
            } => format!("plugin `{plugin}` writes in `{target}`"),
            Self::Grant {
                class: GrantClass::Http,
                plugin,
                target,
            } => format!("plugin `{plugin}` sends HTTP requests to `{target}`"),
            Self::Grant {
                class: GrantClass::Process,
                plugin,
                target,
            } => format!("plugin `{plugin}` starts the program `{target}`"),
        }
    }

    /// The config that would let it go ahead without asking.
    pub fn how_to_allow(&self) -> String {
        match self {
            Self::Tool { plugin, .. } => {
                format!("set `approve = \"allow\"` in the `config` of plugin `{plugin}`")
            }
            Self::Grant { class, .. } => {
                format!("set `{} = \"allow\"` under `[approvals]`", class.as_str())
            }
        }
    }
}

/// Where a request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nobody answered yet.
    Pending,
    /// Allowed.
    Allowed,
    /// Denied (by a surface, by a timeout, or because nobody could be asked).
    Denied,
}

impl Status {
    /// Its name in listings and in the SQLite schema.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Allowed => "allowed",
            Self::Denied => "denied",
        }
    }

    /// Parses [`Status::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(Self::Pending),
            "allowed" => Some(Self::Allowed),
            "denied" => Some(Self::Denied),
            _ => None,
        }
    }
}

/// A request for approval, as a store keeps it: asked, answered, and whether the run that
/// asked was given the answer (one that was not, its process ended first, hands it to the
/// same request made again when its session is continued).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    /// Its id (unique in its store).
    pub id: String,
    /// The session of the agent that asked.
    pub session: String,
    /// The session of the tree's top-level agent: what "allow always" is remembered for.
    pub root: String,
    /// The agents and runs from the top of the tree down to the one that asked.
    pub path: Vec<String>,
    /// What it asks.
    pub subject: Subject,
    /// Where it stands.
    pub status: Status,
    /// Whether the answer holds for the rest of the root session (for the same tool or grant).
    #[serde(default)]
    pub always: bool,
    /// Who answered: a surface's name (`terminal`, `acp`, `mcp`, `seam approvals`, `parent`),
    /// `timeout`, or `nobody`.
    #[serde(default)]
    pub by: Option<String>,
    /// Why, when it was denied.
    #[serde(default)]
    pub reason: Option<String>,
    /// Whether the run that asked was given the answer.
    #[serde(default)]
    pub delivered: bool,
    /// When it was asked, in milliseconds since the Unix epoch.
    pub requested_ms: u64,
    /// When it was answered.
    #[serde(default)]
    pub answered_ms: Option<u64>,
}

/// An answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Whether it is allowed.
    pub allow: bool,
    /// Whether the answer holds for the rest of the root session.
    pub always: bool,
    /// Who answered.
    pub by: String,
    /// Why, for a denial.
    pub reason: Option<String>,
}

impl Answer {
    /// A yes from `by`.
    pub fn allow(by: impl Into<String>, always: bool) -> Self {
        Self {
            allow: true,
            always,
            by: by.into(),
            reason: None,
        }
    }

    /// A no from `by`.
    pub fn deny(by: impl Into<String>, reason: Option<String>) -> Self {
        Self {
            allow: false,
            always: false,
            by: by.into(),
            reason,
        }
    }
}

impl ApprovalRecord {
    /// The record once `answer` is given.
    pub fn answered(mut self, answer: &Answer, now_ms: u64) -> Self {
        self.status = if answer.allow {
            Status::Allowed
        } else {
            Status::Denied
        };
        self.always = answer.always && answer.allow;
        self.by = Some(answer.by.clone());
        self.reason = answer.reason.clone();
        self.answered_ms = Some(now_ms);
        self
    }

    /// One listing line: id, status (and who answered), the path of runs that asked, and what.
    pub fn listing(&self) -> String {
        let status = match (self.status, self.always) {
            (Status::Allowed, true) => "allowed always",
            (s, _) => s.as_str(),
        };
        let by = self
            .by
            .as_deref()
            .map(|by| format!(" by {by}"))
            .unwrap_or_default();
        format!(
            "{}  {status}{by}  {}  {}",
            self.id,
            self.path_text(),
            self.subject.describe()
        )
    }

    /// The path of runs that asked, as `lead > run-1 > run-3`.
    pub fn path_text(&self) -> String {
        self.path.join(" > ")
    }
}

/// Something a person (or an agent) answers requests on. A surface that cannot answer a request
/// (an MCP client with no elicitation) returns `None` at once; one that is answered out of band
/// (the parent agent, through its control tool) posts the request and never resolves, as the
/// answer comes through [`crate::approvals::Approvals::answer`].
pub trait Surface: Send + Sync + 'static {
    /// Its name, recorded as who answered.
    fn name(&self) -> &str;

    /// Asks; dropping the future withdraws the question (another surface answered first).
    fn ask(&self, request: &ApprovalRecord) -> BoxFuture<'static, Option<Answer>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_with_stars_and_the_longest_pattern_wins() {
        assert!(glob_matches("*", "anything"));
        assert!(glob_matches("delete_*", "delete_note"));
        assert!(!glob_matches("delete_*", "read_note"));
        assert!(glob_matches("*_note", "read_note"));
        assert!(glob_matches("a*b*c", "axxbyyc"));
        assert!(!glob_matches("a*b*c", "axxbyy"));
        assert!(glob_matches("exact", "exact"));
        assert!(!glob_matches("exact", "exactly"));
        assert!(!glob_matches("ab*ba", "aba"));
        let config = serde_json::json!({ "approve": { "*": "allow", "delete_*": "ask" } });
        let policy = EntryPolicy::of_entry_config(&config).unwrap().unwrap();
        assert_eq!(policy.for_tool("delete_note"), Policy::Ask);
        assert_eq!(policy.for_tool("read_note"), Policy::Allow);
        let one = EntryPolicy::of_entry_config(&serde_json::json!({ "approve": "deny" }))
            .unwrap()
            .unwrap();
        assert_eq!(one.for_tool("x"), Policy::Deny);
        let bad = EntryPolicy::of_entry_config(&serde_json::json!({ "approve": "maybe" }));
        assert!(bad.unwrap_err().to_string().contains("config.approve"));
    }
}
