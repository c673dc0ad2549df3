//! Security round two: observers.
