//! Security round two: faults.
