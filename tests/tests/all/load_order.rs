//! Which entry keeps a contested name, and what `reconfigure` retries.
