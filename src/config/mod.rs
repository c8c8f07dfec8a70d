//! Configuration: built-in defaults < `gateway.toml` < `WIREGATE_*` environment variables.
//!
//! Parsed once at start into plain structs and validated as a whole, so every mistake is
//! reported at once with its key path. Nothing reads the environment after start.

mod a2a;
mod auth;
mod cluster;
mod events;
mod fleet;
mod log;
mod migration;
pub mod reference;
pub mod restart;
mod server;
mod sid;
pub mod tls;
mod traces;
mod upstream;

pub use a2a::A2a;
pub use auth::{
    check_allow, load_api_keys, read_jwks_file, ApiKeyEntry, ApiKeys, Auth, AuthMode, Jwt,
    LimitKey, Mtls, MtlsIdentity, RateLimit, JWT_ALGORITHMS,
};
pub(crate) use cluster::host_name;
pub use cluster::Cluster;
pub use events::{Events, EventsMap, Unmapped, DEFAULT_ARTIFACT, DEFAULT_STATUS};
pub use fleet::{Balance, Health, Outlier, Retry, MAX_ENDPOINTS};
pub use log::{Log, LogFormat};
pub use migration::{is_json_pointer, Migration, Rollback, SplitSide, Sticky};
pub use server::{Cors, ForwardedHeader, Runtime, Server, ServerTls};
pub use sid::{Sid, SID_INTERNAL_OPS, SID_OFF_BY_DEFAULT_OPS, SID_OPS};
pub use traces::{OtlpProtocol, Tracing};
pub use upstream::{Dialect, Legacy, Passthrough, Route, Upstream};

use std::path::Path;

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};

use crate::util::redact;

/// The whole configuration.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The listening side.
    pub server: Server,
    /// Upstream servers, by name.
    pub upstreams: Vec<Upstream>,
    /// Method → upstream routes; first match wins.
    pub routes: Vec<Route>,
    /// Paths forwarded unchanged to an upstream; longest prefix wins.
    #[serde(default)]
    pub passthrough: Vec<Passthrough>,
    /// Legacy-dialect behaviour.
    pub legacy: Legacy,
    /// The sid bridge.
    pub sid: Sid,
    /// The legacy server's domain-event feed.
    pub events: Events,
    /// The published A2A protocol over the sid bridge.
    pub a2a: A2a,
    /// Log format and access lines.
    #[serde(default)]
    pub log: Log,
    /// Splits, shadows and rollbacks: how callers are told apart, the shadow queue.
    #[serde(default)]
    pub migration: Migration,
    /// Replicas sharing the sid bridge's state and the domain feed through Redis.
    #[serde(default)]
    pub cluster: Cluster,
    /// Caller identity: JWTs, API keys, client certificates.
    #[serde(default)]
    pub auth: Auth,
    /// Token buckets on calls and pass-through requests, per caller, address, header or all.
    #[serde(default)]
    pub rate_limits: Vec<RateLimit>,
    /// OpenTelemetry spans of every hop, exported over OTLP.
    #[serde(default)]
    pub tracing: Tracing,
}

/// One problem with the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Dotted key path, e.g. `upstreams[0].url`.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// Loading failed; every issue found is listed.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration:\n{}", .0.iter().map(|i| format!("  - {i}")).collect::<Vec<_>>().join("\n"))]
pub struct ConfigError(pub Vec<ConfigIssue>);

impl Config {
    /// Loads defaults, then `path` (required when `explicit`, optional otherwise), then the
    /// process's `WIREGATE_*` variables (`__` separates keys).
    pub fn load(path: &Path, explicit: bool) -> Result<Config, ConfigError> {
        if explicit && !path.exists() {
            return Err(ConfigError(vec![ConfigIssue {
                key: "--config".into(),
                message: format!("{} does not exist", path.display()),
            }]));
        }
        let env_provider = Env::prefixed("WIREGATE_").split("__");
        let figment = Figment::from(Serialized::defaults(Config::default()))
            .merge(Toml::file(path))
            .merge(env_provider);
        let config: Config = figment.extract().map_err(|e| {
            ConfigError(
                e.into_iter()
                    .map(|e| ConfigIssue {
                        key: key_path(&e.path),
                        message: e.kind.to_string(),
                    })
                    .collect(),
            )
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Checks what types alone cannot; every problem is reported, each with its key path.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut issues = Issues::default();
        self.server.validate(&mut issues);
        upstream::validate(
            &self.upstreams,
            &self.routes,
            &self.passthrough,
            &self.legacy,
            &mut issues,
        );
        migration::validate_routes(&self.routes, &self.upstreams, &mut issues);
        self.migration.validate(&mut issues);
        if self.sid.enabled {
            self.sid.validate(&self.server, &mut issues);
        }
        self.a2a.validate(&mut issues, &self.server.rpc_paths);
        self.events.validate(&mut issues);
        self.cluster.validate(&mut issues);
        self.tracing.validate(&mut issues);
        self.auth.validate(&mut issues);
        if self.auth.mtls.identity != MtlsIdentity::Off && self.server.tls.client_ca.is_empty() {
            issues.add(
                "auth.mtls.identity".into(),
                "needs server.tls.client_ca: only a certificate verified against it names a caller"
                    .into(),
            );
        }
        auth::validate_limits(&self.rate_limits, self.cluster.enabled(), &mut issues);
        for (i, r) in self.routes.iter().enumerate() {
            auth::validate_allow(&r.allow, &format!("routes[{i}]"), &mut issues);
        }
        for (i, p) in self.passthrough.iter().enumerate() {
            auth::validate_allow(&p.allow, &format!("passthrough[{i}]"), &mut issues);
        }
        match issues.0.is_empty() {
            true => Ok(()),
            false => Err(ConfigError(issues.0)),
        }
    }

    /// The configuration as TOML, for `check-config`: every value that may carry a
    /// credential masked. URLs (upstreams and their endpoints, the event feed, JWKS, Redis, the
    /// replica's advertised URL, the card's public URL, the span collector) keep their shape
    /// with user info's secret and any query hidden ([`redact::masked`]); tokens and the span
    /// exporter's header values are `***`. Key and certificate settings are file paths.
    pub fn to_masked_toml(&self) -> String {
        let mut c = self.clone();
        for u in &mut c.upstreams {
            u.url = redact::masked(&u.url);
            for e in &mut u.endpoints {
                *e = redact::masked(e);
            }
        }
        for j in &mut c.auth.jwt {
            j.jwks_url = redact::masked(&j.jwks_url);
        }
        for url in [
            &mut c.events.source,
            &mut c.cluster.redis,
            &mut c.cluster.advertise,
            &mut c.a2a.public_url,
            &mut c.tracing.otlp_endpoint,
        ] {
            *url = redact::masked(url);
        }
        for v in c.tracing.headers.values_mut() {
            *v = "***".into();
        }
        for t in c
            .sid
            .bearer_tokens
            .iter_mut()
            .chain(&mut c.server.admin_tokens)
        {
            *t = "***".into();
        }
        toml::to_string_pretty(&c).unwrap_or_else(|e| format!("# cannot render: {e}"))
    }
}

/// A parse error's path as validation writes key paths: `upstreams[1].balance`, not
/// `upstreams.1.balance`.
fn key_path(path: &[String]) -> String {
    if path.is_empty() {
        return "(root)".into();
    }
    let mut out = String::new();
    for part in path {
        if part.bytes().all(|b| b.is_ascii_digit()) && !out.is_empty() {
            out.push('[');
            out.push_str(part);
            out.push(']');
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(part);
        }
    }
    out
}

/// The problems found so far, collected by each section's `validate`.
#[derive(Debug, Default)]
pub(crate) struct Issues(Vec<ConfigIssue>);

impl Issues {
    /// Records that `key` is wrong, and why.
    pub(crate) fn add(&mut self, key: String, message: String) {
        self.0.push(ConfigIssue { key, message });
    }
}
