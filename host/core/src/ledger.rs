//! Budgets over the delegation tree: the accounts that hold what a call may spend before it is
//! made, and charge what it spent to every ancestor (the values are in [`crate::spend`]).
//!
//! Every agent and every run has an [`Account`]. A child's account hangs under its parent's:
//! what the child spends, every ancestor has spent, and a charge is allowed only when the
//! child's own cap and every ancestor's remainder cover it. So a child's budget is at most its
//! entry's cap and at most what its parent has left, and parallel children draw from one pool.
//!
//! Spending goes in two steps. [`Account::hold`] reserves what a call may cost before it is
//! made (a model call's output tokens, a tool call, a run) along the whole chain, and refuses
//! with [`Exhausted`] if any account cannot cover it; [`Hold::settle`] replaces the reservation
//! with what the call really spent. So a model call's output can never pass a budget (its
//! `max_tokens` is clamped to what is held), and the overshoot of a tree is bounded by the
//! input tokens (and their cost) of the model calls in flight at once: input is only known once
//! the endpoint answers.
//!
//! Spend is durable: a settle returns the store writes that add it to every ancestor that keeps
//! a session ([`crate::store::Write::Spend`]), and an account opened for a continued session
//! starts from what its session already spent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::spend::{Budget, Dimension, Exhausted, Remaining, Spent};
use crate::store::Write;
use crate::sync::lock;

struct State {
    /// What was spent here and below (for a continued session, since its first process).
    spent: Spent,
    /// What calls in flight here and below hold.
    held: Spent,
    /// The session that keeps this account's spend, once known.
    session: Option<String>,
    /// When its wall time runs out: its own cap (less what its session ran before) from when it
    /// opened, or its parent's, whichever is first.
    deadline: Option<Instant>,
}

/// One agent's or run's account: its own cap, what it and its descendants spent, and its
/// parent's account.
pub struct Account {
    id: String,
    parent: Option<Arc<Account>>,
    limits: Budget,
    opened: Instant,
    state: Mutex<State>,
    /// Woken whenever any account of the tree settles or gives back a hold: a model call
    /// waiting for room waits on it.
    settled: Arc<tokio::sync::Notify>,
    /// What its holder's subtree may reach, if its delegation narrowed it.
    scope: std::sync::OnceLock<crate::scope::Scope>,
    /// Who answers its subtree's requests for approval, if its delegation named one.
    approver: std::sync::OnceLock<Arc<dyn crate::approval::Surface>>,
    /// The tape its tree is recorded on (or played from), and its key on it.
    tape: std::sync::OnceLock<(Arc<crate::tape::Tape>, String)>,
    /// How many runs were started under each of its tool calls: their keys' last part.
    started_under: Mutex<std::collections::HashMap<String, u32>>,
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Account")
            .field("id", &self.id)
            .field("limits", &self.limits)
            .field("spent", &self.spent())
            .finish()
    }
}

impl Account {
    /// A top-level account (an agent with no parent, or a run started by no agent with an
    /// account). `already` is what its session spent before (a continued session).
    pub fn root(id: impl Into<String>, limits: Budget, already: Spent) -> Arc<Self> {
        Self::open(id.into(), None, limits, already)
    }

    /// A child's account under this one, capped by `cap`. `already` is what the child's session
    /// spent before (a continued child): it counts against the child's own cap, and is not
    /// charged to the ancestors again (their sessions have it already).
    pub fn child(
        self: &Arc<Self>,
        id: impl Into<String>,
        cap: Budget,
        already: Spent,
    ) -> Arc<Self> {
        Self::open(id.into(), Some(self.clone()), cap, already)
    }

    fn open(id: String, parent: Option<Arc<Self>>, limits: Budget, already: Spent) -> Arc<Self> {
        let opened = Instant::now();
        let deadline = Self::deadline_of(opened, &limits, &already, parent.as_deref());
        let settled = parent
            .as_ref()
            .map(|p| p.settled.clone())
            .unwrap_or_default();
        Arc::new(Self {
            scope: std::sync::OnceLock::new(),
            approver: std::sync::OnceLock::new(),
            tape: std::sync::OnceLock::new(),
            started_under: Mutex::default(),
            settled,
            id,
            parent,
            limits,
            opened,
            state: Mutex::new(State {
                spent: already,
                held: Spent::default(),
                session: None,
                deadline,
            }),
        })
    }

    fn deadline_of(
        opened: Instant,
        limits: &Budget,
        already: &Spent,
        parent: Option<&Account>,
    ) -> Option<Instant> {
        let own = limits
            .wall_ms
            .map(|ms| opened + Duration::from_millis(ms.saturating_sub(already.wall_ms)));
        let inherited = parent.and_then(Account::deadline);
        match (own, inherited) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Adds what this account's session spent in earlier processes (a continued child whose
    /// account opened before its session was known): it counts against its own cap only, as
    /// its ancestors' sessions have it already.
    pub fn preload(&self, already: Spent) {
        let mut state = lock(&self.state);
        state.spent += already;
        let spent = state.spent;
        state.deadline =
            Self::deadline_of(self.opened, &self.limits, &spent, self.parent.as_deref());
    }

    /// Narrows what this account's subtree may reach (once, as its run starts).
    pub fn set_scope(&self, scope: crate::scope::Scope) {
        let _ = self.scope.set(scope);
    }

    /// The scopes over this account's holder, nearest first, each with who set it: a call in
    /// its subtree may reach what its entry grants and every one of them allows.
    pub fn scopes(&self) -> crate::scope::ScopeChain {
        self.chain()
            .filter_map(|a| a.scope.get().map(|s| (a.id.clone(), s.clone())))
            .collect()
    }

    /// Puts its holder on `tape` under `key` (once: a top-level agent's as it is made, a run's
    /// as it starts).
    pub fn set_tape(&self, tape: Arc<crate::tape::Tape>, key: String) {
        let _ = self.tape.set((tape, key));
    }

    /// The tape its tree is recorded on (or played from), and its holder's key on it.
    pub fn tape(&self) -> Option<(Arc<crate::tape::Tape>, String)> {
        self.tape.get().cloned()
    }

    /// The tape and key of the next run its holder starts under the tool call `call` (`-`
    /// when made outside a tool call): its own key, the call, and the run's place among that
    /// call's runs, so that a replay finds the same key whatever order runs start in.
    pub fn child_tape(&self, call: Option<&str>) -> Option<(Arc<crate::tape::Tape>, String)> {
        let (tape, key) = self.tape.get()?;
        let call = call.unwrap_or("-");
        // A continuation's top-level runs take keys of their own: a cut turn's may reuse its
        // call ids.
        let call = match tape.generation() {
            g if g > 1 && key == crate::cassette::ROOT_KEY => format!("g{g}.{call}"),
            _ => call.to_string(),
        };
        let mut started = lock(&self.started_under);
        let n = started.entry(call.to_string()).or_insert(0);
        *n += 1;
        Some((tape.clone(), format!("{key}/{call}.{n}")))
    }

    /// Names who answers its subtree's requests for approval (once, as its run starts).
    pub fn set_approver(&self, approver: Arc<dyn crate::approval::Surface>) {
        let _ = self.approver.set(approver);
    }

    /// Who answers a request made in its subtree: the approver the nearest delegation named.
    pub fn approver(&self) -> Option<Arc<dyn crate::approval::Surface>> {
        self.chain().find_map(|a| a.approver.get().cloned())
    }

    /// The agents and runs from the top of its tree down to it.
    pub fn path(&self) -> Vec<String> {
        let mut path: Vec<String> = self.chain().map(|a| a.id.clone()).collect();
        path.reverse();
        path
    }

    /// The session that keeps the top of its tree's spend, once known.
    pub fn root_session(&self) -> Option<String> {
        self.chain()
            .last()
            .and_then(|a| lock(&a.state).session.clone())
    }

    /// The agent or run it belongs to.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its own cap.
    pub fn limits(&self) -> Budget {
        self.limits
    }

    /// What it and its descendants spent.
    pub fn spent(&self) -> Spent {
        lock(&self.state).spent
    }

    /// When its wall time runs out, if it has a bound (its own or an ancestor's).
    pub fn deadline(&self) -> Option<Instant> {
        lock(&self.state).deadline
    }

    /// Resolves when its wall time runs out (never, without a bound).
    pub async fn expired(&self) {
        match self.deadline() {
            Some(at) => tokio::time::sleep_until(at.into()).await,
            None => std::future::pending().await,
        }
    }

    /// Names the session that keeps this account's spend: from now on its settles write it.
    pub fn keep_in(&self, session: &str) {
        lock(&self.state).session = Some(session.to_string());
    }

    /// Whether this account or an ancestor bounds anything: without a bound, a charge never
    /// fails and what is left is never asked.
    pub fn is_bounded(&self) -> bool {
        self.chain().any(|a| !a.limits.is_unbounded())
    }

    fn chain(&self) -> impl Iterator<Item = &Account> {
        std::iter::successors(Some(self), |a| a.parent.as_deref())
    }

    /// Locks the chain, leaf first: every locker goes from a descendant to its ancestors, so two
    /// never wait on each other.
    fn lock_chain(&self) -> Vec<(&Account, MutexGuard<'_, State>)> {
        self.chain().map(|a| (a, lock(&a.state))).collect()
    }

    /// What is left, and which account's remainder is tightest in each dimension.
    fn remaining_in(chain: &[(&Account, MutexGuard<'_, State>)]) -> Remaining {
        let mut left = Remaining::default();
        let now = Instant::now();
        for (account, state) in chain {
            for dimension in Dimension::ALL {
                if dimension == Dimension::WallTime {
                    continue;
                }
                if let Some(limit) = account.limits.limit(dimension) {
                    let used = state.spent.get(dimension) + state.held.get(dimension);
                    left.narrow(dimension, limit.saturating_sub(used));
                }
            }
            if let Some(at) = state.deadline {
                left.narrow(
                    Dimension::WallTime,
                    at.saturating_duration_since(now).as_millis() as u64,
                );
            }
        }
        left
    }

    /// What is left (the tightest of its own cap and every ancestor's remainder).
    pub fn remaining(&self) -> Remaining {
        Self::remaining_in(&self.lock_chain())
    }

    /// Holds what `ask` computes from what is left, along the whole chain, or refuses naming
    /// the account that cannot cover it. A call asks before it is made.
    pub fn hold_with(
        self: &Arc<Self>,
        ask: impl FnOnce(&Remaining) -> Result<Spent, Dimension>,
    ) -> Result<Hold, Exhausted> {
        let mut chain = self.lock_chain();
        let left = Self::remaining_in(&chain);
        let refused = |chain: &[(&Account, MutexGuard<'_, State>)], dimension| {
            Self::exhausted_in(chain, dimension)
        };
        let amount = match ask(&left) {
            Ok(amount) => amount,
            Err(dimension) => return Err(refused(&chain, dimension)),
        };
        if let Some(at) = chain.first().and_then(|(_, s)| s.deadline) {
            if Instant::now() >= at {
                return Err(refused(&chain, Dimension::WallTime));
            }
        }
        for dimension in Dimension::ALL {
            let asked = amount.get(dimension);
            if asked > 0 && left.get(dimension).is_some_and(|l| asked > l) {
                return Err(refused(&chain, dimension));
            }
        }
        for (_, state) in chain.iter_mut() {
            state.held += amount;
        }
        drop(chain);
        Ok(Hold {
            account: self.clone(),
            held: amount,
            settled: false,
        })
    }

    /// Holds what `ask` computes, as [`Account::hold_with`] does, but when what ran out is
    /// held by model calls in flight (output tokens, cost, model calls: what they give back as
    /// they settle, on their own), waits for them to settle and asks again. So parallel
    /// children near the end of a budget take turns instead of being refused while tokens are
    /// only reserved. Refused at once when nothing in flight could give room back. Only model
    /// calls may wait: a tool call or a run may be what a call in flight waits on.
    pub async fn hold_model_call(
        self: &Arc<Self>,
        mut ask: impl FnMut(&Remaining) -> Result<Spent, Dimension>,
    ) -> Result<Hold, Exhausted> {
        loop {
            let settled = self.settled.clone();
            let notified = settled.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.hold_with(&mut ask) {
                Ok(hold) => return Ok(hold),
                Err(refused)
                    if refused.held > 0
                        && matches!(
                            refused.dimension,
                            Dimension::OutputTokens | Dimension::Cost | Dimension::ModelCalls
                        ) =>
                {
                    notified.await
                }
                Err(refused) => return Err(refused),
            }
        }
    }

    /// Holds `amount` (see [`Account::hold_with`]).
    pub fn hold(self: &Arc<Self>, amount: Spent) -> Result<Hold, Exhausted> {
        self.hold_with(|_| Ok(amount))
    }

    /// The refusal for `dimension`: the account (leaf first) whose remainder is exhausted.
    fn exhausted_in(
        chain: &[(&Account, MutexGuard<'_, State>)],
        dimension: Dimension,
    ) -> Exhausted {
        let now = Instant::now();
        let mut tightest: Option<(u64, Exhausted)> = None;
        for (account, state) in chain {
            let (limit, spent, held, left) = if dimension == Dimension::WallTime {
                let Some(at) = state.deadline else { continue };
                let Some(limit) = account.limits.wall_ms else {
                    continue;
                };
                let left = at.saturating_duration_since(now).as_millis() as u64;
                (limit, limit.saturating_sub(left), 0, left)
            } else {
                let Some(limit) = account.limits.limit(dimension) else {
                    continue;
                };
                let spent = state.spent.get(dimension);
                let held = state.held.get(dimension);
                (limit, spent, held, limit.saturating_sub(spent + held))
            };
            let this = Exhausted {
                dimension,
                holder: account.id.clone(),
                limit,
                spent,
                held,
            };
            if tightest.as_ref().is_none_or(|(l, _)| left < *l) {
                tightest = Some((left, this));
            }
        }
        tightest.map(|(_, e)| e).unwrap_or_else(|| Exhausted {
            dimension,
            holder: chain.first().map(|(a, _)| a.id.clone()).unwrap_or_default(),
            limit: 0,
            spent: 0,
            held: 0,
        })
    }

    /// The refusal its expired wall time makes (see [`Account::expired`]).
    pub fn out_of_time(&self) -> Exhausted {
        Self::exhausted_in(&self.lock_chain(), Dimension::WallTime)
    }

    /// Charges what was spent with no hold before (a component's own model calls, reported
    /// after the fact), and returns the store writes that keep it. Whether the budget still
    /// covers the tree afterwards is [`Account::check`]'s to say.
    pub fn charge(&self, amount: Spent) -> Vec<Write> {
        self.apply(Spent::default(), amount)
    }

    /// Adds the wall time `ms` this account's holder ran to its own spend only (an ancestor's
    /// wall time is its own: its children ran within it).
    pub fn add_wall_time(&self, ms: u64) -> Vec<Write> {
        let mut state = lock(&self.state);
        state.spent.wall_ms = state.spent.wall_ms.saturating_add(ms);
        state
            .session
            .as_ref()
            .map(|session| Write::Spend {
                session: session.clone(),
                added: Spent {
                    wall_ms: ms,
                    ..Spent::default()
                },
                limits: None,
            })
            .into_iter()
            .collect()
    }

    /// Refuses if any account of the chain has spent past its limit, has no tokens or money
    /// left for another model call, or has run out of time: a component that reports its own
    /// model calls is stopped then.
    pub fn check(&self) -> Result<(), Exhausted> {
        let chain = self.lock_chain();
        let now = Instant::now();
        for (account, state) in &chain {
            for dimension in Dimension::ALL {
                let Some(limit) = account.limits.limit(dimension) else {
                    continue;
                };
                let spent = state.spent.get(dimension);
                let spends_out = matches!(
                    dimension,
                    Dimension::InputTokens | Dimension::OutputTokens | Dimension::Cost
                );
                if dimension != Dimension::WallTime
                    && (spent > limit || spends_out && spent >= limit)
                {
                    return Err(Self::exhausted_in(&chain, dimension));
                }
            }
            if state.deadline.is_some_and(|at| now >= at) {
                return Err(Self::exhausted_in(&chain, Dimension::WallTime));
            }
        }
        Ok(())
    }

    /// Releases `held` and adds `spent` along the chain; returns the writes that keep the spend
    /// in the sessions of the chain.
    fn apply(&self, held: Spent, spent: Spent) -> Vec<Write> {
        let writes = self.apply_locked(held, spent);
        if !held.is_zero() {
            self.settled.notify_waiters();
        }
        writes
    }

    fn apply_locked(&self, held: Spent, spent: Spent) -> Vec<Write> {
        let mut chain = self.lock_chain();
        let mut writes = Vec::new();
        for (_, state) in chain.iter_mut() {
            state.held = state.held - held;
            state.spent += spent;
            if let Some(session) = &state.session {
                if !spent.is_zero() {
                    writes.push(Write::Spend {
                        session: session.clone(),
                        added: spent,
                        limits: None,
                    });
                }
            }
        }
        writes
    }

    /// The write that records this account's limits in its session (for `seam sessions`).
    pub fn limits_write(&self) -> Option<Write> {
        let state = lock(&self.state);
        let session = state.session.clone()?;
        (!self.limits.is_unbounded()).then(|| Write::Spend {
            session,
            added: Spent::default(),
            limits: Some(self.limits),
        })
    }
}

/// What a call holds of its chain's budgets until it settles; dropped unsettled (a call that
/// failed before it spent), it gives the hold back.
#[derive(Debug)]
pub struct Hold {
    account: Arc<Account>,
    held: Spent,
    settled: bool,
}

impl Hold {
    /// What it holds.
    pub fn amount(&self) -> Spent {
        self.held
    }

    /// The account it holds on.
    pub fn account(&self) -> &Arc<Account> {
        &self.account
    }

    /// Replaces the hold with what the call spent, along the chain; returns the store writes
    /// that keep it.
    pub fn settle(mut self, spent: Spent) -> Vec<Write> {
        self.settled = true;
        self.account.apply(self.held, spent)
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if !self.settled {
            self.account.apply(self.held, Spent::default());
        }
    }
}

/// The accounts of the process's live agents and runs, by id (a run's child agent has the
/// run's id, so it finds the run's account).
#[derive(Default)]
pub struct Accounts {
    by_id: Mutex<HashMap<String, Arc<Account>>>,
}

impl Accounts {
    /// The account of `id`, if it has one.
    pub fn get(&self, id: &str) -> Option<Arc<Account>> {
        lock(&self.by_id).get(id).cloned()
    }

    /// Keeps `account` under its id.
    pub fn insert(&self, account: Arc<Account>) {
        lock(&self.by_id).insert(account.id.clone(), account);
    }

    /// Forgets the account of `id` (its holder was disposed); whoever holds it keeps it.
    pub fn remove(&self, id: &str) {
        lock(&self.by_id).remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spend::Prices;
    use crate::types::Usage;

    fn tokens(output: u64) -> Budget {
        Budget {
            output_tokens: Some(output),
            ..Budget::default()
        }
    }

    #[test]
    fn a_child_spends_for_every_ancestor_and_is_capped_by_their_remainder() {
        let root = Account::root("agent-1", tokens(100), Spent::default());
        let child = root.child("spawn-1", tokens(80), Spent::default());
        let grandchild = child.child("spawn-2", Budget::default(), Spent::default());
        let spent = Spent {
            output_tokens: 30,
            ..Spent::default()
        };
        grandchild.hold(spent).unwrap().settle(spent);
        assert_eq!(root.spent().output_tokens, 30);
        assert_eq!(child.spent().output_tokens, 30);
        assert_eq!(
            grandchild.remaining().get(Dimension::OutputTokens),
            Some(50)
        );
        // The root spends 40 itself: the child's cap (50 left) is no longer the tightest.
        root.charge(Spent {
            output_tokens: 40,
            ..Spent::default()
        });
        assert_eq!(
            grandchild.remaining().get(Dimension::OutputTokens),
            Some(30)
        );
        let refused = grandchild
            .hold(Spent {
                output_tokens: 31,
                ..Spent::default()
            })
            .unwrap_err();
        assert_eq!(refused.dimension, Dimension::OutputTokens);
        assert_eq!(refused.holder, "agent-1");
        assert_eq!((refused.limit, refused.spent), (100, 70));
        assert!(refused.to_string().contains("`agent-1`"), "{refused}");
    }

    #[test]
    fn holds_of_parallel_calls_share_one_pool_and_an_unsettled_hold_is_given_back() {
        let root = Account::root("agent-1", tokens(100), Spent::default());
        let a = root.child("a", Budget::default(), Spent::default());
        let b = root.child("b", Budget::default(), Spent::default());
        let sixty = Spent {
            output_tokens: 60,
            ..Spent::default()
        };
        let held = a.hold(sixty).unwrap();
        assert!(b.hold(sixty).is_err(), "60 are held by a's call");
        drop(held);
        let held = b.hold(sixty).unwrap();
        held.settle(Spent {
            output_tokens: 10,
            ..Spent::default()
        });
        assert_eq!(root.spent().output_tokens, 10);
        assert_eq!(a.remaining().get(Dimension::OutputTokens), Some(90));
    }

    #[tokio::test]
    async fn a_model_call_near_the_end_waits_for_the_calls_in_flight_then_takes_what_they_left() {
        let root = Account::root("agent-1", tokens(100), Spent::default());
        let a = root.child("a", Budget::default(), Spent::default());
        let b = root.child("b", Budget::default(), Spent::default());
        let all = |left: &Remaining| match left.get(Dimension::OutputTokens) {
            Some(0) => Err(Dimension::OutputTokens),
            left => Ok(Spent {
                output_tokens: left.unwrap_or(0),
                model_calls: 1,
                ..Spent::default()
            }),
        };
        let first = a.hold_model_call(all).await.unwrap();
        assert_eq!(first.amount().output_tokens, 100);
        let waiting = tokio::spawn({
            let b = b.clone();
            async move { b.hold_model_call(all).await }
        });
        // a's call used 30 of the 100 it held: b gets the 70 left.
        tokio::task::yield_now().await;
        first.settle(Spent {
            output_tokens: 30,
            model_calls: 1,
            ..Spent::default()
        });
        let second = waiting.await.unwrap().unwrap();
        assert_eq!(second.amount().output_tokens, 70);
        second.settle(Spent {
            output_tokens: 70,
            ..Spent::default()
        });
        // Nothing in flight and nothing left: refused at once.
        let refused = b.hold_model_call(all).await.unwrap_err();
        assert_eq!(refused.dimension, Dimension::OutputTokens);
        assert_eq!(refused.spent, 100);
    }

    #[test]
    fn a_model_call_is_clamped_to_what_is_left() {
        let root = Account::root(
            "agent-1",
            Budget {
                output_tokens: Some(500),
                cost_usd: Some(0.001),
                ..Budget::default()
            },
            Spent::default(),
        );
        let prices = Prices {
            input_per_mtok: 1.0,
            output_per_mtok: 4.0,
        };
        // $0.001 is 1000 micro-dollars: 250 output tokens at 4 each.
        let hold = root
            .hold_with(|left| {
                let out = left.get(Dimension::OutputTokens).unwrap_or(u64::MAX);
                let by_cost = left
                    .get(Dimension::Cost)
                    .map_or(u64::MAX, |c| c / prices.output_micros_per_token().max(1));
                Ok(Spent {
                    output_tokens: out.min(by_cost),
                    cost_micros: out.min(by_cost) * prices.output_micros_per_token(),
                    model_calls: 1,
                    ..Spent::default()
                })
            })
            .unwrap();
        assert_eq!(hold.amount().output_tokens, 250);
        let usage = Usage {
            prompt_tokens: 100,
            completion_tokens: 200,
        };
        hold.settle(Spent::model_call(usage, prices.cost_micros(usage)));
        assert_eq!(root.spent().cost_micros, 900);
    }

    #[test]
    fn what_a_continued_session_spent_counts_against_its_budget() {
        let already = Spent {
            runs: 3,
            ..Spent::default()
        };
        let root = Account::root(
            "agent-1",
            Budget {
                runs: Some(4),
                ..Budget::default()
            },
            already,
        );
        root.keep_in("s-1");
        let writes = root.hold(Spent::run()).unwrap().settle(Spent::run());
        assert_eq!(
            writes,
            vec![Write::Spend {
                session: "s-1".into(),
                added: Spent::run(),
                limits: None
            }]
        );
        let refused = root.hold(Spent::run()).unwrap_err();
        assert_eq!(refused.dimension, Dimension::Runs);
        assert_eq!(refused.spent, 4);
    }

    #[tokio::test]
    async fn a_child_inherits_its_parents_deadline() {
        let root = Account::root(
            "agent-1",
            Budget {
                wall_ms: Some(0),
                ..Budget::default()
            },
            Spent::default(),
        );
        let child = root.child("c", Budget::default(), Spent::default());
        child.expired().await;
        let refused = child.hold(Spent::tool_call()).unwrap_err();
        assert_eq!(refused.dimension, Dimension::WallTime);
        assert_eq!(refused.holder, "agent-1");
    }

    #[test]
    fn a_bad_cost_or_price_is_refused_naming_the_key() {
        let bad = Budget {
            cost_usd: Some(-1.0),
            ..Budget::default()
        };
        assert!(bad
            .validate("agent.budget")
            .unwrap_err()
            .to_string()
            .contains("`agent.budget.cost_usd`"));
        let prices = Prices {
            input_per_mtok: f64::NAN,
            output_per_mtok: 1.0,
        };
        assert!(prices
            .validate("models.openai.prices")
            .unwrap_err()
            .to_string()
            .contains("models.openai.prices.input_per_mtok"));
    }
}
