//! An A2A entry's Agent Card: fetched when the entry loads, and checked for what Seam needs to
//! honour it before any run starts.

use reqwest::header::HeaderMap;
use seam_sandbox::{EntryError, Granted};

use crate::wire::{self, AgentCard};

/// A card Seam can honour, and what it chose of it.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The card as the agent serves it.
    pub card: AgentCard,
    /// The URL of its A2A 1.0 JSON-RPC interface: where every call goes.
    pub endpoint: String,
    /// Whether it streams (`SendStreamingMessage`); else a run is one `SendMessage`.
    pub streaming: bool,
}

/// The card's URL below the agent's base `url`.
pub fn card_url(url: &str) -> String {
    format!("{}{}", url.trim_end_matches('/'), wire::CARD_PATH)
}

/// Fetches the card of the agent at `url` and checks it; every error names the key to look at
/// (`url`, `grants.http`) and says what the card lacks.
pub async fn fetch(
    http: &reqwest::Client,
    url: &str,
    headers: &HeaderMap,
    timeout: std::time::Duration,
    max_bytes: usize,
    grants: &Granted,
) -> Result<Checked, EntryError> {
    let at = card_url(url);
    let err = |message: String| EntryError::new("url", message);
    let fetched = async {
        let mut response = http
            .get(&at)
            .headers(headers.clone())
            .send()
            .await
            .map_err(|e| err(format!("cannot fetch the Agent Card `{at}`: {}", chain(&e))))?;
        if !response.status().is_success() {
            return Err(err(format!(
                "the Agent Card `{at}` answered HTTP {}",
                response.status()
            )));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| err(format!("cannot read the Agent Card `{at}`: {}", chain(&e))))?
        {
            if body.len() + chunk.len() > max_bytes {
                return Err(err(format!(
                    "the Agent Card `{at}` is larger than {max_bytes} bytes (`config.max_card_bytes`)"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    };
    let body = tokio::time::timeout(timeout, fetched).await.map_err(|_| {
        err(format!(
            "the Agent Card `{at}` did not come within {} ms (`config.timeout_ms`)",
            timeout.as_millis()
        ))
    })??;
    let card: AgentCard = serde_json::from_slice(&body)
        .map_err(|e| err(format!("`{at}` is not an A2A Agent Card: {e}")))?;
    check(card, &at, grants)
}

/// What Seam needs of a card: an A2A 1.0 JSON-RPC interface behind the entry's `http` grants,
/// text input, and no extension it would have to understand.
pub fn check(card: AgentCard, at: &str, grants: &Granted) -> Result<Checked, EntryError> {
    let err = |message: String| EntryError::new("url", message);
    let jsonrpc: Vec<_> = card
        .supported_interfaces
        .iter()
        .filter(|i| i.protocol_binding.eq_ignore_ascii_case(wire::JSONRPC))
        .collect();
    let Some(interface) = jsonrpc
        .iter()
        .find(|i| i.protocol_version.split('.').next() == Some("1"))
    else {
        let offered: Vec<String> = card
            .supported_interfaces
            .iter()
            .map(|i| format!("{} {}", i.protocol_binding, i.protocol_version))
            .collect();
        let offered = if offered.is_empty() {
            "none".to_string()
        } else {
            offered.join(", ")
        };
        return Err(err(format!(
            "the Agent Card `{at}` offers no A2A {} JSON-RPC interface, the only one Seam \
             speaks (it offers: {offered})",
            wire::VERSION
        )));
    };
    let endpoint = interface.url.clone();
    if !seam_sandbox::HttpOrigin::url_in(&endpoint, &grants.http) {
        return Err(EntryError::new(
            "grants.http",
            format!(
                "the Agent Card `{at}` names the interface `{endpoint}`, which is not behind an \
                 `http` grant of this entry (add its origin to `grants.http`)"
            ),
        ));
    }
    let text = |m: &String| m.starts_with("text/") || m == "*/*";
    if !card.default_input_modes.is_empty() && !card.default_input_modes.iter().any(text) {
        return Err(err(format!(
            "the Agent Card `{at}` takes only {} as input; Seam sends text",
            card.default_input_modes.join(", ")
        )));
    }
    let required = card
        .capabilities
        .extensions
        .iter()
        .flatten()
        .find(|e| e.required == Some(true));
    if let Some(extension) = required {
        return Err(err(format!(
            "the Agent Card `{at}` requires the extension `{}`, which Seam does not speak",
            extension.uri
        )));
    }
    let streaming = card.capabilities.streaming == Some(true);
    Ok(Checked {
        card,
        endpoint,
        streaming,
    })
}

/// An error with its causes.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{AgentCapabilities, AgentInterface};

    fn card(interfaces: Vec<AgentInterface>) -> AgentCard {
        serde_json::from_value(serde_json::json!({
            "name": "a", "description": "d", "version": "1", "capabilities": {"streaming": true},
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"], "skills": [],
            "supportedInterfaces": interfaces,
        }))
        .unwrap()
    }

    fn granted(origin: &str) -> Granted {
        let uri: http::Uri = origin.parse().unwrap();
        let mut granted = Granted::default();
        granted.http = vec![seam_sandbox::HttpOrigin::of(&uri).unwrap()];
        granted
    }

    #[test]
    fn a_card_seam_cannot_honour_is_refused_saying_why() {
        let grants = granted("http://127.0.0.1:9");
        let mut v03 = AgentInterface::new("http://127.0.0.1:9/", "JSONRPC");
        v03.protocol_version = "0.3".into();
        let e = check(card(vec![v03]), "c", &grants).unwrap_err();
        assert!(e.to_string().contains("JSONRPC 0.3"), "{e}");
        let grpc = AgentInterface::new("http://127.0.0.1:9/", "GRPC");
        let e = check(card(vec![grpc]), "c", &grants).unwrap_err();
        assert!(e.to_string().contains("no A2A 1.0 JSON-RPC"), "{e}");
        let elsewhere = AgentInterface::new("http://127.0.0.1:10/", "JSONRPC");
        let e = check(card(vec![elsewhere]), "c", &grants).unwrap_err();
        assert_eq!(e.key, "grants.http");
        let good = AgentInterface::new("http://127.0.0.1:9/rpc", "JSONRPC");
        let ok = check(card(vec![good]), "c", &grants).unwrap();
        assert_eq!(ok.endpoint, "http://127.0.0.1:9/rpc");
        assert!(ok.streaming);
        let _ = AgentCapabilities::default();
    }
}
