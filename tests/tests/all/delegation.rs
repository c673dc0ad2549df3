//! Security round two: delegation.
