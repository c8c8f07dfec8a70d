//! Configuration: built-in defaults < `gateway.toml` < `WIREGATE_*` environment variables.
//!
//! Parsed once at start into plain structs and validated as a whole, so every mistake is
//! reported at once with its key path. Nothing reads the environment after start.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, SystemTime};

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};

/// The whole configuration.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The listening side.
    pub server: Server,
    /// Upstream servers, by name.
    pub upstreams: Vec<Upstream>,
    /// Method → upstream routes; first match wins.
    pub routes: Vec<Route>,
    /// Legacy-dialect behaviour.
    pub legacy: Legacy,
    /// The sid bridge.
    pub sid: Sid,
    /// The legacy server's domain-event feed.
    pub events: Events,
    /// The published A2A protocol over the sid bridge.
    pub a2a: A2a,
}

/// `[a2a]`: the agent card and A2A 1.0 / 0.3 methods, served when the sid bridge is on.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
}

impl Default for A2a {
    fn default() -> Self {
        A2a {
            enabled: true,
            public_url: String::new(),
            name: "sid via wiregate".into(),
            description: "A sid coding agent bridged to A2A by wiregate".into(),
        }
    }
}

/// `[events]`: the legacy server's domain-event feed, served as SSE on `GET /events`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Events {
    /// URL of the feed (NDJSON or SSE); empty turns the feed off.
    pub source: String,
    /// First reconnect backoff step; doubles up to 30 s.
    pub reconnect_ms: u64,
    /// Events kept for resumption.
    pub replay_events: usize,
    /// Deprecated and ignored: a subscriber is a cursor into the replay log, cut off only when
    /// events it still needs have left it (`replay_events`). Accepted so older files load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscriber_buffer: Option<usize>,
    /// Most SSE subscribers of `GET /events` (503 beyond).
    pub max_subscribers: usize,
    /// Interval of SSE keepalive comments.
    pub keepalive_ms: u64,
    /// What to do with event types the map does not name.
    pub unmapped: crate::events::domain::Unmapped,
    /// Event type → update kind.
    pub map: EventsMap,
}

/// `[events.map]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EventsMap {
    /// Types that become `TaskStatusUpdateEvent`.
    pub status: Vec<String>,
    /// Types that become `TaskArtifactUpdateEvent`.
    pub artifact: Vec<String>,
}

impl Default for EventsMap {
    fn default() -> Self {
        use crate::events::domain::{DEFAULT_ARTIFACT, DEFAULT_STATUS};
        EventsMap {
            status: DEFAULT_STATUS.map(String::from).to_vec(),
            artifact: DEFAULT_ARTIFACT.map(String::from).to_vec(),
        }
    }
}

impl Default for Events {
    fn default() -> Self {
        Events {
            source: String::new(),
            reconnect_ms: 1000,
            replay_events: 4096,
            subscriber_buffer: None,
            max_subscribers: 10_000,
            keepalive_ms: 15_000,
            unmapped: Default::default(),
            map: EventsMap::default(),
        }
    }
}

/// `[sid]`: the `sid --raw` bridge.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Sid {
    /// Serve sid methods and streams.
    pub enabled: bool,
    /// One child per context; it inherits the gateway's environment.
    pub command: Vec<String>,
    /// `unix:///path` or `tcp://host:port`: attach to `sid --listen` instead of running children.
    pub connect: String,
    /// Most contexts with a running child.
    pub max_contexts: usize,
    /// An idle context's child is stopped after this long (restarted with `--resume` on use).
    pub idle_timeout_ms: u64,
    /// Events kept per context for resumption.
    pub replay_events: usize,
    /// Deprecated and ignored: a subscriber is a cursor into the replay log, cut off only when
    /// events it still needs have left it (`replay_events`). Accepted so older files load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscriber_buffer: Option<usize>,
    /// Most SSE subscribers per context (503 beyond).
    pub max_subscribers: usize,
    /// How long sid's output waits for a subscriber that still needs the oldest events of a
    /// full replay log; one that reads nothing that long is overrun and cut off.
    pub lag_grace_ms: u64,
    /// Interval of SSE keepalive comments.
    pub keepalive_ms: u64,
    /// Raw ops callable as `_sid/<op>`.
    pub allow_ops: Vec<String>,
    /// Bearer tokens accepted for sid methods and streams; required off loopback.
    pub bearer_tokens: Vec<String>,
    /// How long a dropped `--listen` socket may stay down before open tasks fail.
    pub reconnect_grace_ms: u64,
    /// Most requests waiting on one context (written to sid or queued for it, unanswered):
    /// sid reads nothing during a turn, so beyond this callers get -32060 instead of a queue
    /// that grows without bound.
    pub max_queued_requests: usize,
}

impl Default for Sid {
    fn default() -> Self {
        Sid {
            enabled: false,
            command: vec!["sid".into(), "--raw".into()],
            connect: String::new(),
            max_contexts: 16,
            idle_timeout_ms: 900_000,
            replay_events: 4096,
            subscriber_buffer: None,
            max_subscribers: 10_000,
            lag_grace_ms: 500,
            keepalive_ms: 15_000,
            // Every plain op, less the ones that touch this host's files or stop the agent.
            allow_ops: SID_OPS
                .iter()
                .filter(|op| !SID_INTERNAL_OPS.contains(op) && !SID_OFF_BY_DEFAULT_OPS.contains(op))
                .map(|op| (*op).to_owned())
                .collect(),
            bearer_tokens: Vec::new(),
            reconnect_grace_ms: 10_000,
            max_queued_requests: 64,
        }
    }
}

/// Raw ops allowed only when listed in `sid.allow_ops`: they read or write files on the
/// gateway's host, or stop the agent.
pub const SID_OFF_BY_DEFAULT_OPS: [&str; 3] = ["save_transcript", "load_transcript", "shutdown"];

/// Raw ops the bridge drives itself or that are never plain calls.
pub const SID_INTERNAL_OPS: [&str; 3] = ["user_turn", "prompt_response", "interrupt"];

/// Every raw op name of protocol 5.
pub const SID_OPS: [&str; 15] = [
    "user_turn",
    "insert_system_message",
    "prompt_response",
    "interrupt",
    "show_agent",
    "list_agents",
    "switch_agent",
    "compact",
    "clear",
    "set_spend",
    "save_transcript",
    "load_transcript",
    "stats",
    "show_config",
    "shutdown",
];

/// Why `path` cannot be an RPC path: it must be an absolute path of plain segments that no
/// built-in route uses.
fn rpc_path_problem(path: &str) -> Result<(), &'static str> {
    let trimmed = path.trim_end_matches('/');
    if !path.starts_with('/') || trimmed.is_empty() {
        return Err("must be an absolute path below /, like \"/rpc\" or \"/a2a\"");
    }
    if !trimmed[1..].split('/').all(|seg| {
        !seg.is_empty()
            && seg
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
    }) {
        return Err("segments may hold only letters, digits and - . _ ~");
    }
    let built_in = ["/healthz", "/readyz", "/metrics", "/events"];
    let reserved = ["/tasks/", "/contexts/", "/.well-known/"];
    if built_in.contains(&trimmed) || reserved.iter().any(|r| path.starts_with(r)) {
        return Err("is a route of the gateway's own");
    }
    Ok(())
}

/// `[server]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Server {
    /// Address to listen on; loopback by default.
    pub listen: SocketAddr,
    /// Paths that take JSON-RPC and legacy calls (`POST`), each with or without one trailing
    /// slash: a legacy server's own URL keeps working for its clients. The agent card names the
    /// first.
    pub rpc_paths: Vec<String>,
    /// Largest request body accepted (HTTP 413 beyond).
    pub max_body_bytes: usize,
    /// Largest upstream answer read (-32052 beyond).
    pub max_upstream_body_bytes: usize,
    /// Most calls of one batch forwarded at the same time.
    pub max_batch_concurrency: usize,
    /// Most members of one batch (-32600 beyond).
    pub max_batch_len: usize,
    /// How long in-flight calls get to finish on SIGINT/SIGTERM.
    pub shutdown_grace_ms: u64,
    /// Runtime worker threads; 0 means one per core.
    pub worker_threads: usize,
    /// Most client connections open at once; beyond, clients wait in the accept backlog.
    pub max_connections: usize,
    /// How long a client gets to send a request's head (a new connection's first bytes, or the
    /// next request on a kept-alive one, so also how long a kept-alive HTTP/1 or HTTP/2
    /// connection may idle with no request in flight) before its connection is closed: slow or
    /// silent clients cannot hold connection slots. HTTP/2 peers are also sent a PING this
    /// often and dropped when one goes unanswered this long.
    pub header_read_timeout_ms: u64,
    /// How long a client gets to send a request's whole body once its head is in (HTTP 408
    /// beyond): a client that declares a length and stalls cannot hold its slot.
    pub body_read_timeout_ms: u64,
}

impl Default for Server {
    fn default() -> Self {
        Server {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            rpc_paths: vec!["/rpc".into()],
            max_body_bytes: 1 << 20,
            max_upstream_body_bytes: 16 << 20,
            max_batch_concurrency: 32,
            max_batch_len: 1000,
            shutdown_grace_ms: 10_000,
            worker_threads: 0,
            max_connections: 16_384,
            header_read_timeout_ms: 30_000,
            body_read_timeout_ms: 30_000,
        }
    }
}

/// The dialect an upstream speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dialect {
    /// The legacy envelope.
    Legacy,
    /// JSON-RPC 2.0.
    Jsonrpc,
}

impl Dialect {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Legacy => "legacy",
            Dialect::Jsonrpc => "jsonrpc",
        }
    }
}

/// `[[upstreams]]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Upstream {
    /// Name routes refer to.
    pub name: String,
    /// `http://host:port/path`.
    pub url: String,
    /// Its dialect.
    pub dialect: Dialect,
    /// Per-call timeout.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_timeout_ms() -> u64 {
    10_000
}

impl Upstream {
    /// The per-call timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
}

/// `[[routes]]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// Method globs (`*` any run of characters, `?` one character).
    pub methods: Vec<String>,
    /// Upstream name.
    pub upstream: String,
}

/// `[legacy]`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Legacy {
    /// Send `Deprecation` on legacy-dialect answers.
    pub deprecation: bool,
    /// RFC 3339 date or time: `Sunset` on legacy-dialect answers.
    pub sunset: String,
    /// Overrides of the legacy → JSON-RPC error-code table.
    pub error_codes: BTreeMap<String, i64>,
}

impl Legacy {
    /// The `Sunset` instant, when one is configured and valid.
    pub fn sunset_time(&self) -> Option<SystemTime> {
        parse_date(&self.sunset)
    }
}

fn parse_date(s: &str) -> Option<SystemTime> {
    if s.is_empty() {
        return None;
    }
    let full = if s.len() == 10 {
        format!("{s}T00:00:00Z")
    } else {
        s.to_owned()
    };
    humantime::parse_rfc3339_weak(full.trim_end_matches('Z'))
        .ok()
        .or_else(|| humantime::parse_rfc3339(&full).ok())
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
                        key: if e.path.is_empty() {
                            "(root)".into()
                        } else {
                            e.path.join(".")
                        },
                        message: e.kind.to_string(),
                    })
                    .collect(),
            )
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Checks what types alone cannot.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut issues = Vec::new();
        let mut issue = |key: String, message: String| issues.push(ConfigIssue { key, message });
        if self.server.rpc_paths.is_empty() {
            issue(
                "server.rpc_paths".into(),
                "must name at least one path".into(),
            );
        }
        for p in &self.server.rpc_paths {
            if let Err(why) = rpc_path_problem(p) {
                issue("server.rpc_paths".into(), format!("{p:?}: {why}"));
            }
        }
        if self.server.max_body_bytes == 0 {
            issue("server.max_body_bytes".into(), "must be positive".into());
        }
        if self.server.max_batch_len == 0 {
            issue("server.max_batch_len".into(), "must be positive".into());
        }
        if self.server.max_connections == 0 {
            issue("server.max_connections".into(), "must be positive".into());
        }
        for (key, v) in [
            (
                "server.header_read_timeout_ms",
                self.server.header_read_timeout_ms,
            ),
            (
                "server.body_read_timeout_ms",
                self.server.body_read_timeout_ms,
            ),
        ] {
            if v == 0 {
                issue(key.into(), "must be positive".into());
            }
        }
        if self.server.max_batch_concurrency == 0 {
            issue(
                "server.max_batch_concurrency".into(),
                "must be positive".into(),
            );
        }
        let mut names = HashSet::new();
        for (i, u) in self.upstreams.iter().enumerate() {
            if u.name.is_empty() {
                issue(format!("upstreams[{i}].name"), "must not be empty".into());
            } else if !names.insert(u.name.as_str()) {
                issue(
                    format!("upstreams[{i}].name"),
                    format!("duplicate upstream name {:?}", u.name),
                );
            }
            match u.url.parse::<axum::http::Uri>() {
                Ok(uri) if uri.scheme_str() == Some("http") && uri.host().is_some() => {}
                Ok(_) => issue(
                    format!("upstreams[{i}].url"),
                    "must be an http:// URL with a host".into(),
                ),
                Err(e) => issue(format!("upstreams[{i}].url"), e.to_string()),
            }
            if u.timeout_ms == 0 {
                issue(
                    format!("upstreams[{i}].timeout_ms"),
                    "must be positive".into(),
                );
            }
        }
        for (i, r) in self.routes.iter().enumerate() {
            if r.methods.is_empty() {
                issue(
                    format!("routes[{i}].methods"),
                    "must name at least one method glob".into(),
                );
            }
            if !names.contains(r.upstream.as_str()) {
                issue(
                    format!("routes[{i}].upstream"),
                    format!("no upstream is named {:?}", r.upstream),
                );
            }
        }
        self.validate_sid(&mut issue);
        if !self.a2a.public_url.is_empty() {
            match self.a2a.public_url.parse::<axum::http::Uri>() {
                Ok(uri)
                    if matches!(uri.scheme_str(), Some("http" | "https"))
                        && uri.host().is_some()
                        && uri.query().is_none() => {}
                _ => issue(
                    "a2a.public_url".into(),
                    "must be an http:// or https:// URL with a host and no query".into(),
                ),
            }
        }
        if self.a2a.name.trim().is_empty() {
            issue("a2a.name".into(), "must not be empty".into());
        }
        if !self.events.source.is_empty() {
            match self.events.source.parse::<axum::http::Uri>() {
                Ok(uri) if uri.scheme_str() == Some("http") && uri.host().is_some() => {}
                _ => issue(
                    "events.source".into(),
                    "must be an http:// URL with a host".into(),
                ),
            }
            for (key, v) in [
                ("events.reconnect_ms", self.events.reconnect_ms),
                ("events.replay_events", self.events.replay_events as u64),
                ("events.keepalive_ms", self.events.keepalive_ms),
            ] {
                if v == 0 {
                    issue(key.into(), "must be positive".into());
                }
            }
        }
        if !self.legacy.sunset.is_empty() && self.legacy.sunset_time().is_none() {
            issue(
                "legacy.sunset".into(),
                format!("{:?} is not an RFC 3339 date", self.legacy.sunset),
            );
        }
        match issues.is_empty() {
            true => Ok(()),
            false => Err(ConfigError(issues)),
        }
    }

    fn validate_sid(&self, issue: &mut impl FnMut(String, String)) {
        let sid = &self.sid;
        if !sid.enabled {
            return;
        }
        if sid.connect.is_empty() && sid.command.is_empty() {
            issue(
                "sid.command".into(),
                "must name the sid program when sid.connect is empty".into(),
            );
        }
        let known_scheme = sid.connect.starts_with("unix:///") || sid.connect.starts_with("tcp://");
        if !sid.connect.is_empty() && !known_scheme {
            issue(
                "sid.connect".into(),
                "must be unix:///path or tcp://host:port".into(),
            );
        }
        for (key, v) in [
            ("sid.max_contexts", sid.max_contexts as u64),
            ("sid.replay_events", sid.replay_events as u64),
            ("sid.max_queued_requests", sid.max_queued_requests as u64),
            ("sid.keepalive_ms", sid.keepalive_ms),
            ("sid.idle_timeout_ms", sid.idle_timeout_ms),
        ] {
            if v == 0 {
                issue(key.into(), "must be positive".into());
            }
        }
        for (i, op) in sid.allow_ops.iter().enumerate() {
            if !SID_OPS.contains(&op.as_str()) {
                issue(
                    format!("sid.allow_ops[{i}]"),
                    format!("{op:?} is not a sid raw op"),
                );
            } else if SID_INTERNAL_OPS.contains(&op.as_str()) {
                issue(
                    format!("sid.allow_ops[{i}]"),
                    format!("{op:?} is driven by message/send and tasks/cancel, not _sid/"),
                );
            }
        }
        if !self.server.listen.ip().is_loopback() && sid.bearer_tokens.is_empty() {
            issue(
                "sid.bearer_tokens".into(),
                format!(
                    "the sid bridge refuses to serve on the non-loopback {} without bearer tokens",
                    self.server.listen
                ),
            );
        }
    }

    /// The configuration as TOML, with credentials in upstream URLs masked.
    pub fn to_masked_toml(&self) -> String {
        let mut c = self.clone();
        for u in &mut c.upstreams {
            u.url = mask_userinfo(&u.url);
        }
        for t in &mut c.sid.bearer_tokens {
            *t = "***".into();
        }
        toml::to_string_pretty(&c).unwrap_or_else(|e| format!("# cannot render: {e}"))
    }
}

/// `http://user:pass@host/` → `http://user:***@host/`.
fn mask_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => {
            let user = rest[..at].split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***{}", &rest[at..])
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_passwords() {
        assert_eq!(mask_userinfo("http://u:p@h:1/x"), "http://u:***@h:1/x");
        assert_eq!(mask_userinfo("http://h:1/x@y"), "http://h:1/x@y");
    }

    #[test]
    fn dates_parse() {
        assert!(parse_date("2027-01-01").is_some());
        assert!(parse_date("2027-01-01T00:00:00Z").is_some());
        assert!(parse_date("soon").is_none());
    }
}
