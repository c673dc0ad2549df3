//! Reading a config entry's `[plugin.grants]` and `[plugin.limits]` tables. Every error names
//! the key (`grants.dirs[1].guest`, `limits.memory_mb`, ...); the caller adds file and entry.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::Path;

use toml::Value;

use super::{
    key, DirGrant, Grants, LimitOverrides, OnConcurrency, DIR_KEYS, GRANT_KEYS, LIMIT_KEYS,
    MAX_MEMORY_MB,
};

/// Longest time budget a config may give (`cpu_ms_per_call`, `run_timeout_ms`): a week.
const MAX_MS: u64 = 7 * 24 * 3600 * 1000;

fn table<'a>(value: &'a Value, key: &str, allowed: &[&str]) -> Result<&'a toml::Table, String> {
    let table = value
        .as_table()
        .ok_or_else(|| format!("key `{key}` must be a table"))?;
    if let Some(unknown) = table.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!(
            "key `{key}.{unknown}` is unknown (expected one of {})",
            allowed.join(", ")
        ));
    }
    Ok(table)
}

fn string<'a>(value: &'a Value, key: &str) -> Result<&'a str, String> {
    match value.as_str() {
        Some(s) if !s.is_empty() && !s.contains('\0') => Ok(s),
        Some(_) => Err(format!("key `{key}` must be a non-empty string")),
        None => Err(format!("key `{key}` must be a string")),
    }
}

fn array<'a>(value: &'a Value, key: &str) -> Result<&'a [Value], String> {
    value
        .as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| format!("key `{key}` must be an array"))
}

/// Reads `[plugin.grants]`. Relative `host` paths resolve against `base`, the config's folder;
/// whether they exist is checked when the plugin loads.
pub fn parse_grants(value: &Value, base: &Path) -> Result<Grants, String> {
    let t = table(value, "grants", GRANT_KEYS)?;
    let mut grants = Grants::default();
    if let Some(dirs) = t.get("dirs") {
        let mut guests = HashSet::new();
        for (i, dir) in array(dirs, "grants.dirs")?.iter().enumerate() {
            let key = format!("grants.dirs[{i}]");
            let d = table(dir, &key, DIR_KEYS)?;
            let field = |name: &str| {
                d.get(name)
                    .ok_or_else(|| format!("key `{key}.{name}` is required"))
            };
            let host = Path::new(string(field("host")?, &format!("{key}.host"))?);
            let guest = string(field("guest")?, &format!("{key}.guest"))?;
            let write = match d.get("write") {
                None => false,
                Some(v) => v
                    .as_bool()
                    .ok_or_else(|| format!("key `{key}.write` must be a boolean"))?,
            };
            if !guests.insert(guest.to_string()) {
                return Err(format!("key `{key}.guest`: `{guest}` is granted twice"));
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
                return Err(format!("key `{key}`: `{name}` is not a variable name"));
            }
            if grants.env.iter().any(|n| n == name) {
                return Err(format!("key `{key}`: `{name}` is granted twice"));
            }
            grants.env.push(name.to_string());
        }
    }
    if let Some(network) = t.get("network") {
        for (i, addr) in array(network, "grants.network")?.iter().enumerate() {
            let key = format!("grants.network[{i}]");
            let text = string(addr, &key)?;
            let addr: SocketAddr = text.parse().map_err(|_| {
                format!(
                    "key `{key}`: `{text}` is not an IP address with a port, such as \
                     `127.0.0.1:8080` or `[::1]:8080`"
                )
            })?;
            if !grants.network.contains(&addr) {
                grants.network.push(addr);
            }
        }
    }
    if let Some(dns) = t.get("dns") {
        grants.dns = dns.as_bool().ok_or("key `grants.dns` must be a boolean")?;
    }
    Ok(grants)
}

/// Reads `[plugin.limits]`: each value must be a positive integer within its range, and
/// `on_concurrency` one of `wait` and `refuse`.
pub fn parse_limits(value: &Value) -> Result<LimitOverrides, String> {
    let t = table(value, "limits", LIMIT_KEYS)?;
    let int = |name: &str, max: u64| -> Result<Option<u64>, String> {
        let Some(v) = t.get(name) else {
            return Ok(None);
        };
        match v.as_integer() {
            Some(n) if n >= 1 && n.unsigned_abs() <= max => Ok(Some(n.unsigned_abs())),
            _ => Err(format!(
                "key `limits.{name}` must be an integer from 1 to {max}"
            )),
        }
    };
    let on_concurrency = match t.get(key::ON_CONCURRENCY) {
        None => None,
        Some(v) => Some(match v.as_str() {
            Some("wait") => OnConcurrency::Wait,
            Some("refuse") => OnConcurrency::Refuse,
            _ => {
                return Err("key `limits.on_concurrency` must be `\"wait\"` or `\"refuse\"`".into())
            }
        }),
    };
    Ok(LimitOverrides {
        memory_mb: int(key::MEMORY_MB, MAX_MEMORY_MB)?,
        table_elements: int(key::TABLE_ELEMENTS, 10_000_000)?,
        instances: int(key::INSTANCES, 10_000)?,
        cpu_ms_per_call: int(key::CPU_MS_PER_CALL, MAX_MS)?,
        run_timeout_ms: int(key::RUN_TIMEOUT_MS, MAX_MS)?,
        max_concurrent_runs: int(key::MAX_CONCURRENT_RUNS, 100_000)?,
        on_concurrency,
        max_output_bytes: int(key::MAX_OUTPUT_BYTES, 1 << 30)?,
        host_memory_mb: int(key::HOST_MEMORY_MB, MAX_MEMORY_MB)?,
        max_runs_per_call: int(key::MAX_RUNS_PER_CALL, 100_000)?,
        max_queued_messages: int(key::MAX_QUEUED_MESSAGES, 100_000)?,
    })
}
