//! Security round two: cache_trust.
