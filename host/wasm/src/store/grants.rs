//! A plugin's grants applied to its WASI context: preopened directories, environment values,
//! name lookup, and the socket address check that allows only the granted addresses.

use std::net::SocketAddr;
use std::sync::Arc;

use seam_core::sync::lock;
use seam_sandbox::{Granted, Removed};
use wasmtime_wasi::sockets::SocketAddrUse;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

/// Applies the grants to a WASI context builder; `removed` is what scopes took out of them, for
/// a denial to name.
pub fn apply(grants: &Granted, removed: &Removed, plugin: &str, builder: &mut WasiCtxBuilder) {
    removed.log_missing(plugin);
    for (name, value) in grants.env_values() {
        builder.env(name, value);
    }
    for dir in &grants.dirs {
        let perms = if dir.write {
            FsPerms::ReadWrite
        } else {
            FsPerms::ReadOnly
        };
        if let Err(e) = builder.preopened_dir(&dir.host, &dir.guest, perms) {
            // It opened at load; it vanished since. The guest sees no such directory.
            tracing::warn!(
                plugin,
                dir = %dir.host.display(),
                error = %e,
                "a granted directory can no longer be opened; the guest will not see it"
            );
        }
    }
    builder.allow_ip_name_lookup(grants.dns);
    let network = !grants.network.is_empty();
    builder.allow_tcp(network);
    builder.allow_udp(network);
    if network {
        let allowed: Arc<[SocketAddr]> = grants.network.clone().into();
        let plugin: Arc<str> = plugin.into();
        let warned = Arc::new(std::sync::Mutex::new(Vec::<SocketAddr>::new()));
        let removed = removed.clone();
        builder.socket_addr_check(move |addr, usage| {
            let ok = match usage {
                SocketAddrUse::TcpConnect | SocketAddrUse::UdpSend | SocketAddrUse::UdpReceive => {
                    allowed.contains(&addr)
                }
                // The implicit bind before a connect or send is to the wildcard address
                // with port 0; any other bind, and every listen or accept, is refused.
                SocketAddrUse::TcpBind | SocketAddrUse::UdpBind => {
                    addr.ip().is_unspecified() && addr.port() == 0
                }
                SocketAddrUse::TcpListen | SocketAddrUse::TcpAccept => false,
            };
            let outbound = matches!(
                usage,
                SocketAddrUse::TcpConnect | SocketAddrUse::UdpSend | SocketAddrUse::UdpReceive
            );
            if !ok && outbound {
                warn_denied(&plugin, &warned, addr, removed.connections_to(addr));
            }
            Box::pin(async move { ok })
        });
    }
}

/// Most distinct denied addresses one store warns about; past them denials stay silent, so a
/// guest scanning ports cannot flood the log.
const DENIAL_WARNINGS: usize = 8;

/// Logs, once per address and store, that `plugin` tried to reach `addr` outside its grant (or
/// outside the scope of `by`, which removed it), and what to add to allow it.
fn warn_denied(
    plugin: &str,
    warned: &std::sync::Mutex<Vec<SocketAddr>>,
    addr: SocketAddr,
    by: Option<&str>,
) {
    let mut warned = lock(warned);
    if warned.len() >= DENIAL_WARNINGS || warned.contains(&addr) {
        return;
    }
    warned.push(addr);
    if let Some(holder) = by {
        tracing::warn!(
            plugin,
            %addr,
            scope = holder,
            "plugin `{plugin}` tried to reach {addr}, which its grants allow but the scope of \
             `{holder}` removed for this subtree; to allow it, add \"{addr}\" to `network` in \
             the `config.scope` of the tool entry that delegated to `{holder}`"
        );
        return;
    }
    tracing::warn!(
        plugin,
        %addr,
        "plugin `{plugin}` tried to reach {addr}, which its grants do not allow; to allow it, \
         add \"{addr}\" to `network` under [plugin.grants]"
    );
}
