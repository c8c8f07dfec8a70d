//! The agent card: what an A2A client fetches first to learn where and how to talk to sid.
//!
//! One card serves both protocol versions: `supportedInterfaces` names a JSON-RPC interface for
//! 1.0 and one for 0.3 (the official SDK picks its 0.3 compat transport from the latter), and
//! the HTTP+JSON (REST) binding of 1.0. The
//! card at `/.well-known/agent-card.json` is a pure 1.0 card (it validates against the 1.0
//! schema, which admits no other member); a 0.3-only client reads the 0.3 card's own fields
//! (`url`, `protocolVersion`, `preferredTransport`), which [`add_0_3_fields`] merges in for the
//! older path `/.well-known/agent.json` and for a card request with `A2A-Version: 0.3`.

use axum::http::uri::Authority;
use serde_json::{json, Value};

use crate::config::A2a as A2aConfig;

/// The base URL the card advertises: `public_url`, else `http://` and the request's `Host`
/// (when it is a valid authority; a forged one cannot inject into the card).
pub(crate) fn base_url(cfg: &A2aConfig, host: Option<&str>) -> Option<String> {
    if !cfg.public_url.is_empty() {
        return Some(cfg.public_url.trim_end_matches('/').to_owned());
    }
    let host = host?;
    let authority: Authority = host.parse().ok()?;
    // An authority may carry user info; a Host header has no business doing so.
    (!host.contains('@')).then(|| format!("http://{authority}"))
}

/// The card for a gateway reachable at `base`, taking calls on `rpc_path`; `bearer` when sid
/// requires a token.
pub(crate) fn card(cfg: &A2aConfig, base: &str, rpc_path: &str, bearer: bool) -> Value {
    let rpc = format!("{base}{rpc_path}");
    let rest = format!("{base}{}", crate::http::routes::A2A_REST);
    let mut card = json!({
        "name": cfg.name,
        "description": cfg.description,
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [
            {"url": rpc, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": rpc, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": rest, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        ],
        "provider": {"organization": "wiregate", "url": base},
        "capabilities": {"streaming": true, "pushNotifications": true, "extendedAgentCard": false},
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{
            "id": "sid-coding-agent",
            "name": "Coding agent",
            "description": "Runs a sid coding-agent turn: reads and edits code, runs tools, and \
                            asks for confirmation (input-required) before risky steps.",
            "tags": ["coding", "agent", "sid"],
            "examples": ["Explain what src/main.rs does", "Add error handling to the parser"],
            "inputModes": ["text/plain", "application/json"],
            "outputModes": ["text/plain"],
        }],
    });
    if bearer {
        card["securitySchemes"] =
            json!({"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}});
        card["securityRequirements"] = json!([{"schemes": {"bearer": {"list": []}}}]);
    }
    card
}

/// A strong validator of a card's bytes (the card changes only with the configuration and
/// the `Host` it names, both of which the bytes carry).
pub(crate) fn etag(bytes: &[u8]) -> String {
    // FNV-1a, 64 bits: stable across runs and builds, unlike std's hasher.
    let h = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("\"{h:016x}\"")
}

/// Merges the 0.3 card's own fields into `card` (for a 0.3-only client).
pub(crate) fn add_0_3_fields(card: &mut Value, base: &str, rpc_path: &str) {
    card["url"] = json!(format!("{base}{rpc_path}"));
    card["protocolVersion"] = json!("0.3");
    card["preferredTransport"] = json!("JSONRPC");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_url_is_configured_or_the_hosts_and_never_a_forged_one() {
        let mut cfg = A2aConfig::default();
        assert_eq!(
            base_url(&cfg, Some("127.0.0.1:8080")).as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(
            base_url(&cfg, Some("gw.example")).as_deref(),
            Some("http://gw.example")
        );
        assert_eq!(base_url(&cfg, Some("evil.example/x?y")), None);
        assert_eq!(base_url(&cfg, Some("user@evil.example")), None);
        assert_eq!(base_url(&cfg, None), None);
        cfg.public_url = "https://agents.example/sid/".into();
        assert_eq!(
            base_url(&cfg, Some("ignored")).as_deref(),
            Some("https://agents.example/sid")
        );
    }

    #[test]
    fn the_etag_follows_the_bytes() {
        assert_eq!(etag(b"{}"), etag(b"{}"));
        assert_ne!(etag(b"{}"), etag(b"{ }"));
        assert!(etag(b"x").starts_with('"') && etag(b"x").len() == 18);
    }

    #[test]
    fn one_card_names_both_versions_and_keeps_the_0_3_fields() {
        let c = card(&A2aConfig::default(), "http://h:1", "/rpc", false);
        let ifaces = c["supportedInterfaces"].as_array().unwrap();
        let versions: Vec<_> = ifaces.iter().map(|i| &i["protocolVersion"]).collect();
        assert_eq!(versions, [&json!("1.0"), &json!("0.3"), &json!("1.0")]);
        assert!(ifaces[..2].iter().all(|i| i["url"] == "http://h:1/rpc"));
        assert_eq!(ifaces[2]["url"], "http://h:1/a2a/rest");
        assert_eq!(ifaces[2]["protocolBinding"], "HTTP+JSON");
        assert_eq!(c["capabilities"]["streaming"], true);
        assert_eq!(
            c["defaultInputModes"],
            json!(["text/plain", "application/json"])
        );
        assert!(c.get("url").is_none(), "a pure 1.0 card");
        assert!(c.get("securitySchemes").is_none());
        let mut old = c.clone();
        add_0_3_fields(&mut old, "http://h:1", "/rpc");
        assert_eq!(old["url"], "http://h:1/rpc");
        assert_eq!(old["protocolVersion"], "0.3");
        let secured = card(&A2aConfig::default(), "http://h:1", "/rpc", true);
        assert_eq!(
            secured["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
            "Bearer"
        );
    }
}
