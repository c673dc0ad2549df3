//! Security round two: budget.
