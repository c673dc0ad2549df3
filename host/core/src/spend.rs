//! What a budget bounds and what is spent: the values of budgets over the delegation tree,
//! including the tokens a model call used ([`Usage`], which the vocabulary re-exports). The
//! accounts that hold and charge them along a tree are in [`crate::ledger`].

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Tokens a model call (or a turn, or a tree, summed) used, as the model endpoint reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Usage {
    /// Tokens of the prompt.
    #[serde(alias = "prompt_tokens")]
    pub prompt_tokens: u64,
    /// Tokens of the completion.
    #[serde(alias = "completion_tokens")]
    pub completion_tokens: u64,
}

impl Usage {
    /// Both counts added.
    pub fn total(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Self) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
    }
}

/// A budget: the most a tree may spend in each dimension (`None`: unbounded). Written as
/// `[agent.budget]` for the top-level agent and as a subagent tool entry's `config.budget` for
/// each delegation through it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Prompt tokens, summed over every model call in the tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Completion tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Cost in US dollars, from the prices of the models called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Model calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_calls: Option<u64>,
    /// Tool calls made by the tree's models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<u64>,
    /// Runs started below the budget's holder, descendants included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<u64>,
    /// Wall time, in milliseconds, from when the holder starts (summed over the turns of a
    /// continued session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_ms: Option<u64>,
}

impl Budget {
    /// Whether it bounds nothing.
    pub fn is_unbounded(&self) -> bool {
        *self == Self::default()
    }

    /// Checks the values: a cost must be a finite, non-negative number. `at` names where the
    /// budget was written (a config key), for the error.
    pub fn validate(&self, at: &str) -> Result<(), BudgetError> {
        if let Some(cost) = self.cost_usd {
            if !cost.is_finite() || cost < 0.0 {
                return Err(BudgetError::Cost {
                    at: at.to_string(),
                    value: cost,
                });
            }
        }
        Ok(())
    }

    /// The limit in `dimension`, in that dimension's unit (micro-dollars for cost).
    pub fn limit(&self, dimension: Dimension) -> Option<u64> {
        match dimension {
            Dimension::InputTokens => self.input_tokens,
            Dimension::OutputTokens => self.output_tokens,
            Dimension::Cost => self.cost_usd.map(usd_to_micros),
            Dimension::ModelCalls => self.model_calls,
            Dimension::ToolCalls => self.tool_calls,
            Dimension::Runs => self.runs,
            Dimension::WallTime => self.wall_ms,
        }
    }
}

impl Budget {
    /// The cap a plugin entry's `config.budget` puts on each run its calls start (`None`: no
    /// key, only the caller's remainder). Other keys of the config are the plugin's own.
    pub fn of_entry_config(config: &serde_json::Value) -> Result<Option<Self>, BudgetError> {
        let Some(value) = config.get("budget") else {
            return Ok(None);
        };
        let budget: Self =
            serde_json::from_value(value.clone()).map_err(|e| BudgetError::Entry(e.to_string()))?;
        budget.validate("config.budget")?;
        Ok(Some(budget))
    }
}

/// A budget written wrong.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum BudgetError {
    /// `cost_usd` is negative or not a number.
    #[error("`{at}.cost_usd` must be a non-negative number of dollars, not {value}")]
    Cost {
        /// The config key of the budget.
        at: String,
        /// The value written.
        value: f64,
    },
    /// An entry's `config.budget` is not a budget table.
    #[error("key `config.budget`: {0} (keys: input_tokens, output_tokens, cost_usd, model_calls, tool_calls, runs, wall_ms)")]
    Entry(String),
    /// A price is negative or not a number.
    #[error("`{at}` must be a non-negative number of dollars per million tokens, not {value}")]
    Price {
        /// The config key of the price.
        at: String,
        /// The value written.
        value: f64,
    },
}

/// What a model's tokens cost, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prices {
    /// Dollars per million prompt tokens.
    pub input_per_mtok: f64,
    /// Dollars per million completion tokens.
    pub output_per_mtok: f64,
}

impl Prices {
    /// Checks the values. `at` names the config key of the prices, for the error.
    pub fn validate(&self, at: &str) -> Result<(), BudgetError> {
        for (key, value) in [
            ("input_per_mtok", self.input_per_mtok),
            ("output_per_mtok", self.output_per_mtok),
        ] {
            if !value.is_finite() || value < 0.0 {
                return Err(BudgetError::Price {
                    at: format!("{at}.{key}"),
                    value,
                });
            }
        }
        Ok(())
    }

    /// What `usage` costs, in micro-dollars, rounded up (a budget is never under-charged).
    pub fn cost_micros(&self, usage: Usage) -> u64 {
        // Dollars per million tokens is micro-dollars per token.
        let micros = usage.prompt_tokens as f64 * self.input_per_mtok
            + usage.completion_tokens as f64 * self.output_per_mtok;
        micros.ceil() as u64
    }

    /// Micro-dollars per completion token, rounded up.
    pub fn output_micros_per_token(&self) -> u64 {
        self.output_per_mtok.ceil() as u64
    }
}

/// Dollars as micro-dollars, the unit cost is counted in (so that sums are exact).
fn usd_to_micros(usd: f64) -> u64 {
    (usd * 1_000_000.0).round() as u64
}

/// Micro-dollars as dollars, for display.
pub fn micros_to_usd(micros: u64) -> f64 {
    micros as f64 / 1_000_000.0
}

/// What a budget bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    /// Prompt tokens.
    InputTokens,
    /// Completion tokens.
    OutputTokens,
    /// Cost (counted in micro-dollars, shown in dollars).
    #[serde(rename = "cost_usd")]
    Cost,
    /// Model calls.
    ModelCalls,
    /// Tool calls.
    ToolCalls,
    /// Runs started.
    Runs,
    /// Wall time, in milliseconds.
    #[serde(rename = "wall_ms")]
    WallTime,
}

impl Dimension {
    /// Every dimension, in the order reports list them.
    pub const ALL: [Dimension; 7] = [
        Self::InputTokens,
        Self::OutputTokens,
        Self::Cost,
        Self::ModelCalls,
        Self::ToolCalls,
        Self::Runs,
        Self::WallTime,
    ];

    /// Its key in a budget table (`output_tokens`, `cost_usd`, ...).
    pub fn key(&self) -> &'static str {
        match self {
            Self::InputTokens => "input_tokens",
            Self::OutputTokens => "output_tokens",
            Self::Cost => "cost_usd",
            Self::ModelCalls => "model_calls",
            Self::ToolCalls => "tool_calls",
            Self::Runs => "runs",
            Self::WallTime => "wall_ms",
        }
    }

    /// Its name in words.
    pub fn words(&self) -> &'static str {
        match self {
            Self::InputTokens => "input tokens",
            Self::OutputTokens => "output tokens",
            Self::Cost => "cost",
            Self::ModelCalls => "model calls",
            Self::ToolCalls => "tool calls",
            Self::Runs => "runs started",
            Self::WallTime => "wall time",
        }
    }

    /// An amount of it in words (`$0.0420`, `1500 ms`, `12`).
    pub fn amount(&self, value: u64) -> String {
        match self {
            Self::Cost => format!("${:.4}", micros_to_usd(value)),
            Self::WallTime => format!("{value} ms"),
            _ => value.to_string(),
        }
    }
}

/// What was spent (or is held), in every dimension.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Spent {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Cost, in micro-dollars.
    pub cost_micros: u64,
    /// Model calls.
    pub model_calls: u64,
    /// Tool calls.
    pub tool_calls: u64,
    /// Runs started.
    pub runs: u64,
    /// Wall time, in milliseconds.
    pub wall_ms: u64,
}

impl Spent {
    /// One model call of `usage`, costing `cost_micros`.
    pub fn model_call(usage: Usage, cost_micros: u64) -> Self {
        Self {
            input_tokens: usage.prompt_tokens,
            output_tokens: usage.completion_tokens,
            cost_micros,
            model_calls: 1,
            ..Self::default()
        }
    }

    /// One tool call.
    pub fn tool_call() -> Self {
        Self {
            tool_calls: 1,
            ..Self::default()
        }
    }

    /// One run started.
    pub fn run() -> Self {
        Self {
            runs: 1,
            ..Self::default()
        }
    }

    /// The tokens, as a [`Usage`].
    pub fn usage(&self) -> Usage {
        Usage {
            prompt_tokens: self.input_tokens,
            completion_tokens: self.output_tokens,
        }
    }

    /// The cost in dollars.
    pub fn cost_usd(&self) -> f64 {
        micros_to_usd(self.cost_micros)
    }

    /// As reports show it: each dimension by its budget key, cost in dollars.
    pub fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd(),
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
            "runs": self.runs,
            "wall_ms": self.wall_ms,
        })
    }

    /// Whether nothing was spent.
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }

    /// The amount in `dimension`.
    pub fn get(&self, dimension: Dimension) -> u64 {
        match dimension {
            Dimension::InputTokens => self.input_tokens,
            Dimension::OutputTokens => self.output_tokens,
            Dimension::Cost => self.cost_micros,
            Dimension::ModelCalls => self.model_calls,
            Dimension::ToolCalls => self.tool_calls,
            Dimension::Runs => self.runs,
            Dimension::WallTime => self.wall_ms,
        }
    }

    fn zip(self, other: Self, f: impl Fn(u64, u64) -> u64) -> Self {
        Self {
            input_tokens: f(self.input_tokens, other.input_tokens),
            output_tokens: f(self.output_tokens, other.output_tokens),
            cost_micros: f(self.cost_micros, other.cost_micros),
            model_calls: f(self.model_calls, other.model_calls),
            tool_calls: f(self.tool_calls, other.tool_calls),
            runs: f(self.runs, other.runs),
            wall_ms: f(self.wall_ms, other.wall_ms),
        }
    }
}

impl std::ops::Add for Spent {
    type Output = Self;
    fn add(self, other: Self) -> Self {
        self.zip(other, u64::saturating_add)
    }
}

impl std::ops::AddAssign for Spent {
    fn add_assign(&mut self, other: Self) {
        *self = *self + other;
    }
}

impl std::ops::Sub for Spent {
    type Output = Self;
    fn sub(self, other: Self) -> Self {
        self.zip(other, u64::saturating_sub)
    }
}

/// A charge was refused: an account in the chain cannot cover it.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize, Deserialize)]
#[error(
    "budget exhausted: {} (the budget of `{holder}` allows {}, {} spent{})",
    .dimension.words(),
    .dimension.amount(*.limit),
    .dimension.amount(*.spent),
    held_suffix(*.dimension, *.held)
)]
pub struct Exhausted {
    /// What ran out.
    pub dimension: Dimension,
    /// The agent or run whose budget ran out: the charging one, or the ancestor whose remainder
    /// did not cover it.
    pub holder: String,
    /// Its limit in that dimension.
    pub limit: u64,
    /// What it had spent.
    pub spent: u64,
    /// What calls in flight held of it.
    pub held: u64,
}

fn held_suffix(dimension: Dimension, held: u64) -> String {
    if held == 0 {
        String::new()
    } else {
        format!(", {} held by calls in flight", dimension.amount(held))
    }
}

/// What is left in each dimension, as the tightest account of a chain sees it (`None`:
/// unbounded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Remaining {
    values: [Option<u64>; 7],
}

impl Remaining {
    /// What is left in `dimension`.
    pub fn get(&self, dimension: Dimension) -> Option<u64> {
        self.values[index(dimension)]
    }

    /// Narrows `dimension` to at most `value`.
    pub fn narrow(&mut self, dimension: Dimension, value: u64) {
        let slot = &mut self.values[index(dimension)];
        *slot = Some(slot.map_or(value, |v| v.min(value)));
    }

    /// As a budget (what a report of "remaining" shows).
    pub fn as_budget(&self) -> Budget {
        Budget {
            input_tokens: self.get(Dimension::InputTokens),
            output_tokens: self.get(Dimension::OutputTokens),
            cost_usd: self.get(Dimension::Cost).map(micros_to_usd),
            model_calls: self.get(Dimension::ModelCalls),
            tool_calls: self.get(Dimension::ToolCalls),
            runs: self.get(Dimension::Runs),
            wall_ms: self.get(Dimension::WallTime),
        }
    }
}

fn index(dimension: Dimension) -> usize {
    Dimension::ALL
        .iter()
        .position(|d| *d == dimension)
        .unwrap_or(0)
}
