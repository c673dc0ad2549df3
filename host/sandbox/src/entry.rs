//! Reading a config entry's `[plugin.grants]` and `[plugin.limits]` tables. Every error names
//! the key (`grants.dirs[1].guest`, `limits.memory_mb`, ...); the caller adds file and entry.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::Path;

use toml::Value;

use super::{
    key, DirGrant, Granted, Grants, HttpOrigin, LimitOverrides, OnConcurrency, DIR_KEYS,
    GRANT_KEYS, LIMIT_KEYS, MAX_MEMORY_MB,
};

/// Longest time budget a config may give (`cpu_ms_per_call`, `run_timeout_ms`): a week.
const MAX_MS: u64 = 7 * 24 * 3600 * 1000;

/// Largest `max_write_mb` a config may give: 1 TiB.
const MAX_WRITE_MB: u64 = 1 << 20;

/// A `[plugin.grants]` or `[plugin.limits]` value that is wrong, naming its key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct EntryError {
    /// The key, for example `grants.dirs[1].guest` or `limits.memory_mb`.
    pub key: String,
    /// What is wrong, in words that name the key.
    message: String,
}

impl EntryError {
    pub fn new(key: impl Into<String>, message: String) -> Self {
        Self {
            key: key.into(),
            message,
        }
    }
}

fn table<'a>(value: &'a Value, key: &str, allowed: &[&str]) -> Result<&'a toml::Table, EntryError> {
    let table = value
        .as_table()
        .ok_or_else(|| EntryError::new(key, format!("key `{key}` must be a table")))?;
    if let Some(unknown) = table.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(EntryError::new(
            format!("{key}.{unknown}"),
            format!(
                "key `{key}.{unknown}` is unknown (expected one of {})",
                allowed.join(", ")
            ),
        ));
    }
    Ok(table)
}

fn string<'a>(value: &'a Value, key: &str) -> Result<&'a str, EntryError> {
    match value.as_str() {
        Some(s) if !s.is_empty() && !s.contains('\0') => Ok(s),
        Some(_) => Err(EntryError::new(
            key,
            format!("key `{key}` must be a non-empty string"),
        )),
        None => Err(EntryError::new(
            key,
            format!("key `{key}` must be a string"),
        )),
    }
}

fn array<'a>(value: &'a Value, key: &str) -> Result<&'a [Value], EntryError> {
    value
        .as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| EntryError::new(key, format!("key `{key}` must be an array")))
}

/// Reads `[plugin.grants]`. Relative `host` paths resolve against `base`, the config's folder;
/// whether they exist is checked when the plugin loads.
pub fn parse_grants(value: &Value, base: &Path) -> Result<Grants, EntryError> {
    let t = table(value, "grants", GRANT_KEYS)?;
    let mut grants = Grants::default();
    if let Some(dirs) = t.get("dirs") {
        let mut guests = HashSet::new();
        for (i, dir) in array(dirs, "grants.dirs")?.iter().enumerate() {
            let key = format!("grants.dirs[{i}]");
            let d = table(dir, &key, DIR_KEYS)?;
            let field = |name: &str| {
                d.get(name).ok_or_else(|| {
                    EntryError::new(
                        format!("{key}.{name}"),
                        format!("key `{key}.{name}` is required"),
                    )
                })
            };
            let host = Path::new(string(field("host")?, &format!("{key}.host"))?);
            let guest = string(field("guest")?, &format!("{key}.guest"))?;
            let write = match d.get("write") {
                None => false,
                Some(v) => v.as_bool().ok_or_else(|| {
                    EntryError::new(
                        format!("{key}.write"),
                        format!("key `{key}.write` must be a boolean"),
                    )
                })?,
            };
            if !guests.insert(guest.to_string()) {
                return Err(EntryError::new(
                    format!("{key}.guest"),
                    format!("key `{key}.guest`: `{guest}` is granted twice"),
                ));
            }
            grants.dirs.push(DirGrant {
                host: if host.is_relative() {
                    base.join(host)
                } else {
                    host.to_path_buf()
                },
                guest: guest.to_string(),
                write,
            });
        }
    }
    if let Some(env) = t.get("env") {
        for (i, name) in array(env, "grants.env")?.iter().enumerate() {
            let key = format!("grants.env[{i}]");
            let name = string(name, &key)?;
            if name.contains('=') {
                return Err(EntryError::new(
                    &key,
                    format!("key `{key}`: `{name}` is not a variable name"),
                ));
            }
            if grants.env.iter().any(|n| n == name) {
                return Err(EntryError::new(
                    &key,
                    format!("key `{key}`: `{name}` is granted twice"),
                ));
            }
            grants.env.push(name.to_string());
        }
    }
    if let Some(network) = t.get("network") {
        for (i, addr) in array(network, "grants.network")?.iter().enumerate() {
            let key = format!("grants.network[{i}]");
            let text = string(addr, &key)?;
            let addr: SocketAddr = text.parse().map_err(|_| {
                EntryError::new(
                    &key,
                    format!(
                        "key `{key}`: `{text}` is not an IP address with a port, such as \
                         `127.0.0.1:8080` or `[::1]:8080`"
                    ),
                )
            })?;
            if !grants.network.contains(&addr) {
                grants.network.push(addr);
            }
        }
    }
    if let Some(http) = t.get("http") {
        for (i, origin) in array(http, "grants.http")?.iter().enumerate() {
            let key = format!("grants.http[{i}]");
            let origin: HttpOrigin = string(origin, &key)?
                .parse()
                .map_err(|e| EntryError::new(&key, format!("key `{key}`: {e}")))?;
            if !grants.http.contains(&origin) {
                grants.http.push(origin);
            }
        }
    }
    if let Some(dns) = t.get("dns") {
        grants.dns = dns.as_bool().ok_or_else(|| {
            EntryError::new("grants.dns", "key `grants.dns` must be a boolean".into())
        })?;
    }
    Ok(grants)
}

/// Reads `[plugin.limits]`: each value must be a positive integer within its range, and
/// `on_concurrency` one of `wait` and `refuse`.
pub fn parse_limits(value: &Value) -> Result<LimitOverrides, EntryError> {
    let t = table(value, "limits", LIMIT_KEYS)?;
    let int = |name: &str, max: u64| -> Result<Option<u64>, EntryError> {
        let Some(v) = t.get(name) else {
            return Ok(None);
        };
        match v.as_integer() {
            Some(n) if n >= 1 && n.unsigned_abs() <= max => Ok(Some(n.unsigned_abs())),
            _ => Err(EntryError::new(
                format!("limits.{name}"),
                format!("key `limits.{name}` must be an integer from 1 to {max}"),
            )),
        }
    };
    let on_concurrency = match t.get(key::ON_CONCURRENCY) {
        None => None,
        Some(v) => Some(match v.as_str() {
            Some("wait") => OnConcurrency::Wait,
            Some("refuse") => OnConcurrency::Refuse,
            _ => {
                return Err(EntryError::new(
                    "limits.on_concurrency",
                    "key `limits.on_concurrency` must be `\"wait\"` or `\"refuse\"`".into(),
                ))
            }
        }),
    };
    Ok(LimitOverrides {
        memory_mb: int(key::MEMORY_MB, MAX_MEMORY_MB)?,
        table_elements: int(key::TABLE_ELEMENTS, 10_000_000)?,
        instances: int(key::INSTANCES, 10_000)?,
        cpu_ms_per_call: int(key::CPU_MS_PER_CALL, MAX_MS)?,
        describe_cpu_ms: int(key::DESCRIBE_CPU_MS, MAX_MS)?,
        run_timeout_ms: int(key::RUN_TIMEOUT_MS, MAX_MS)?,
        max_concurrent_runs: int(key::MAX_CONCURRENT_RUNS, 100_000)?,
        on_concurrency,
        max_output_bytes: int(key::MAX_OUTPUT_BYTES, 1 << 30)?,
        host_memory_mb: int(key::HOST_MEMORY_MB, MAX_MEMORY_MB)?,
        max_runs_per_call: int(key::MAX_RUNS_PER_CALL, 100_000)?,
        max_queued_messages: int(key::MAX_QUEUED_MESSAGES, 100_000)?,
        max_write_mb: int(key::MAX_WRITE_MB, MAX_WRITE_MB)?,
        max_files: int(key::MAX_FILES, 100_000_000)?,
        http_timeout_ms: int(key::HTTP_TIMEOUT_MS, MAX_MS)?,
        max_http_mb: int(key::MAX_HTTP_MB, 1 << 20)?,
        max_http_connections: int(key::MAX_HTTP_CONNECTIONS, 100_000)?,
    })
}

/// The HTTP headers an entry's `config.headers` names (`{ Authorization = "VAR" }`), each valued
/// from a variable of `granted` that is set: credentials reach the peer, never a plugin or the
/// config file. The error names the header's key.
pub fn header_values(
    granted: &Granted,
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, EntryError> {
    let mut out = Vec::with_capacity(headers.len());
    for (header, var) in headers {
        let Some((_, value)) = granted.env_values().iter().find(|(k, _)| k == var) else {
            return Err(EntryError::new(
                "config.headers",
                format!(
                    "key `config.headers.{header}`: `{var}` is not a granted environment \
                     variable that is set (list it in `grants.env`)"
                ),
            ));
        };
        out.push((header.clone(), value.clone()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Limits;

    fn toml(text: &str) -> Value {
        text.parse::<toml::Table>()
            .map(Value::Table)
            .expect("test TOML parses")
    }

    /// The error's text, once checked that it names the key the error carries.
    fn text(e: EntryError) -> String {
        let text = e.to_string();
        assert!(
            text.starts_with(&format!("key `{}`", e.key)),
            "{text} names {}",
            e.key
        );
        text
    }

    fn limits(text: &str) -> Result<LimitOverrides, EntryError> {
        parse_limits(&toml(text))
    }

    #[test]
    fn no_overrides_leave_the_defaults() {
        let base = Limits::default();
        assert_eq!(limits("").unwrap(), LimitOverrides::default());
        assert_eq!(LimitOverrides::default().apply(&base), base);
    }

    #[test]
    fn every_key_overrides_its_limit_and_only_it() {
        let base = Limits::default();
        let all = limits(
            "memory_mb = 32\ntable_elements = 500\ninstances = 7\ncpu_ms_per_call = 1500\n\
             run_timeout_ms = 2500\nmax_concurrent_runs = 3\non_concurrency = \"refuse\"\n\
             max_output_bytes = 4096\n",
        )
        .unwrap();
        assert_eq!(
            all.apply(&base),
            Limits {
                memory_bytes: 32 << 20,
                table_elements: 500,
                instances: 7,
                cpu_per_call: Duration::from_millis(1500),
                run_timeout: Duration::from_millis(2500),
                max_concurrent_runs: 3,
                on_concurrency: OnConcurrency::Refuse,
                max_output_bytes: 4096,
                // Keys not given here keep the base's values.
                ..base.clone()
            }
        );
        // One key at a time: that field changes, every other one keeps the base's value.
        let one = |text: &str| limits(text).unwrap().apply(&base);
        assert_eq!(
            one("memory_mb = 1"),
            Limits {
                memory_bytes: 1 << 20,
                ..base.clone()
            }
        );
        assert_eq!(
            one("run_timeout_ms = 1"),
            Limits {
                run_timeout: Duration::from_millis(1),
                ..base.clone()
            }
        );
        assert_eq!(
            one("on_concurrency = \"wait\""),
            Limits {
                on_concurrency: OnConcurrency::Wait,
                ..base.clone()
            }
        );
        // Applied over another base, not over the defaults.
        let custom = Limits {
            instances: 2,
            max_output_bytes: 10,
            ..base.clone()
        };
        assert_eq!(
            limits("instances = 9").unwrap().apply(&custom),
            Limits {
                instances: 9,
                ..custom.clone()
            }
        );
        // The largest memory a config may ask for does not overflow.
        assert_eq!(
            one(&format!("memory_mb = {MAX_MEMORY_MB}")).memory_bytes,
            (MAX_MEMORY_MB as usize) << 20
        );
    }

    #[test]
    fn limit_values_outside_their_range_name_the_key_and_the_range() {
        for (text, message) in [
            (
                "memory_mb = 0",
                "key `limits.memory_mb` must be an integer from 1 to 4096",
            ),
            (
                "memory_mb = 4097",
                "key `limits.memory_mb` must be an integer from 1 to 4096",
            ),
            (
                "memory_mb = -5",
                "key `limits.memory_mb` must be an integer from 1 to 4096",
            ),
            (
                "memory_mb = 1.5",
                "key `limits.memory_mb` must be an integer from 1 to 4096",
            ),
            (
                "memory_mb = \"64\"",
                "key `limits.memory_mb` must be an integer from 1 to 4096",
            ),
            (
                "table_elements = 10000001",
                "key `limits.table_elements` must be an integer from 1 to 10000000",
            ),
            (
                "instances = 0",
                "key `limits.instances` must be an integer from 1 to 10000",
            ),
            (
                "cpu_ms_per_call = 604800001",
                "key `limits.cpu_ms_per_call` must be an integer from 1 to 604800000",
            ),
            (
                "run_timeout_ms = 0",
                "key `limits.run_timeout_ms` must be an integer from 1 to 604800000",
            ),
            (
                "max_concurrent_runs = 100001",
                "key `limits.max_concurrent_runs` must be an integer from 1 to 100000",
            ),
            (
                "max_output_bytes = 1073741825",
                "key `limits.max_output_bytes` must be an integer from 1 to 1073741824",
            ),
            (
                "on_concurrency = \"queue\"",
                "key `limits.on_concurrency` must be `\"wait\"` or `\"refuse\"`",
            ),
            (
                "on_concurrency = true",
                "key `limits.on_concurrency` must be `\"wait\"` or `\"refuse\"`",
            ),
        ] {
            assert_eq!(
                super::tests::text(limits(text).unwrap_err()),
                message,
                "{text}"
            );
        }
        // The bounds themselves are accepted.
        for text in [
            "memory_mb = 1",
            "memory_mb = 4096",
            "max_output_bytes = 1073741824",
        ] {
            assert!(limits(text).is_ok(), "{text}");
        }
    }

    #[test]
    fn unknown_limit_keys_and_non_tables_are_refused() {
        let err = text(limits("memory = 3").unwrap_err());
        assert!(
            err.starts_with("key `limits.memory` is unknown (expected one of memory_mb, "),
            "{err}"
        );
        for key in LIMIT_KEYS {
            assert!(err.contains(key), "{err} lists {key}");
        }
        assert_eq!(
            text(parse_limits(&Value::Integer(3)).unwrap_err()),
            "key `limits` must be a table"
        );
    }

    #[test]
    fn grants_resolve_relative_paths_and_name_each_bad_key() {
        let base = Path::new("/etc/seam");
        let grants = parse_grants(
            &toml(
                "dirs = [{ host = \"data\", guest = \"/data\" }, \
                 { host = \"/abs\", guest = \"/out\", write = true }]\n\
                 env = [\"HOME\", \"LANG\"]\n\
                 network = [\"127.0.0.1:8080\", \"[::1]:9\", \"127.0.0.1:8080\"]\n\
                 dns = true\n",
            ),
            base,
        )
        .unwrap();
        assert_eq!(
            grants.dirs,
            [
                DirGrant {
                    host: base.join("data"),
                    guest: "/data".into(),
                    write: false,
                },
                DirGrant {
                    host: "/abs".into(),
                    guest: "/out".into(),
                    write: true,
                },
            ]
        );
        assert_eq!(grants.env, ["HOME", "LANG"]);
        assert_eq!(
            grants.network,
            [
                "127.0.0.1:8080".parse::<SocketAddr>().unwrap(),
                "[::1]:9".parse().unwrap()
            ],
            "a repeated address is kept once"
        );
        assert!(grants.dns);
        let http = parse_grants(
            &toml("http = [\"https://API.example.com/\", \"https://api.example.com:443\", \"http://127.0.0.1:8080\"]"),
            base,
        )
        .unwrap()
        .http;
        let shown: Vec<String> = http.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            ["https://api.example.com", "http://127.0.0.1:8080"],
            "one origin however it is written"
        );
        assert_eq!(
            parse_grants(&toml(""), base).unwrap(),
            Grants::default(),
            "nothing unless granted"
        );

        for (text, message) in [
            (
                "files = []",
                "key `grants.files` is unknown (expected one of dirs, env, network, dns, http)",
            ),
            ("dirs = {}", "key `grants.dirs` must be an array"),
            ("dirs = [3]", "key `grants.dirs[0]` must be a table"),
            (
                "dirs = [{ guest = \"/g\" }]",
                "key `grants.dirs[0].host` is required",
            ),
            (
                "dirs = [{ host = \"h\", guest = \"/g\" }, { host = \"h\" }]",
                "key `grants.dirs[1].guest` is required",
            ),
            (
                "dirs = [{ host = \"\", guest = \"/g\" }]",
                "key `grants.dirs[0].host` must be a non-empty string",
            ),
            (
                "dirs = [{ host = \"h\", guest = 1 }]",
                "key `grants.dirs[0].guest` must be a string",
            ),
            (
                "dirs = [{ host = \"h\", guest = \"/g\", write = \"yes\" }]",
                "key `grants.dirs[0].write` must be a boolean",
            ),
            (
                "dirs = [{ host = \"h\", guest = \"/g\", mode = 1 }]",
                "key `grants.dirs[0].mode` is unknown (expected one of host, guest, write)",
            ),
            (
                "dirs = [{ host = \"a\", guest = \"/g\" }, { host = \"b\", guest = \"/g\" }]",
                "key `grants.dirs[1].guest`: `/g` is granted twice",
            ),
            (
                "env = [\"A=B\"]",
                "key `grants.env[0]`: `A=B` is not a variable name",
            ),
            (
                "env = [\"A\", \"A\"]",
                "key `grants.env[1]`: `A` is granted twice",
            ),
            (
                "env = [\"\"]",
                "key `grants.env[0]` must be a non-empty string",
            ),
            (
                "network = [\"localhost:80\"]",
                "key `grants.network[0]`: `localhost:80` is not an IP address with a port, such \
                 as `127.0.0.1:8080` or `[::1]:8080`",
            ),
            (
                "network = [\"127.0.0.1\"]",
                "key `grants.network[0]`: `127.0.0.1` is not an IP address with a port, such as \
                 `127.0.0.1:8080` or `[::1]:8080`",
            ),
            ("dns = \"yes\"", "key `grants.dns` must be a boolean"),
            (
                "http = [\"https://api.example.com/v1\"]",
                "key `grants.http[0]`: `https://api.example.com/v1`: an origin has no path or \
                 query; the grant covers every path",
            ),
            (
                "http = [\"ftp://example.com\"]",
                "key `grants.http[0]`: `ftp://example.com`: the scheme must be http or https, \
                 not `ftp`",
            ),
            (
                "http = [\"https://user:pw@example.com\"]",
                "key `grants.http[0]`: `https://user:pw@example.com`: an origin has no user name \
                 or password",
            ),
            (
                "http = [\"example.com\"]",
                "key `grants.http[0]`: `example.com` is not an origin: write the scheme, the \
                 host and, if not the default, the port, such as `https://api.deepseek.com` or \
                 `http://127.0.0.1:8080`",
            ),
        ] {
            assert_eq!(
                super::tests::text(parse_grants(&toml(text), base).unwrap_err()),
                message,
                "{text}"
            );
        }
    }
}
