//! A registry's credentials: the environment variables `[oci.auth."REGISTRY"]` names, else the
//! Docker/OCI client config file (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`:
//! `auths."REGISTRY".auth`, the base64 of `user:password`), else none. They are the host's
//! alone: they go to the registry client and nowhere else, and no plugin's environment has
//! them unless its own `env` grant names the variable.

use std::path::PathBuf;

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

use super::settings::{OciSettings, SettingsFrom};
use super::OciError;

/// The Docker client config file, as far as credentials go.
#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: std::collections::BTreeMap<String, DockerAuth>,
}

#[derive(Deserialize)]
struct DockerAuth {
    auth: Option<String>,
}

/// Where the Docker client config file is.
fn docker_config_path() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG") {
        return Some(PathBuf::from(dir).join("config.json"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker").join("config.json"))
}

/// The credentials for `registry`, with where they came from (for a refusal to name), or
/// `None` for anonymous access.
pub fn credentials(
    settings: &OciSettings,
    registry: &str,
) -> Result<(RegistryAuth, Option<String>), OciError> {
    let error = |reason: String| OciError::Credentials {
        registry: registry.to_string(),
        reason,
    };
    if let Some(env) = settings.auth.get(registry) {
        let named = match settings.from {
            SettingsFrom::Config => format!("`[oci.auth.\"{registry}\"]`"),
            SettingsFrom::Flags => "--username-env or --password-env".to_string(),
        };
        let read = |name: &str| {
            std::env::var(name).map_err(|_| {
                error(format!(
                    "{named} names the environment variable `{name}`, which is not set"
                ))
            })
        };
        let auth = RegistryAuth::Basic(read(&env.username_env)?, read(&env.password_env)?);
        let given = format!(
            "`${}` and `${}` ({})",
            env.username_env,
            env.password_env,
            settings.from.naming(registry)
        );
        return Ok((auth, Some(given)));
    }
    let Some(path) = docker_config_path() else {
        return Ok((RegistryAuth::Anonymous, None));
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok((RegistryAuth::Anonymous, None))
        }
        Err(e) => return Err(error(format!("cannot read `{}`: {e}", path.display()))),
    };
    let config: DockerConfig = serde_json::from_str(&text).map_err(|e| {
        error(format!(
            "`{}` is not a Docker config file: {e}",
            path.display()
        ))
    })?;
    // Docker writes some registries with a scheme (Docker Hub's `https://index.docker.io/v1/`).
    let found = [
        registry.to_string(),
        format!("https://{registry}"),
        format!("http://{registry}"),
    ]
    .iter()
    .find_map(|key| config.auths.get(key).and_then(|a| a.auth.clone()));
    let Some(encoded) = found else {
        return Ok((RegistryAuth::Anonymous, None));
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| {
            error(format!(
                "`auths.\"{registry}\".auth` in `{}` is not base64 of `user:password`",
                path.display()
            ))
        })?;
    match decoded.split_once(':') {
        Some((user, password)) => Ok((
            RegistryAuth::Basic(user.into(), password.into()),
            Some(format!("the Docker config file `{}`", path.display())),
        )),
        None => Err(error(format!(
            "`auths.\"{registry}\".auth` in `{}` is not base64 of `user:password`",
            path.display()
        ))),
    }
}
