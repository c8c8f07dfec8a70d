//! `[[upstreams]]`, `[[routes]]` and `[legacy]`: where calls go and how legacy clients are told.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::fleet::{self, Balance, Health, Outlier, Retry, MAX_ENDPOINTS};
use super::migration::{Rollback, SplitSide};
use super::Issues;

/// The dialect an upstream speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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

/// `[[upstreams]]`: one `url`, or several `endpoints`.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("oneOf" = [{"required": ["url"]}, {"required": ["endpoints"]}]))]
pub struct Upstream {
    /// Name routes refer to.
    pub name: String,
    /// `http://host:port/path` or `https://host:port/path`: the upstream's one endpoint (or
    /// `endpoints`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
    /// Several endpoints of the upstream (instead of `url`), each as `url` is written; calls are
    /// spread over the healthy ones by `balance`. TLS keys apply to every `https://` endpoint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<String>,
    /// Its dialect.
    pub dialect: Dialect,
    /// How a call's endpoint is chosen: `"least_request"`, `"round_robin"` or `"hash"`.
    #[serde(default)]
    pub balance: Balance,
    /// With `balance = "hash"`: what keeps a caller on one endpoint, `"auth"`, `"header:NAME"`
    /// or `"ip"` (the keys of a split's `sticky`; for the pass-through, `"auth"` is the
    /// `Authorization` header).
    #[serde(default = "fleet::default_hash_key")]
    pub hash_key: String,
    /// Calls and pass-through requests in flight to this upstream over all its endpoints;
    /// beyond, a call fails at once (-32050, HTTP 503), a pass-through request gets a short
    /// 503. 0: unbounded.
    #[serde(default)]
    pub max_concurrent: usize,
    /// Active health checks.
    #[serde(default)]
    pub health: Health,
    /// Passive ejection of failing endpoints.
    #[serde(default)]
    pub outlier: Outlier,
    /// Retries of a failed call.
    #[serde(default)]
    pub retry: Retry,
    /// Per-call timeout.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// PEM file of the CAs an `https://` upstream's certificate is verified against; empty:
    /// the platform's roots.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ca_file: String,
    /// PEM certificate chain presented to an `https://` upstream that asks for one (mTLS).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_cert: String,
    /// The private key of `client_cert` (PEM).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_key: String,
    /// HTTP/1.1 pipelining to this upstream: 0 (the default) off; N: calls are queued on a few
    /// long-lived connections, those ready together written in one write, at most N waiting
    /// for their answers on one connection (`outbound::pipeline`). Only for an `http://` upstream
    /// that answers pipelined requests in order, as RFC 9112 §9.3.2 requires of every server.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pipeline: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The most calls one pipelined connection may have waiting (`upstreams[].pipeline`).
const MAX_PIPELINE: usize = 1024;

/// `[[passthrough]]`: requests the gateway does not answer itself, forwarded unchanged.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Passthrough {
    /// Path prefix, matched on whole segments (`/files` matches `/files` and `/files/a`, not
    /// `/filesystem`); the longest one wins.
    pub prefix: String,
    /// The upstream whose scheme and authority requests go to (their own path and query kept).
    pub upstream: String,
    /// `"off"`, `"optional"` or `"required"`; unset: `auth.mode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<super::AuthMode>,
    /// Who may: `"scope:NAME"`, `"sub:ID"`, `"key:ID"`, any one granting; empty: any caller
    /// `auth` lets in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
}

fn default_timeout_ms() -> u64 {
    10_000
}

impl Upstream {
    /// An upstream with no TLS settings of its own.
    pub fn new(name: &str, url: &str, dialect: Dialect, timeout_ms: u64) -> Self {
        Upstream {
            name: name.into(),
            url: url.into(),
            endpoints: Vec::new(),
            dialect,
            balance: Balance::default(),
            hash_key: fleet::default_hash_key(),
            max_concurrent: 0,
            health: Health::default(),
            outlier: Outlier::default(),
            retry: Retry::default(),
            timeout_ms,
            ca_file: String::new(),
            client_cert: String::new(),
            client_key: String::new(),
            pipeline: 0,
        }
    }

    /// The URLs of its endpoints: `endpoints`, or `url` alone.
    pub fn endpoint_urls(&self) -> impl Iterator<Item = &str> {
        let one = (self.endpoints.is_empty() && !self.url.is_empty()).then_some(self.url.as_str());
        self.endpoints.iter().map(String::as_str).chain(one)
    }

    /// Whether any endpoint is `https://` (the TLS keys then apply).
    pub fn https(&self) -> bool {
        self.endpoint_urls().any(|u| u.starts_with("https://"))
    }

    /// The per-call timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
}

/// `[[routes]]`: which methods go where. A route names one `upstream`, or a weighted `split`
/// between several (migration keys: see `config::migration`).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// Method globs (`*` any run of characters, `?` one character).
    pub methods: Vec<String>,
    /// Upstream name (empty when the route has a `split`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub upstream: String,
    /// The route's name in metrics and `/migration`; empty: `routes[i]`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Weighted sides; the first is the primary, the one a rollback keeps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub split: Vec<SplitSide>,
    /// Which side a caller keeps: `"auth"`, `"header:NAME"` or `"ip"`.
    #[serde(default = "default_sticky")]
    pub sticky: String,
    /// An upstream each call is also sent to, its answer compared and never returned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub shadow: String,
    /// The fraction of calls shadowed.
    #[serde(default = "default_sample")]
    pub shadow_sample: f64,
    /// JSON pointers (into `{"result": ..}` / `{"error": ..}`) left out of the comparison.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shadow_ignore: Vec<String>,
    /// A second instance of the primary's server: fields that differ between the two are noise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub shadow_noise: String,
    /// Automatic rollback of the split's non-primary sides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<Rollback>,
    /// `"off"`, `"optional"` or `"required"`; unset: `auth.mode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<super::AuthMode>,
    /// Who may call its methods: `"scope:NAME"`, `"sub:ID"`, `"key:ID"`, any one granting;
    /// empty: any caller `auth` lets in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
}

fn default_sticky() -> String {
    "auth".into()
}

fn default_sample() -> f64 {
    1.0
}

impl Default for Route {
    fn default() -> Self {
        Route {
            methods: Vec::new(),
            upstream: String::new(),
            name: String::new(),
            split: Vec::new(),
            sticky: default_sticky(),
            shadow: String::new(),
            shadow_sample: default_sample(),
            shadow_ignore: Vec::new(),
            shadow_noise: String::new(),
            rollback: None,
            auth: None,
            allow: Vec::new(),
        }
    }
}

impl Route {
    /// A route sending `methods` to one upstream.
    pub fn to(methods: &[&str], upstream: &str) -> Self {
        Route {
            methods: methods.iter().map(|m| (*m).to_owned()).collect(),
            upstream: upstream.into(),
            ..Route::default()
        }
    }

    /// Its name, `routes[i]` when none is configured (`i` its position).
    pub fn display_name(&self, i: usize) -> String {
        match self.name.is_empty() {
            true => format!("routes[{i}]"),
            false => self.name.clone(),
        }
    }
}

/// `[legacy]`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
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
        crate::util::time::parse_date_or_time(&self.sunset)
    }
}

/// Checks the upstreams (names unique, URLs usable, TLS files readable) and that every route
/// and pass-through names one of them.
pub(super) fn validate(
    upstreams: &[Upstream],
    routes: &[Route],
    passthrough: &[Passthrough],
    legacy: &Legacy,
    issues: &mut Issues,
) {
    let names = validate_upstreams(upstreams, issues);
    validate_route_methods(routes, issues);
    validate_passthrough(passthrough, &names, issues);
    if !legacy.sunset.is_empty() && legacy.sunset_time().is_none() {
        issues.add(
            "legacy.sunset".into(),
            format!("{:?} is not an RFC 3339 date", legacy.sunset),
        );
    }
}

/// Checks each upstream's name (present, unique) and settings; returns the names seen.
fn validate_upstreams<'a>(upstreams: &'a [Upstream], issues: &mut Issues) -> HashSet<&'a str> {
    let mut names = HashSet::new();
    for (i, u) in upstreams.iter().enumerate() {
        if u.name.is_empty() {
            issues.add(format!("upstreams[{i}].name"), "must not be empty".into());
        } else if !names.insert(u.name.as_str()) {
            issues.add(
                format!("upstreams[{i}].name"),
                format!("duplicate upstream name {:?}", u.name),
            );
        }
        validate_upstream_settings(i, u, issues);
    }
    names
}

/// Checks upstream `i`'s endpoints, then its balancing, health, outlier and retry keys.
fn validate_fleet(i: usize, u: &Upstream, issues: &mut Issues) {
    let at = |key: &str| format!("upstreams[{i}].{key}");
    match (u.url.is_empty(), u.endpoints.is_empty()) {
        (true, true) => issues.add(at("url"), "set url, or endpoints for several".into()),
        (false, false) => issues.add(
            at("endpoints"),
            "set url (one endpoint) or endpoints (several), not both".into(),
        ),
        _ => {}
    }
    if u.endpoints.len() > MAX_ENDPOINTS {
        issues.add(
            at("endpoints"),
            format!("at most {MAX_ENDPOINTS} endpoints"),
        );
    }
    let mut seen = std::collections::HashSet::new();
    for (j, e) in u.endpoints.iter().enumerate() {
        let key = at(&format!("endpoints[{j}]"));
        if let Err(m) = check_url(e) {
            issues.add(key, m);
        } else if !seen.insert(e.as_str()) {
            issues.add(
                key,
                format!("duplicate endpoint \"{}\"", crate::util::redact::url(e)),
            );
        }
    }
    if !u.url.is_empty() {
        if let Err(m) = check_url(&u.url) {
            issues.add(at("url"), m);
        }
    }
    let tables = (&u.health, &u.outlier, &u.retry);
    fleet::validate(&at, &u.hash_key, tables, issues);
}

/// An endpoint's URL: `http://` or `https://` with a host.
fn check_url(url: &str) -> Result<(), String> {
    match url.parse::<axum::http::Uri>() {
        Ok(uri) if matches!(uri.scheme_str(), Some("http" | "https")) && uri.host().is_some() => {
            Ok(())
        }
        Ok(_) => Err("must be an http:// or https:// URL with a host".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Checks upstream `i`'s endpoints, TLS files, `pipeline` and `timeout_ms`.
fn validate_upstream_settings(i: usize, u: &Upstream, issues: &mut Issues) {
    validate_fleet(i, u, issues);
    if let Err(e) = crate::config::tls::client_config(u) {
        issues.add(format!("upstreams[{i}].{}", e.key), e.message);
    }
    if u.pipeline > MAX_PIPELINE {
        issues.add(
            format!("upstreams[{i}].pipeline"),
            format!("must be at most {MAX_PIPELINE}"),
        );
    } else if u.pipeline > 0 && u.https() {
        issues.add(
            format!("upstreams[{i}].pipeline"),
            "pipelining is for http:// upstreams (set 0 for https://)".into(),
        );
    }
    if u.timeout_ms == 0 {
        issues.add(
            format!("upstreams[{i}].timeout_ms"),
            "must be positive".into(),
        );
    }
}

/// Checks that every route names at least one method glob.
fn validate_route_methods(routes: &[Route], issues: &mut Issues) {
    for (i, r) in routes.iter().enumerate() {
        if r.methods.is_empty() {
            issues.add(
                format!("routes[{i}].methods"),
                "must name at least one method glob".into(),
            );
        }
    }
}

/// Checks each pass-through's prefix (an absolute path, unique) and that its upstream is
/// one of `names`.
fn validate_passthrough(passthrough: &[Passthrough], names: &HashSet<&str>, issues: &mut Issues) {
    let mut prefixes = HashSet::new();
    for (i, p) in passthrough.iter().enumerate() {
        let ok = p.prefix.starts_with('/')
            && !p.prefix.contains(['?', '#', ' '])
            && !p.prefix.split('/').any(|seg| seg == ".." || seg == ".");
        if !ok {
            issues.add(
                format!("passthrough[{i}].prefix"),
                "must be an absolute path such as \"/\" or \"/files\"".into(),
            );
        } else if !prefixes.insert(p.prefix.trim_end_matches('/')) {
            issues.add(
                format!("passthrough[{i}].prefix"),
                format!("duplicate prefix {:?}", p.prefix),
            );
        }
        if !names.contains(p.upstream.as_str()) {
            issues.add(
                format!("passthrough[{i}].upstream"),
                format!("no upstream is named {:?}", p.upstream),
            );
        }
    }
}
