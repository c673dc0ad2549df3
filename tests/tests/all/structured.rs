//! A structured answer is checked against the requested schema on every run path.
