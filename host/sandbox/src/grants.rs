//! What a plugin is granted beyond Seam's own imports: preopened directories, environment
//! variables, network addresses, name lookup and HTTP origins. Everything is denied unless the
//! plugin's config entry grants it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use thiserror::Error;

/// A config entry's `[plugin.grants]`, as written (paths already resolved against the config
/// file's folder). [`Grants::resolve`] checks it against the host at load.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Grants {
    /// Host directories preopened in the guest (`dirs`).
    pub dirs: Vec<DirGrant>,
    /// Names of host environment variables the guest sees (`env`).
    pub env: Vec<String>,
    /// Socket addresses the guest may connect or send to, over TCP or UDP (`network`).
    pub network: Vec<SocketAddr>,
    /// Whether the guest may resolve names (`dns`).
    pub dns: bool,
    /// Origins the guest may send HTTP requests to through `wasi:http` (`http`).
    pub http: Vec<HttpOrigin>,
}

/// An HTTP origin: scheme, host and port (`https://api.deepseek.com`, `http://127.0.0.1:8080`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HttpOrigin {
    /// Whether the scheme is `https`.
    pub https: bool,
    /// The host, lowercase (a name, an IPv4 address, or an IPv6 address in brackets).
    pub host: String,
    /// The port: given, or 443 for `https` and 80 for `http`.
    pub port: u16,
}

impl HttpOrigin {
    /// Whether `url`'s origin is one of `granted` (a URL that names no origin is not).
    pub fn url_in(url: &str, granted: &[HttpOrigin]) -> bool {
        url.parse::<http::Uri>()
            .ok()
            .as_ref()
            .and_then(HttpOrigin::of)
            .is_some_and(|o| granted.contains(&o))
    }

    /// The origin a request goes to, if its URI names a scheme and an authority without user
    /// information: `http://127.0.0.1:1@127.0.0.1:2` names no origin, whatever a resolver or a
    /// server would make of it.
    pub fn of(uri: &http::Uri) -> Option<HttpOrigin> {
        let https = match uri.scheme_str()? {
            "https" => true,
            "http" => false,
            _ => return None,
        };
        let authority = uri.authority()?;
        if authority.as_str().contains('@') {
            return None;
        }
        Some(HttpOrigin {
            https,
            host: authority.host().to_ascii_lowercase(),
            port: authority.port_u16().unwrap_or(if https { 443 } else { 80 }),
        })
    }
}

/// Why a text is not an HTTP origin grant.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OriginError {
    /// It is not `scheme://host[:port]` at all.
    #[error(
        "`{0}` is not an origin: write the scheme, the host and, if not the default, the port, \
         such as `https://api.deepseek.com` or `http://127.0.0.1:8080`"
    )]
    Shape(String),
    /// It has a user name or password.
    #[error("`{0}`: an origin has no user name or password")]
    UserInfo(String),
    /// It has a path or a query.
    #[error("`{0}`: an origin has no path or query; the grant covers every path")]
    Path(String),
    /// Its scheme is not http or https.
    #[error("`{text}`: the scheme must be http or https, not `{scheme}`")]
    Scheme {
        /// The origin as written.
        text: String,
        /// Its scheme.
        scheme: String,
    },
}

impl std::str::FromStr for HttpOrigin {
    type Err = OriginError;

    /// Reads `scheme://host[:port]`, with nothing after the host but an optional `/`.
    fn from_str(text: &str) -> Result<Self, OriginError> {
        let shape = || OriginError::Shape(text.to_string());
        let uri: http::Uri = text.parse().map_err(|_| shape())?;
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err(OriginError::UserInfo(text.to_string()));
        }
        if uri.query().is_some() || !matches!(uri.path(), "" | "/") {
            return Err(OriginError::Path(text.to_string()));
        }
        match uri.scheme_str() {
            Some("http" | "https") => {}
            Some(other) => {
                return Err(OriginError::Scheme {
                    text: text.to_string(),
                    scheme: other.to_string(),
                })
            }
            None => return Err(shape()),
        }
        HttpOrigin::of(&uri).ok_or_else(shape)
    }
}

impl HttpOrigin {
    /// Whether `text` (`scheme://host[:port][/]`, as a scope writes it) names this origin:
    /// compared in place, with no parse, as every scoped call's store is made with it. The
    /// scheme and host are compared ignoring case, and a missing port is the scheme's default.
    pub fn written_as(&self, text: &str) -> bool {
        let text = text.strip_suffix('/').unwrap_or(text);
        let scheme_end = text.find("://");
        let Some((scheme, rest)) = scheme_end.map(|i| (&text[..i], &text[i + 3..])) else {
            return false;
        };
        let https = if scheme.eq_ignore_ascii_case("https") {
            true
        } else if scheme.eq_ignore_ascii_case("http") {
            false
        } else {
            return false;
        };
        if https != self.https {
            return false;
        }
        // An IPv6 host is bracketed: its port, if any, follows the bracket.
        let (host, port) = match rest.find(']') {
            Some(end) => (&rest[..=end], &rest[end + 1..]),
            None => match rest.rfind(':') {
                Some(colon) => (&rest[..colon], &rest[colon..]),
                None => (rest, ""),
            },
        };
        let port = match port.strip_prefix(':') {
            Some(p) => match p.parse::<u16>() {
                Ok(p) => p,
                Err(_) => return false,
            },
            None if port.is_empty() => {
                if https {
                    443
                } else {
                    80
                }
            }
            None => return false,
        };
        port == self.port && host.eq_ignore_ascii_case(&self.host)
    }
}

impl std::fmt::Display for HttpOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        let default = if self.https { 443 } else { 80 };
        if self.port == default {
            write!(f, "{scheme}://{}", self.host)
        } else {
            write!(f, "{scheme}://{}:{}", self.host, self.port)
        }
    }
}

impl Serialize for HttpOrigin {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One preopened directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DirGrant {
    /// The directory on the host.
    pub host: PathBuf,
    /// Its name in the guest, for example `/data`.
    pub guest: String,
    /// Whether the guest may create, change and delete files in it; read-only otherwise.
    pub write: bool,
}

/// The keys of `[plugin.grants]`.
pub const GRANT_KEYS: &[&str] = &["dirs", "env", "network", "dns", "http"];
/// The keys of one `dirs` entry.
pub const DIR_KEYS: &[&str] = &["host", "guest", "write"];

/// A grant that cannot be honoured on this host, naming the config key.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("key `{key}`: {message}")]
pub struct SandboxError {
    /// The key, for example `grants.dirs[0].host`.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

/// Grants checked against the host: directories exist and open, environment values read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Granted {
    /// Preopened directories, host paths made canonical.
    pub dirs: Vec<DirGrant>,
    /// Granted environment variables that are set on the host (names only: values stay secret).
    pub env: Vec<String>,
    /// Granted environment variables that are not set on the host; the guest does not see them.
    pub env_unset: Vec<String>,
    /// Addresses the guest may connect or send to.
    pub network: Vec<SocketAddr>,
    /// Whether name lookup is allowed.
    pub dns: bool,
    /// Origins the guest may send HTTP requests to.
    pub http: Vec<HttpOrigin>,
    #[serde(skip)]
    env_values: Vec<(String, String)>,
}

impl Grants {
    /// Refuses every kind of grant but those `kept` names (`"env"`, `"dirs"`, `"http"`, ...),
    /// for an entry that is not a component and to which the others would mean nothing; the
    /// error names the first such grant's key and says `why`.
    pub fn only(&self, kept: &[&str], why: &str) -> Result<(), SandboxError> {
        let set = [
            ("dirs", !self.dirs.is_empty()),
            ("env", !self.env.is_empty()),
            ("network", !self.network.is_empty()),
            ("dns", self.dns),
            ("http", !self.http.is_empty()),
        ];
        match set.iter().find(|(kind, set)| *set && !kept.contains(kind)) {
            Some((kind, _)) => Err(SandboxError {
                key: format!("grants.{kind}"),
                message: why.to_string(),
            }),
            None => Ok(()),
        }
    }

    /// Refuses `url` unless its origin is one of the `http` grants; `what` names the peer
    /// (`the MCP server`, `the A2A agent`).
    pub fn require_url(&self, url: &str, what: &str) -> Result<(), SandboxError> {
        if HttpOrigin::url_in(url, &self.http) {
            return Ok(());
        }
        Err(SandboxError {
            key: "grants.http".into(),
            message: format!(
                "{what} `{url}` is not behind an `http` grant of this entry (add its origin to \
                 `grants.http`)"
            ),
        })
    }

    /// Checks every grant against the host: each directory must exist, be a directory and open;
    /// each environment variable's value is read now (a variable that is not set is left out).
    /// Guards no compile cache: the loader uses [`Grants::resolve_avoiding`].
    pub fn resolve(&self) -> Result<Granted, SandboxError> {
        self.resolve_avoiding(None)
    }

    /// [`Grants::resolve`], and no granted directory may reach the compile cache `cache_dir`
    /// (canonical): a grant of the cache directory, of a directory inside it or of one that
    /// contains it (symlinks resolved) fails, naming `grants.dirs[N].host`. The cache holds
    /// native code the host runs, so a plugin that could write there could run code outside
    /// its sandbox (and one that could read it, every other plugin's compiled code).
    pub fn resolve_avoiding(&self, cache_dir: Option<&Path>) -> Result<Granted, SandboxError> {
        let mut granted = Granted {
            network: self.network.clone(),
            dns: self.dns,
            http: self.http.clone(),
            ..Granted::default()
        };
        for (i, dir) in self.dirs.iter().enumerate() {
            let err = |message: String| SandboxError {
                key: format!("grants.dirs[{i}].host"),
                message,
            };
            let host = std::fs::canonicalize(&dir.host)
                .map_err(|e| err(format!("`{}`: {e}", dir.host.display())))?;
            if !host.is_dir() {
                return Err(err(format!("`{}` is not a directory", dir.host.display())));
            }
            if let Some(cache) = cache_dir {
                if host.starts_with(cache) || cache.starts_with(&host) {
                    let place = if host == cache {
                        "is the compile cache".to_string()
                    } else if host.starts_with(cache) {
                        format!("is inside the compile cache `{}`", cache.display())
                    } else {
                        format!("contains the compile cache `{}`", cache.display())
                    };
                    return Err(err(format!(
                        "`{}` ({}) {place}; granting it would expose the compile cache, whose \
                         native code the host runs",
                        dir.host.display(),
                        host.display()
                    )));
                }
            }
            // Open it the way every store will, so a problem shows now and not at the first run.
            std::fs::read_dir(&host)
                .map_err(|e| err(format!("cannot open `{}`: {e}", host.display())))?;
            granted.dirs.push(DirGrant {
                host,
                guest: dir.guest.clone(),
                write: dir.write,
            });
        }
        for name in &self.env {
            match std::env::var(name) {
                Ok(value) => {
                    granted.env.push(name.clone());
                    granted.env_values.push((name.clone(), value));
                }
                Err(_) => granted.env_unset.push(name.clone()),
            }
        }
        Ok(granted)
    }
}

impl Granted {
    /// Whether nothing at all is granted.
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
            && self.env.is_empty()
            && self.env_unset.is_empty()
            && self.network.is_empty()
            && !self.dns
            && self.http.is_empty()
    }

    /// The granted environment variables that are set, with their values (for a process that
    /// is not a component: an ACP agent).
    pub fn env_values(&self) -> &[(String, String)] {
        &self.env_values
    }

    /// These grants as every scope of `scopes` (nearest first, each with who set it) allows
    /// them: a directory stays if it is (within) one of a scope's `dirs`, and loses its write
    /// access where a scope says `write = false`; an origin, an address or a variable stays if
    /// every scope that lists its kind lists it. What a scope removed is returned with who
    /// removed it, for a denial to name.
    pub fn narrowed(&self, scopes: &[(String, seam_core::scope::Scope)]) -> (Granted, Removed) {
        let mut out = self.clone();
        let mut removed = Removed::default();
        for (holder, scope) in scopes {
            // Shared by every removal of this scope: one allocation, not one each.
            let holder: Arc<str> = Arc::from(holder.as_str());
            narrow_dirs(&mut out.dirs, &holder, scope, &mut removed);
            if let Some(http) = &scope.http {
                let gone = out
                    .http
                    .extract_if(.., |o| !http.iter().any(|text| o.written_as(text)));
                removed
                    .0
                    .extend(gone.map(|o| (Removal::Http(o), holder.clone())));
            }
            if let Some(network) = &scope.network {
                let gone = out
                    .network
                    .extract_if(.., |a| !network.iter().any(|text| text.parse() == Ok(*a)));
                removed
                    .0
                    .extend(gone.map(|a| (Removal::Connections(a), holder.clone())));
                if out.network.is_empty() && out.dns {
                    out.dns = false;
                    removed.0.push((Removal::NameLookups, holder.clone()));
                }
            }
            if let Some(env) = &scope.env {
                out.env_values.retain(|(name, _)| env.contains(name));
                let gone = out.env.extract_if(.., |name| !env.contains(name));
                removed
                    .0
                    .extend(gone.map(|name| (Removal::Env(name), holder.clone())));
            }
        }
        (out, removed)
    }
}

/// Narrows granted directories by `holder`'s `scope`: a directory stays if it is (within) one of
/// the scope's `dirs`, and loses its write access where the scope says `write = false`.
fn narrow_dirs(
    dirs: &mut Vec<DirGrant>,
    holder: &Arc<str>,
    scope: &seam_core::scope::Scope,
    removed: &mut Removed,
) {
    if let Some(within) = &scope.dirs {
        let gone = dirs.extract_if(.., |d| !within.iter().any(|s| d.host.starts_with(s)));
        removed
            .0
            .extend(gone.map(|d| (Removal::Dir(d.host), holder.clone())));
    }
    if scope.write == Some(false) {
        for dir in dirs.iter_mut().filter(|d| d.write) {
            dir.write = false;
            removed
                .0
                .push((Removal::Writes(dir.host.clone()), holder.clone()));
        }
    }
}

/// Granted directories as every scope of `scopes` (nearest first) allows them (an ACP agent's
/// file requests are served from these).
pub fn narrowed_dirs(
    dirs: &[DirGrant],
    scopes: &[(String, seam_core::scope::Scope)],
) -> (Vec<DirGrant>, Removed) {
    let mut out = dirs.to_vec();
    let mut removed = Removed::default();
    for (holder, scope) in scopes {
        narrow_dirs(&mut out, &Arc::from(holder.as_str()), scope, &mut removed);
    }
    (out, removed)
}

/// One grant a scope removed. Kept as it was granted, and put in words only when a denial
/// shows it: narrowing runs for every scoped call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// A directory.
    Dir(PathBuf),
    /// Write access to a directory.
    Writes(PathBuf),
    /// An HTTP origin.
    Http(HttpOrigin),
    /// Connections to an address.
    Connections(SocketAddr),
    /// Name lookups, lost with the last address.
    NameLookups,
    /// An environment variable.
    Env(String),
}

impl std::fmt::Display for Removal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Dir(dir) => write!(f, "directory `{}`", dir.display()),
            Self::Writes(dir) => write!(f, "writes to `{}`", dir.display()),
            Self::Http(origin) => write!(f, "HTTP to {origin}"),
            Self::Connections(addr) => write!(f, "connections to {addr}"),
            Self::NameLookups => f.write_str("name lookups"),
            Self::Env(name) => write!(f, "environment variable `{name}`"),
        }
    }
}

/// What scopes removed from a plugin's grants for one call or run: each grant, with the agent
/// or run whose scope removed it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removed(pub Vec<(Removal, Arc<str>)>);

impl Removed {
    /// Who removed `what` (a grant in the words [`Removal`] shows), if a scope did.
    pub fn by(&self, what: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(w, _)| w.to_string() == what)
            .map(|(_, h)| &**h)
    }

    /// Who removed HTTP to `origin`, if a scope did.
    pub fn http_to(&self, origin: &HttpOrigin) -> Option<&str> {
        self.0
            .iter()
            .find(|(w, _)| matches!(w, Removal::Http(o) if o == origin))
            .map(|(_, h)| &**h)
    }

    /// Who removed connections to `addr`, if a scope did.
    pub fn connections_to(&self, addr: SocketAddr) -> Option<&str> {
        self.0
            .iter()
            .find(|(w, _)| matches!(w, Removal::Connections(a) if *a == addr))
            .map(|(_, h)| &**h)
    }

    /// Who removed the last granted address (and so every socket), if a scope did.
    fn every_address(&self) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(w, _)| matches!(w, Removal::Connections(_)))
            .map(|(_, h)| &**h)
    }

    /// Logs, at info, each directory, write access and environment variable a plugin's store
    /// is made without because a scope removed it: a guest cannot be told (WASI has no error
    /// for a variable or a preopen that is not there), so the log says what and who.
    pub fn log_missing(&self, plugin: &str) {
        for (what, holder) in &self.0 {
            let change = match what {
                Removal::Env(name) => format!("add {name} to `env`"),
                Removal::Dir(dir) => {
                    format!("add {} (or a directory above it) to `dirs`", dir.display())
                }
                Removal::Writes(_) => "remove `write = false`".to_string(),
                _ => continue,
            };
            tracing::info!(
                plugin,
                scope = %holder,
                "plugin `{plugin}` is given no {what}, which its grants allow but the scope of \
                 `{holder}` removed for this subtree; to allow it, {change} in the \
                 `config.scope` of the tool entry that delegated to `{holder}`"
            );
        }
    }
}

/// Most denials one store warns about, so a guest looking up names in a loop cannot flood the
/// log.
const SOCKET_WARNINGS: usize = 8;

/// What one store may do with sockets, and the denials it already warned about.
#[derive(Default)]
pub struct SocketWatch {
    dns: bool,
    network: bool,
    /// Whose scope removed name lookups, if one did.
    dns_by: Option<String>,
    /// Whose scope removed the last granted address, if one did.
    network_by: Option<String>,
    warned: Vec<Denial>,
}

/// One denied attempt, as warned about.
#[derive(PartialEq)]
pub enum Denial {
    /// A name lookup without `dns = true`.
    Lookup(String),
    /// A socket (`TCP` or `UDP`) opened without a `network` grant.
    Socket(&'static str),
}

impl SocketWatch {
    /// The watch of a store with `grants`, narrowed by scopes that removed `removed`.
    pub fn new(grants: &Granted, removed: &Removed) -> Self {
        let network = !grants.network.is_empty();
        Self {
            dns: grants.dns,
            network,
            dns_by: (!grants.dns)
                .then(|| {
                    removed
                        .0
                        .iter()
                        .find(|(w, _)| *w == Removal::NameLookups)
                        .map(|(_, h)| h.to_string())
                })
                .flatten(),
            network_by: (!network)
                .then(|| removed.every_address().map(str::to_string))
                .flatten(),
            warned: Vec::new(),
        }
    }

    /// Whether name lookups are granted.
    pub fn dns(&self) -> bool {
        self.dns
    }

    /// Whether any address is granted, so that a socket may be opened.
    pub fn network(&self) -> bool {
        self.network
    }

    /// Logs `denial` once per store, up to [`SOCKET_WARNINGS`].
    pub fn warn(&mut self, plugin: &str, denial: Denial) {
        if self.warned.len() >= SOCKET_WARNINGS || self.warned.contains(&denial) {
            return;
        }
        match (&denial, &self.dns_by, &self.network_by) {
            (Denial::Lookup(name), Some(holder), _) => tracing::warn!(
                plugin,
                name = %name,
                scope = %holder,
                "plugin `{plugin}` looked up the name `{name}`, which its grants allow but the \
                 scope of `{holder}` removed for this subtree (it leaves no `network` address); \
                 to allow it, add the addresses it needs to `network` in the `config.scope` of \
                 the tool entry that delegated to `{holder}`"
            ),
            (Denial::Socket(protocol), _, Some(holder)) => tracing::warn!(
                plugin,
                protocol,
                scope = %holder,
                "plugin `{plugin}` opened a {protocol} socket, which its grants allow but the \
                 scope of `{holder}` removed for this subtree (it leaves no `network` address); \
                 to allow it, add \"IP:port\" to `network` in the `config.scope` of the tool \
                 entry that delegated to `{holder}`"
            ),
            (Denial::Lookup(name), _, _) => tracing::warn!(
                plugin,
                name = %name,
                "plugin `{plugin}` looked up the name `{name}`, which its grants do not allow; to \
                 allow name lookups, set `dns = true` under [plugin.grants]"
            ),
            (Denial::Socket(protocol), _, _) => tracing::warn!(
                plugin,
                protocol,
                "plugin `{plugin}` opened a {protocol} socket, which its grants do not allow; to \
                 allow it to reach an address, add \"IP:port\" to `network` under \
                 [plugin.grants]"
            ),
        }
        self.warned.push(denial);
    }
}

impl Granted {
    /// One line for people: `nothing granted`, or each grant in turn.
    pub fn summary(&self) -> String {
        if self.is_empty() {
            return "nothing granted".into();
        }
        let mut parts = Vec::new();
        for d in &self.dirs {
            let mode = if d.write { "read-write" } else { "read-only" };
            parts.push(format!("dir {} = {} ({mode})", d.guest, d.host.display()));
        }
        if !self.env.is_empty() {
            parts.push(format!("env {}", self.env.join(", ")));
        }
        if !self.env_unset.is_empty() {
            parts.push(format!(
                "env {} (not set on this host)",
                self.env_unset.join(", ")
            ));
        }
        if !self.network.is_empty() {
            let addrs: Vec<String> = self.network.iter().map(ToString::to_string).collect();
            parts.push(format!("connect to {}", addrs.join(", ")));
        }
        if self.dns {
            parts.push("name lookup".into());
        }
        if !self.http.is_empty() {
            let origins: Vec<String> = self.http.iter().map(ToString::to_string).collect();
            parts.push(format!("HTTP to {}", origins.join(", ")));
        }
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_is_matched_as_a_scope_writes_it_without_a_parse() {
        let parsed = |t: &str| t.parse::<HttpOrigin>().unwrap();
        let api = parsed("https://api.example.com");
        for same in [
            "https://api.example.com",
            "https://api.example.com/",
            "HTTPS://API.example.com",
            "https://api.example.com:443",
        ] {
            assert!(api.written_as(same), "{same}");
        }
        for other in [
            "http://api.example.com",
            "https://api.example.com:8443",
            "https://api.example.org",
            "api.example.com",
            "https://api.example.com:x",
        ] {
            assert!(!api.written_as(other), "{other}");
        }
        let local = parsed("http://[::1]:8080");
        assert!(local.written_as("http://[::1]:8080"));
        assert!(!local.written_as("http://[::1]"));
        // Whatever a parse accepts, the cheap match agrees with.
        for text in [
            "http://127.0.0.1:8080",
            "https://x.example:444/",
            "http://[::1]",
        ] {
            assert!(parsed(text).written_as(text), "{text}");
        }
    }

    #[test]
    fn an_authority_with_user_information_names_no_origin() {
        let granted: HttpOrigin = "http://127.0.0.1:8080".parse().expect("an origin");
        let plain: http::Uri = "http://127.0.0.1:8080/v1".parse().expect("a uri");
        assert_eq!(HttpOrigin::of(&plain), Some(granted.clone()));
        for sneaky in [
            "http://127.0.0.1:9@127.0.0.1:8080/v1",
            "http://user@127.0.0.1:8080/",
            "http://a:b@127.0.0.1:8080",
        ] {
            let uri: http::Uri = sneaky.parse().expect("http parses userinfo");
            assert_eq!(HttpOrigin::of(&uri), None, "{sneaky}");
        }
        assert_eq!(
            "http://u@127.0.0.1:8080".parse::<HttpOrigin>(),
            Err(OriginError::UserInfo("http://u@127.0.0.1:8080".into()))
        );
    }
}

#[cfg(test)]
mod narrowing {
    use super::*;
    use seam_core::scope::Scope;

    #[test]
    fn every_scope_of_the_chain_narrows_and_the_one_that_removed_a_grant_is_named() {
        let dir = std::env::temp_dir().canonicalize().unwrap();
        let granted = Granted {
            dirs: vec![DirGrant {
                host: dir.clone(),
                guest: "/data".into(),
                write: true,
            }],
            env: vec!["A".into(), "B".into()],
            network: vec![
                "127.0.0.1:80".parse().unwrap(),
                "127.0.0.1:81".parse().unwrap(),
            ],
            dns: true,
            http: vec![
                "https://a.example".parse().unwrap(),
                "https://b.example".parse().unwrap(),
            ],
            ..Granted::default()
        };
        let near = Scope {
            http: Some(vec!["https://a.example".into(), "https://c.example".into()]),
            write: Some(false),
            ..Scope::default()
        };
        let far = Scope {
            env: Some(vec!["B".into()]),
            network: Some(vec!["127.0.0.1:81".into()]),
            ..Scope::default()
        };
        let (out, removed) = granted.narrowed(&[("spawn-2".into(), near), ("spawn-1".into(), far)]);
        // A scope never grants: `c.example` was not granted, and stays out.
        assert_eq!(
            out.http,
            vec!["https://a.example".parse::<HttpOrigin>().unwrap()]
        );
        assert!(!out.dirs[0].write, "read-only below `spawn-2`");
        assert_eq!(out.env, ["B"]);
        assert_eq!(
            out.network,
            vec!["127.0.0.1:81".parse::<SocketAddr>().unwrap()]
        );
        assert_eq!(removed.by("HTTP to https://b.example"), Some("spawn-2"));
        assert_eq!(removed.by("environment variable `A`"), Some("spawn-1"));
        // Outside every scope's directories, a directory goes.
        let elsewhere = Scope {
            dirs: Some(vec!["/nowhere".into()]),
            ..Scope::default()
        };
        let (out, _) = granted.narrowed(&[("spawn-3".into(), elsewhere)]);
        assert!(out.dirs.is_empty());
    }
}
