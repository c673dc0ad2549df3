//! `--tree` (`seam run`, `seam delegate`, `seam call`): the delegation tree a command built,
//! printed when the command ends, drawn from its [`Recorded`] events. Each
//! run is a node under the run (or the top-level agent) that started it, with its provider, how
//! long it took, and how it ended; a failed run, and every node above it, is marked. Where the
//! model endpoint reported usage, each node says the tokens (and, for models with prices, the
//! cost) its subtree used (its own agent's
//! turns and every run below), so the root's is the whole tree's. Each request for approval is
//! a line under the agent or run that asked, with how it was answered and by whom.

use std::collections::HashMap;
use std::time::Duration;

use seam_host::{Event, StopReason, Usage};

use crate::recording::Recorded;

/// One run, as the events told it.
struct Node {
    provider: String,
    /// The agent that started it (a run's child agent has the run's id).
    parent: String,
    ended: Option<(Duration, StopReason, Option<String>)>,
}

#[derive(Default)]
struct Seen {
    /// Runs in the order they started.
    order: Vec<String>,
    nodes: HashMap<String, Node>,
    /// Tokens by agent (a run's child agent has the run's id), from its turns' ends.
    usage: HashMap<String, Usage>,
    /// Cost in dollars by agent, from its turns' ends (models with prices).
    cost: HashMap<String, f64>,
    /// Requests for approval by the agent or run that asked, in the order they were made.
    approvals: HashMap<String, Vec<Approval>>,
}

/// A request for approval, as the events told it.
struct Approval {
    id: String,
    what: String,
    /// `allowed by terminal`, `denied by nobody`, ...; `None` while it waits.
    answer: Option<String>,
}

impl Seen {
    fn of(recorded: &Recorded) -> Self {
        let mut seen = Seen::default();
        let mut started = HashMap::new();
        for (at, event) in &recorded.events {
            match event {
                Event::SubagentStart {
                    provider,
                    id,
                    parent,
                } => {
                    seen.order.push(id.clone());
                    started.insert(id.clone(), *at);
                    seen.nodes.insert(
                        id.clone(),
                        Node {
                            provider: provider.clone(),
                            parent: parent.id.clone(),
                            ended: None,
                        },
                    );
                }
                Event::ApprovalRequested {
                    id, subject, path, ..
                } => {
                    let asker = path.last().cloned().unwrap_or_default();
                    let asked = seen.approvals.entry(asker).or_default();
                    // A request taken up again (after a restart) is one line.
                    if !asked.iter().any(|a| a.id == *id) {
                        asked.push(Approval {
                            id: id.clone(),
                            what: subject.describe(),
                            answer: None,
                        });
                    }
                }
                Event::ApprovalResolved {
                    id,
                    allowed,
                    always,
                    by,
                    ..
                } => {
                    let answer = format!(
                        "{} by {by}",
                        match (allowed, always) {
                            (true, true) => "allowed always",
                            (true, false) => "allowed",
                            (false, _) => "denied",
                        }
                    );
                    // One answered from what an earlier process kept has no request line.
                    if let Some(approval) =
                        seen.approvals.values_mut().flatten().find(|a| a.id == *id)
                    {
                        approval.answer = Some(answer);
                    }
                }
                Event::AgentTurnEnd {
                    id,
                    usage,
                    cost_usd,
                    ..
                } => {
                    if let Some(used) = usage {
                        *seen.usage.entry(id.clone()).or_default() += *used;
                    }
                    if let Some(cost) = cost_usd {
                        *seen.cost.entry(id.clone()).or_default() += *cost;
                    }
                }
                Event::SubagentEnd {
                    id,
                    stop_reason,
                    diagnostic,
                    ..
                } => {
                    if let (Some(node), Some(began)) = (seen.nodes.get_mut(id), started.get(id)) {
                        node.ended = Some((
                            at.saturating_sub(*began),
                            stop_reason.clone(),
                            diagnostic.clone(),
                        ));
                    }
                }
                _ => {}
            }
        }
        seen
    }
}

/// Draws the tree of `recorded` under `root` (the top-level agent's id, or the command's caller
/// id), with how `root`'s turn ended when it had one.
pub(crate) fn draw_tree(recorded: &Recorded, root: &str, outcome: Option<&StopReason>) -> String {
    let seen = Seen::of(recorded);
    let mut children: HashMap<&str, Vec<&str>> = HashMap::new();
    for id in &seen.order {
        let parent = seen.nodes[id].parent.as_str();
        // A run whose starter is not a run of this tree hangs off the root.
        let parent = if seen.nodes.contains_key(parent) {
            parent
        } else {
            root
        };
        children.entry(parent).or_default().push(id);
    }
    let how = outcome.map(|o| format!("{o}, ")).unwrap_or_default();
    let mut out = format!(
        "{} {root} ({how}{}{})\n",
        mark(outcome.is_none_or(StopReason::is_success) && !failed_below(&seen, &children, root)),
        seconds(recorded.took),
        spent(&seen, &children, root),
    );
    draw_approvals(&seen, root, "", children.contains_key(root), &mut out);
    draw(&seen, &children, root, "", &mut out);
    out
}

/// The requests for approval `id` made, each a line under it (`more`: runs follow below).
fn draw_approvals(seen: &Seen, id: &str, indent: &str, more: bool, out: &mut String) {
    let asked = seen.approvals.get(id).map(Vec::as_slice).unwrap_or(&[]);
    for (i, a) in asked.iter().enumerate() {
        let last = i + 1 == asked.len() && !more;
        out.push_str(&format!(
            "{indent}{} ? approval {}: {} ({})\n",
            if last { "└─" } else { "├─" },
            a.id,
            a.what,
            a.answer.as_deref().unwrap_or("not answered"),
        ));
    }
}

/// Whether a run at or below `id` failed.
fn failed_below(seen: &Seen, children: &HashMap<&str, Vec<&str>>, id: &str) -> bool {
    children.get(id).into_iter().flatten().any(|child| {
        let node = &seen.nodes[*child];
        let failed = match &node.ended {
            Some((_, reason, _)) => !reason.is_success(),
            None => true,
        };
        failed || failed_below(seen, children, child)
    })
}

/// The tokens and cost `id`'s agent and every run below it used, if any reported them.
fn subtree(
    seen: &Seen,
    children: &HashMap<&str, Vec<&str>>,
    id: &str,
) -> (Option<Usage>, Option<f64>) {
    let mut usage: Option<Usage> = seen.usage.get(id).copied();
    let mut cost: Option<f64> = seen.cost.get(id).copied();
    for child in children.get(id).into_iter().flatten() {
        let (u, c) = subtree(seen, children, child);
        if let Some(u) = u {
            *usage.get_or_insert_default() += u;
        }
        if let Some(c) = c {
            *cost.get_or_insert_default() += c;
        }
    }
    (usage, cost)
}

/// The tokens and cost of `id`'s subtree, as a node shows them.
fn spent(seen: &Seen, children: &HashMap<&str, Vec<&str>>, id: &str) -> String {
    let (usage, cost) = subtree(seen, children, id);
    let cost = cost.map_or(String::new(), |c| format!(", ${c:.4}"));
    format!("{}{cost}", tokens(usage))
}

/// `, N tokens (P in, C out)`, or nothing when no usage was reported.
fn tokens(usage: Option<Usage>) -> String {
    usage.map_or(String::new(), |u| {
        format!(
            ", {} tokens ({} in, {} out)",
            u.total(),
            u.prompt_tokens,
            u.completion_tokens
        )
    })
}

fn mark(ok: bool) -> &'static str {
    if ok {
        "✓"
    } else {
        "✗"
    }
}

fn seconds(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn draw(
    seen: &Seen,
    children: &HashMap<&str, Vec<&str>>,
    id: &str,
    indent: &str,
    out: &mut String,
) {
    let Some(below) = children.get(id) else {
        return;
    };
    for (i, child) in below.iter().enumerate() {
        let last = i + 1 == below.len();
        let node = &seen.nodes[*child];
        let (ok, how) = match &node.ended {
            Some((took, reason, diagnostic)) => {
                let why = diagnostic
                    .as_deref()
                    .and_then(|d| d.lines().next())
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default();
                (
                    reason.is_success() && !failed_below(seen, children, child),
                    format!(
                        "{reason}, {}{}{why}",
                        seconds(*took),
                        spent(seen, children, child)
                    ),
                )
            }
            None => (false, "did not end".to_string()),
        };
        out.push_str(&format!(
            "{indent}{} {} {child} on `{}` ({how})\n",
            if last { "└─" } else { "├─" },
            mark(ok),
            node.provider,
        ));
        let deeper = format!("{indent}{}", if last { "   " } else { "│  " });
        draw_approvals(seen, child, &deeper, children.contains_key(*child), out);
        draw(seen, children, child, &deeper, out);
    }
}
