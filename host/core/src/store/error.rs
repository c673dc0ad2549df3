//! What a session store refuses or fails with.

use std::path::PathBuf;

use thiserror::Error;

/// A store's error. Every variant names what it is about: the file, the session, the limit.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StoreError {
    /// The database could not be opened, created or prepared.
    #[error("cannot open the session store {}: {message}", path.display())]
    Open {
        /// The database file.
        path: PathBuf,
        /// Why, in words.
        message: String,
    },
    /// A remote store (JetStream) could not be reached or prepared.
    #[error("cannot open the session store {store}: {message}")]
    Connect {
        /// The server and what on it.
        store: String,
        /// Why, in words.
        message: String,
    },
    /// The database was written by a newer Seam.
    #[error(
        "the session store {} has schema version {found}, newer than the {supported} this seam \
         supports: use a newer seam, or another store",
        path.display()
    )]
    TooNew {
        /// The database file.
        path: PathBuf,
        /// Its `user_version`.
        found: i64,
        /// The newest this build knows.
        supported: i64,
    },
    /// An append would take a session past its size limit.
    #[error(
        "session `{session}` would grow past its limit of {limit_bytes} bytes \
         (`[sessions] max_session_mb`)"
    )]
    SessionFull {
        /// The session.
        session: String,
        /// The limit in force.
        limit_bytes: u64,
    },
    /// A write or read named a session the store does not have.
    #[error("no session `{0}` in the store")]
    NoSession(String),
    /// A write or read failed; the backend did not say which store (see
    /// [`StoreError::in_store`]).
    #[error("session store: {0}")]
    Backend(String),
    /// A store failed a write or a read (a full disk, a lost server): named, so that the
    /// diagnostic says which store to look at.
    #[error("the session store {store} failed: {message}")]
    Failed {
        /// The store, as [`SessionStore::name`](super::SessionStore::name) gives it: the
        /// database file, the server.
        store: String,
        /// Why, in words.
        message: String,
    },
}

impl StoreError {
    /// The error, naming `store` if it did not say which store it is about.
    pub fn in_store(self, store: &str) -> Self {
        match self {
            Self::Backend(message) => Self::Failed {
                store: store.to_string(),
                message,
            },
            other => other,
        }
    }

    /// Whether the store itself failed (it could not write or read: a full disk, a lost server,
    /// a file it cannot use), as opposed to refusing a write it judged (a session past its
    /// limit, a session it does not have) while working as it should.
    pub fn is_failure(&self) -> bool {
        !matches!(self, Self::SessionFull { .. } | Self::NoSession(_))
    }
}
