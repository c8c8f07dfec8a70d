//! `[a2a]`: the published A2A protocol over the sid bridge.

use serde::{Deserialize, Serialize};

use super::Issues;

/// `[a2a]`: the agent card and A2A 1.0 / 0.3 methods, served when the sid bridge is on.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct A2a {
    /// Serve the card and the spec dialect (only when `sid.enabled`).
    pub enabled: bool,
    /// Base URL advertised in the card; empty: derived from the request's `Host`.
    pub public_url: String,
    /// The card's `name`.
    pub name: String,
    /// The card's `description`.
    pub description: String,
    /// Where A2A's JSON-RPC binding is served (`POST`), named by the card; empty: not served
    /// apart, the card names the first of `server.rpc_paths`.
    pub jsonrpc_path: String,
    /// Let push-notification webhooks reach loopback, private, link-local and the other
    /// special-purpose addresses of the IANA registries (server-side request forgery guard;
    /// off by default).
    pub push_allow_private: bool,
}

impl Default for A2a {
    fn default() -> Self {
        A2a {
            enabled: true,
            public_url: String::new(),
            name: "sid via wiregate".into(),
            description: "A sid coding agent bridged to A2A by wiregate".into(),
            jsonrpc_path: "/".into(),
            push_allow_private: false,
        }
    }
}

impl A2a {
    /// A2A's JSON-RPC path without a trailing slash (`/` stays `/`), when it is served apart.
    pub fn jsonrpc_path(&self) -> Option<&str> {
        match self.jsonrpc_path.as_str() {
            "" => None,
            "/" => Some("/"),
            p => Some(p.trim_end_matches('/')),
        }
    }

    pub(super) fn validate(&self, issues: &mut Issues, rpc_paths: &[String]) {
        if let Some(p) = self.jsonrpc_path() {
            let plain = |c: char| c.is_ascii_alphanumeric() || "/-_.~".contains(c);
            let clash = rpc_paths.iter().any(|r| r.trim_end_matches('/') == p)
                || crate::http::routes::is_own_route(p);
            if !p.starts_with('/') || !p.chars().all(plain) || p.contains("//") {
                issues.add(
                    "a2a.jsonrpc_path".into(),
                    "must be an absolute path of letters, digits and - _ . ~ (or empty)".into(),
                );
            } else if clash {
                issues.add(
                    "a2a.jsonrpc_path".into(),
                    "must differ from server.rpc_paths and lie under none of the gateway's own \
                     routes (/a2a/rest, /.well-known, /console, /tasks, /events, /healthz, ...)"
                        .into(),
                );
            }
        }
        if !self.public_url.is_empty() {
            match self.public_url.parse::<axum::http::Uri>() {
                Ok(uri)
                    if matches!(uri.scheme_str(), Some("http" | "https"))
                        && uri.host().is_some()
                        && uri.query().is_none() => {}
                _ => issues.add(
                    "a2a.public_url".into(),
                    "must be an http:// or https:// URL with a host and no query".into(),
                ),
            }
        }
        if self.name.trim().is_empty() {
            issues.add("a2a.name".into(), "must not be empty".into());
        }
    }
}
