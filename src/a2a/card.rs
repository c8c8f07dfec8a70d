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

/// The base URL the card advertises: `public_url`, else the request's scheme (`https` when
/// the client came over TLS, or a trusted proxy says it did, so callers send their
/// credentials over TLS too) and its `Host` (when it is a valid authority; a forged one cannot
/// inject into the card).
pub(crate) fn base_url(cfg: &A2aConfig, https: bool, host: Option<&str>) -> Option<String> {
    if !cfg.public_url.is_empty() {
        return Some(cfg.public_url.trim_end_matches('/').to_owned());
    }
    let host = host?;
    let authority: Authority = host.parse().ok()?;
    let scheme = if https { "https" } else { "http" };
    // An authority may carry user info; a Host header has no business doing so.
    (!host.contains('@')).then(|| format!("{scheme}://{authority}"))
}

/// How the card says callers prove who they are: the credentials the configuration checks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Security {
    /// A bearer token: `sid.bearer_tokens`, or JWTs of `[[auth.jwt]]` (`jwt`).
    pub(crate) bearer: bool,
    pub(crate) jwt: bool,
    /// The API key header of `[auth.api_keys]`.
    pub(crate) api_key: Option<String>,
    /// Client certificates (`[auth.mtls]`).
    pub(crate) mtls: bool,
    /// Whether a credential is required (`auth.mode = "required"`, or sid's tokens): the card
    /// then lists each scheme as one way to meet its requirement.
    pub(crate) required: bool,
}

impl Security {
    /// Whether callers are identified (a JWT, an API key or a certificate names them): the
    /// extended card then answers them.
    pub(crate) fn identifies(&self) -> bool {
        self.jwt || self.api_key.is_some() || self.mtls
    }

    /// Its `securitySchemes` and `securityRequirements` (A2A 1.0's shapes), set on `card`
    /// when there is any.
    fn apply(&self, card: &mut Value) {
        let mut schemes = serde_json::Map::new();
        if self.bearer || self.jwt {
            let mut http = json!({"scheme": "Bearer"});
            if self.jwt {
                http["bearerFormat"] = json!("JWT");
            }
            schemes.insert("bearer".into(), json!({"httpAuthSecurityScheme": http}));
        }
        if let Some(header) = &self.api_key {
            schemes.insert(
                "apiKey".into(),
                json!({"apiKeySecurityScheme": {"location": "header", "name": header}}),
            );
        }
        if self.mtls {
            schemes.insert("mtls".into(), json!({"mtlsSecurityScheme": {}}));
        }
        if schemes.is_empty() {
            return;
        }
        if self.required {
            let any: Vec<Value> = schemes
                .keys()
                .map(|k| json!({"schemes": {k.clone(): {"list": []}}}))
                .collect();
            card["securityRequirements"] = Value::Array(any);
        }
        card["securitySchemes"] = Value::Object(schemes);
    }
}

/// The card for a gateway reachable at `base`, taking calls on `rpc_path`, its callers proving
/// who they are as `security` says.
pub(crate) fn card(cfg: &A2aConfig, base: &str, rpc_path: &str, security: &Security) -> Value {
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
        "capabilities": {
            "streaming": true,
            "pushNotifications": true,
            "extendedAgentCard": security.identifies(),
        },
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
    security.apply(&mut card);
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
    card["supportsAuthenticatedExtendedCard"] = card["capabilities"]["extendedAgentCard"].clone();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_url_is_configured_or_the_hosts_and_never_a_forged_one() {
        let mut cfg = A2aConfig::default();
        assert_eq!(
            base_url(&cfg, false, Some("127.0.0.1:8080")).as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(
            base_url(&cfg, true, Some("gw.example")).as_deref(),
            Some("https://gw.example")
        );
        assert_eq!(base_url(&cfg, false, Some("evil.example/x?y")), None);
        assert_eq!(base_url(&cfg, true, Some("user@evil.example")), None);
        assert_eq!(base_url(&cfg, false, None), None);
        cfg.public_url = "https://agents.example/sid/".into();
        assert_eq!(
            base_url(&cfg, false, Some("ignored")).as_deref(),
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
        let c = card(
            &A2aConfig::default(),
            "http://h:1",
            "/rpc",
            &Security::default(),
        );
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
        let sid_tokens = Security {
            bearer: true,
            required: true,
            ..Security::default()
        };
        let secured = card(&A2aConfig::default(), "http://h:1", "/rpc", &sid_tokens);
        assert_eq!(
            secured["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
            "Bearer"
        );
        assert_eq!(
            secured["securityRequirements"],
            json!([{"schemes": {"bearer": {"list": []}}}])
        );
    }

    #[test]
    fn the_card_names_every_credential_the_gateway_checks() {
        let all = Security {
            jwt: true,
            api_key: Some("x-api-key".into()),
            mtls: true,
            required: true,
            ..Security::default()
        };
        let c = card(&A2aConfig::default(), "http://h:1", "/rpc", &all);
        let s = &c["securitySchemes"];
        assert_eq!(s["bearer"]["httpAuthSecurityScheme"]["bearerFormat"], "JWT");
        assert_eq!(s["apiKey"]["apiKeySecurityScheme"]["name"], "x-api-key");
        assert_eq!(s["apiKey"]["apiKeySecurityScheme"]["location"], "header");
        assert!(s["mtls"]["mtlsSecurityScheme"].is_object());
        assert_eq!(
            c["securityRequirements"].as_array().unwrap().len(),
            3,
            "any one scheme meets the requirement"
        );
        let optional = Security {
            required: false,
            ..all
        };
        let c = card(&A2aConfig::default(), "http://h:1", "/rpc", &optional);
        assert!(
            c.get("securityRequirements").is_none(),
            "optional: no requirement"
        );
    }
}
