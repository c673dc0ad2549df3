//! `seam approvals list | allow ID | deny ID`: answers the requests for approval kept in a
//! session store, from another process than the one that asked (which finds the answer there
//! with `[approvals] from_store = true`, or takes it up when its session is continued).

use anyhow::{bail, Context, Result};
use seam_host::approval::{Answer, ApprovalRecord, Status};

use super::EXIT_OK;

/// Who an answer given here is recorded as.
const BY: &str = "seam approvals";

/// `seam approvals`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    store: super::sessions::StoreArgs,
    #[command(subcommand)]
    command: ApprovalsCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ApprovalsCommand {
    /// List the requests waiting for an answer (with `--all`, the answered ones too), oldest
    /// first.
    List {
        /// Answered requests too.
        #[arg(long)]
        all: bool,
        /// Only the requests of this top-level session's tree.
        #[arg(long, value_name = "SESSION")]
        session: Option<String>,
    },
    /// Allow a pending request.
    Allow {
        /// The request's id (from `seam approvals list` or the `approval/requested` event).
        id: String,
        /// Allow the same tool (or grant) for the rest of the session, without asking again.
        #[arg(long)]
        always: bool,
    },
    /// Deny a pending request.
    Deny {
        /// The request's id.
        id: String,
        /// Why, for the agent that asked to read.
        #[arg(long)]
        reason: Option<String>,
    },
}

pub(crate) fn run(args: Args) -> Result<u8> {
    let open = args.store.open()?;
    let json = args.store.json;
    let store = open.store.as_ref();
    match args.command {
        ApprovalsCommand::List { all, session } => {
            let records: Vec<ApprovalRecord> = store
                .approvals(session.as_deref())
                .with_context(|| format!("cannot read the approvals in {}", open.name))?
                .into_iter()
                .filter(|r| all || r.status == Status::Pending)
                .collect();
            if json {
                outln!("{}", serde_json::to_string(&records)?);
            } else if records.is_empty() {
                outln!(
                    "no {}requests for approval in {}",
                    if all { "" } else { "pending " },
                    open.name
                );
            } else {
                for r in &records {
                    outln!("{}", line(r));
                }
            }
        }
        ApprovalsCommand::Allow { id, always } => {
            answer(&open, &id, Answer::allow(BY, always), json)?;
        }
        ApprovalsCommand::Deny { id, reason } => {
            answer(&open, &id, Answer::deny(BY, reason), json)?;
        }
    }
    Ok(EXIT_OK)
}

/// Gives `answer` to the pending request `id`.
fn answer(open: &super::sessions::OpenStore, id: &str, answer: Answer, json: bool) -> Result<()> {
    let before = open
        .store
        .approval(id)
        .with_context(|| format!("cannot read `{id}` in {}", open.name))?;
    let Some(before) = before else {
        bail!(
            "no request for approval `{id}` in {} (`seam approvals list` shows those pending)",
            open.name
        );
    };
    let answered = |r: &ApprovalRecord| {
        anyhow::anyhow!(
            "request `{id}` was already answered: {} by {}",
            r.status.as_str(),
            r.by.as_deref().unwrap_or("?")
        )
    };
    if before.status != Status::Pending {
        return Err(answered(&before));
    }
    let record = open
        .store
        .answer_approval(id, &answer)
        .with_context(|| format!("cannot answer `{id}` in {}", open.name))?
        .with_context(|| {
            format!(
                "request `{id}` went from {} while it was answered",
                open.name
            )
        })?;
    // Someone else's answer landed between the read and the write.
    if record.by.as_deref() != Some(BY) {
        return Err(answered(&record));
    }
    if json {
        outln!("{}", serde_json::to_string(&record)?);
    } else {
        outln!("{}", line(&record));
    }
    Ok(())
}

/// One request, as a listing line: its record's, with when it was asked.
fn line(r: &ApprovalRecord) -> String {
    format!(
        "{}  (asked {})",
        r.listing(),
        humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(r.requested_ms)
        )
    )
}

/// The terminal of `seam run`, as a surface: one question at a time on stderr, answered with a
/// line on stdin (`y`, `n` or `a` for always). Only added when stdin is a terminal.
#[derive(Default)]
pub(crate) struct Terminal {
    /// One question at a time: each waits for the line before the next is printed.
    turn: std::sync::Arc<tokio::sync::Mutex<()>>,
}

impl seam_host::approval::Surface for Terminal {
    fn name(&self) -> &str {
        "terminal"
    }

    fn ask(&self, request: &ApprovalRecord) -> futures::future::BoxFuture<'static, Option<Answer>> {
        let question = format!(
            "\napproval {} — {} wants to {}\nallow? [y]es, [n]o, [a]lways for this session: ",
            request.id,
            request.path_text(),
            request.subject.describe()
        );
        let turn = self.turn.clone();
        Box::pin(async move {
            let _turn = turn.lock().await;
            errln_raw(&question);
            let line = tokio::task::spawn_blocking(|| {
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).map(|n| (n, line))
            })
            .await
            .ok()?
            .ok()?;
            match line {
                // End of input: this terminal cannot answer.
                (0, _) => None,
                (_, line) => Some(match line.trim().to_ascii_lowercase().as_str() {
                    "y" | "yes" => Answer::allow("terminal", false),
                    "a" | "always" => Answer::allow("terminal", true),
                    _ => Answer::deny("terminal", Some("denied at the terminal".into())),
                }),
            }
        })
    }
}

/// Writes a question with no line end, so that the answer is typed after it.
fn errln_raw(text: &str) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.flush();
}
