//! Open connections: each wasi:http request in flight and each socket holds a descriptor of the
//! host's. A plugin holds at most `max_http_connections` at once, over all its stores; and all
//! plugins together hold at most the host's descriptor limit less a reserve, so that no plugin,
//! nor all of them, can take the descriptors the host needs to go on serving (its own files, the
//! compile cache, agent processes, the other plugins' next request).

use std::sync::{Arc, OnceLock};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Limit;

/// Descriptors kept back from plugins: a quarter of the host's limit, and at least this many.
const MIN_RESERVE: usize = 256;

/// One open connection of a plugin; dropping it gives the descriptor back.
#[derive(Debug)]
pub struct Connection {
    _plugin: OwnedSemaphorePermit,
    _host: OwnedSemaphorePermit,
}

/// Why a connection was not opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The plugin holds as many as its `max_http_connections`.
    Plugin(Limit),
    /// All plugins together hold every descriptor the host gives them.
    Host {
        /// How many that is.
        budget: usize,
    },
}

/// A plugin's connection slots, shared by all its stores.
#[derive(Debug)]
pub struct Connections {
    slots: Arc<Semaphore>,
    max: usize,
}

impl Connections {
    pub fn new(max: usize) -> Self {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        Self {
            slots: Arc::new(Semaphore::new(max)),
            max,
        }
    }

    /// A connection, if the plugin and the host both have one to spare. Never waits: a guest
    /// past its cap is told at once.
    pub fn open(&self) -> Result<Connection, Refused> {
        let plugin = self
            .slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| Refused::Plugin(Limit::HttpConnections { max: self.max }))?;
        let (host, budget) = host_slots();
        let host = host
            .clone()
            .try_acquire_owned()
            .map_err(|_| Refused::Host { budget: *budget })?;
        Ok(Connection {
            _plugin: plugin,
            _host: host,
        })
    }
}

/// The host-wide slots and their number: the process's descriptor limit less the reserve, read
/// once.
fn host_slots() -> &'static (Arc<Semaphore>, usize) {
    static SLOTS: OnceLock<(Arc<Semaphore>, usize)> = OnceLock::new();
    SLOTS.get_or_init(|| {
        let budget = plugin_descriptors(descriptor_limit());
        (Arc::new(Semaphore::new(budget)), budget)
    })
}

/// Of `limit` descriptors, how many plugins may hold together.
fn plugin_descriptors(limit: usize) -> usize {
    let reserve = (limit / 4).max(MIN_RESERVE);
    limit
        .saturating_sub(reserve)
        .clamp(1, Semaphore::MAX_PERMITS)
}

/// The process's soft limit on open descriptors (`RLIMIT_NOFILE`), or 1024 if it cannot be read.
fn descriptor_limit() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into the struct it is given, which lives here.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    if read && limit.rlim_cur != libc::RLIM_INFINITY {
        usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX)
    } else if read {
        usize::MAX
    } else {
        1024
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_holds_at_most_its_cap_and_gets_them_back() {
        let connections = Connections::new(2);
        let a = connections.open().expect("a first connection");
        let _b = connections.open().expect("a second connection");
        assert_eq!(
            connections.open().unwrap_err(),
            Refused::Plugin(Limit::HttpConnections { max: 2 })
        );
        drop(a);
        connections
            .open()
            .expect("a connection given back is free again");
    }

    #[test]
    fn the_host_keeps_a_reserve() {
        assert_eq!(plugin_descriptors(8192), 6144);
        assert_eq!(plugin_descriptors(1024), 768);
        assert_eq!(plugin_descriptors(300), 44);
        assert_eq!(plugin_descriptors(100), 1);
    }
}
