//! Who the callers are and how much they may call: `[auth]` (JWTs from identity providers, API
//! keys, client certificates), the `auth` and `allow` keys of routes and pass-through prefixes,
//! and `[[rate_limits]]`.

use serde::{Deserialize, Serialize};

use super::Issues;

/// `auth.mode`, and a route's `auth`: whether a caller must prove who it is.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    /// Credentials are not looked at (the default).
    #[default]
    Off,
    /// A credential, when sent, must be valid; a call without one is anonymous.
    Optional,
    /// Every call needs a valid credential.
    Required,
}

impl AuthMode {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMode::Off => "off",
            AuthMode::Optional => "optional",
            AuthMode::Required => "required",
        }
    }
}

/// `[auth]`: caller identity.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Auth {
    /// `"off"`, `"optional"` or `"required"`: for the routes and prefixes that set no `auth`.
    pub mode: AuthMode,
    /// True: the caller's credential (`Authorization`, the API key header) is not passed
    /// upstream.
    pub strip_credentials: bool,
    /// A header (e.g. `x-caller-id`) the verified caller is sent upstream in; a client's own
    /// header of that name is removed. Empty: none.
    pub identity_header: String,
    /// Identity providers whose JWTs (`Authorization: Bearer`) are accepted.
    pub jwt: Vec<Jwt>,
    /// API keys.
    pub api_keys: ApiKeys,
    /// Callers named by their verified client certificate (`[server.tls]` with `client_ca`).
    pub mtls: Mtls,
}

impl Auth {
    /// Whether any credential can be checked at all.
    pub fn has_credentials(&self) -> bool {
        !self.jwt.is_empty()
            || !self.api_keys.file.is_empty()
            || self.mtls.identity != MtlsIdentity::Off
    }
}

/// `[[auth.jwt]]`: one identity provider.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Jwt {
    /// The `iss` its tokens carry, exactly.
    pub issuer: String,
    /// A token's `aud` must name one of these.
    pub audiences: Vec<String>,
    /// Where its JSON Web Key Set is (`https://…`, verified as any upstream); or `jwks_file`.
    pub jwks_url: String,
    /// A JSON Web Key Set on disk, read at start and at each reload.
    pub jwks_file: String,
    /// The signature algorithms accepted: of `RS256`, `RS384`, `RS512`, `PS256`, `PS384`,
    /// `PS512`, `ES256`, `ES384`, `EdDSA` (never `none`, never an HMAC one).
    pub algorithms: Vec<String>,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway_ms: u64,
    /// How often the key set is fetched again; and at once on an unknown `kid`, at most once
    /// per 10 s.
    pub jwks_refresh_ms: u64,
    /// The claim naming the caller.
    pub subject_claim: String,
    /// A CA file (PEM) the JWKS server's certificate is verified against; empty: the
    /// platform's roots.
    pub ca_file: String,
}

impl Default for Jwt {
    fn default() -> Self {
        Jwt {
            issuer: String::new(),
            audiences: Vec::new(),
            jwks_url: String::new(),
            jwks_file: String::new(),
            algorithms: vec!["RS256".into(), "ES256".into(), "EdDSA".into()],
            leeway_ms: 30_000,
            jwks_refresh_ms: 300_000,
            subject_claim: "sub".into(),
            ca_file: String::new(),
        }
    }
}

/// The algorithms `[[auth.jwt]] algorithms` may name: asymmetric signatures only.
pub const JWT_ALGORITHMS: &[&str] = &[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
];

/// `[auth.api_keys]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ApiKeys {
    /// A TOML file of `[[keys]] id = "ci-bot", sha256 = "<hex of the key>", scopes = [..]`,
    /// read at start and at each reload. Empty: no API keys.
    pub file: String,
    /// The header a key comes in; `Authorization: ApiKey <key>` is accepted too.
    pub header: String,
}

impl Default for ApiKeys {
    fn default() -> Self {
        ApiKeys {
            file: String::new(),
            header: "x-api-key".into(),
        }
    }
}

/// One entry of the API keys file (`[[keys]]`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyEntry {
    /// The caller's name (`key:ID` in `allow`).
    pub id: String,
    /// The SHA-256 of the key, 64 hex digits.
    pub sha256: String,
    /// The scopes it holds (`scope:NAME` in `allow`).
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// Reads the API keys file (`auth.api_keys.file`): its entries, each checked; an error names
/// the entry (`keys[2].sha256: …`). The file holds digests only, never a key.
pub fn load_api_keys(path: &str) -> Result<Vec<ApiKeyEntry>, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        #[serde(default)]
        keys: Vec<ApiKeyEntry>,
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let file: File = toml::from_str(&text).map_err(|e| format!("{path}: {}", e.message()))?;
    let mut ids = std::collections::HashSet::new();
    for (i, k) in file.keys.iter().enumerate() {
        if k.id.is_empty() {
            return Err(format!("{path}: keys[{i}].id: required"));
        }
        if !ids.insert(k.id.as_str()) {
            return Err(format!("{path}: keys[{i}].id: duplicate id {:?}", k.id));
        }
        if k.sha256.len() != 64 || !k.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("{path}: keys[{i}].sha256: not 64 hex digits"));
        }
    }
    Ok(file.keys)
}

/// `auth.mtls.identity`: which name of a verified client certificate names the caller.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum MtlsIdentity {
    /// Client certificates name nobody.
    #[default]
    Off,
    /// The first URI subject alternative name (a SPIFFE id, say).
    SanUri,
    /// The first DNS subject alternative name.
    SanDns,
    /// The subject's common name.
    SubjectCn,
}

/// `[auth.mtls]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Mtls {
    /// `"off"`, `"san_uri"`, `"san_dns"` or `"subject_cn"`.
    pub identity: MtlsIdentity,
}

/// `[[rate_limits]]`: one token bucket per key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimit {
    /// Its name in metrics and in the `RateLimit-Policy` header.
    pub name: String,
    /// Method globs it applies to; `"path:/files/*"` for pass-through paths.
    #[serde(rename = "match")]
    pub matches: Vec<String>,
    /// What a bucket is kept for: `"caller"` (the verified caller; the client address when
    /// anonymous), `"ip"`, `"header:NAME"` or `"global"`.
    pub key: String,
    /// Calls a second, sustained.
    pub rate_per_s: f64,
    /// Calls at once after a quiet spell.
    pub burst: u32,
    /// True: one budget across the replicas, through `[cluster]`'s Redis.
    pub shared: bool,
}

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit {
            name: String::new(),
            matches: vec!["*".into()],
            key: "caller".into(),
            rate_per_s: 100.0,
            burst: 200,
            shared: false,
        }
    }
}

/// What a rate limit keeps its buckets by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LimitKey {
    /// The verified caller, or the client address when anonymous.
    Caller,
    /// The client address.
    Ip,
    /// A request header's value (the name lower-cased); callers without it share one bucket.
    Header(String),
    /// One bucket for everyone.
    Global,
}

impl LimitKey {
    /// Reads a `key` value.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "caller" => Ok(LimitKey::Caller),
            "ip" => Ok(LimitKey::Ip),
            "global" => Ok(LimitKey::Global),
            _ => match s.strip_prefix("header:") {
                Some(name) if axum::http::HeaderName::from_bytes(name.as_bytes()).is_ok() => {
                    Ok(LimitKey::Header(name.to_ascii_lowercase()))
                }
                Some(name) => Err(format!("{name:?} is not a header name")),
                None => Err(format!(
                    "{s:?} is not one of \"caller\", \"ip\", \"header:NAME\", \"global\""
                )),
            },
        }
    }
}

/// An `allow` entry: `scope:NAME`, `sub:ID` (a JWT's subject or a certificate's name) or
/// `key:ID` (an API key's id).
pub fn check_allow(entry: &str) -> Result<(), String> {
    let (kind, value) = entry
        .split_once(':')
        .ok_or_else(|| format!("{entry:?} is not \"scope:…\", \"sub:…\" or \"key:…\""))?;
    if !matches!(kind, "scope" | "sub" | "key") {
        return Err(format!(
            "{entry:?} is not \"scope:…\", \"sub:…\" or \"key:…\""
        ));
    }
    if value.is_empty() {
        return Err(format!("{entry:?} names nothing after {kind:?}"));
    }
    Ok(())
}

impl Auth {
    pub(super) fn validate(&self, issues: &mut Issues) {
        if self.mode != AuthMode::Off && !self.has_credentials() {
            issues.add(
                "auth.mode".into(),
                format!(
                    "{:?} needs a credential to check: [[auth.jwt]], auth.api_keys.file or auth.mtls.identity",
                    self.mode.as_str()
                ),
            );
        }
        if !self.identity_header.is_empty()
            && axum::http::HeaderName::from_bytes(self.identity_header.as_bytes()).is_err()
        {
            issues.add(
                "auth.identity_header".into(),
                format!("{:?} is not a header name", self.identity_header),
            );
        }
        if !self.api_keys.file.is_empty() {
            if let Err(e) = load_api_keys(&self.api_keys.file) {
                issues.add("auth.api_keys.file".into(), e);
            }
        }
        if axum::http::HeaderName::from_bytes(self.api_keys.header.as_bytes()).is_err() {
            issues.add(
                "auth.api_keys.header".into(),
                format!("{:?} is not a header name", self.api_keys.header),
            );
        }
        for (i, j) in self.jwt.iter().enumerate() {
            let at = |k: &str| format!("auth.jwt[{i}].{k}");
            if j.issuer.is_empty() {
                issues.add(at("issuer"), "required: the `iss` its tokens carry".into());
            }
            if j.audiences.iter().all(|a| a.is_empty()) {
                issues.add(at("audiences"), "name at least one audience".into());
            }
            match (j.jwks_url.is_empty(), j.jwks_file.is_empty()) {
                (true, true) => issues.add(at("jwks_url"), "set jwks_url or jwks_file".into()),
                (false, false) => issues.add(
                    at("jwks_file"),
                    "set jwks_url or jwks_file, not both".into(),
                ),
                (false, true) if !j.jwks_url.starts_with("https://") => issues.add(
                    at("jwks_url"),
                    format!(
                        "\"{}\" is not an https:// URL",
                        crate::util::redact::url(&j.jwks_url)
                    ),
                ),
                (true, false) => {
                    if let Err(e) = read_jwks_file(&j.jwks_file) {
                        issues.add(at("jwks_file"), e);
                    }
                }
                _ => {}
            }
            if j.algorithms.is_empty() {
                issues.add(at("algorithms"), "name at least one algorithm".into());
            }
            for a in &j.algorithms {
                if !JWT_ALGORITHMS.contains(&a.as_str()) {
                    issues.add(
                        at("algorithms"),
                        format!(
                            "{a:?} is not one of {} (never none, never an HMAC one)",
                            JWT_ALGORITHMS.join(", ")
                        ),
                    );
                }
            }
            if j.jwks_refresh_ms < 10_000 {
                issues.add(at("jwks_refresh_ms"), "must be at least 10000".into());
            }
            if j.subject_claim.is_empty() {
                issues.add(at("subject_claim"), "must name a claim".into());
            }
        }
    }
}

/// Reads a JSON Web Key Set file: its text, once it is JSON with a `keys` array.
pub fn read_jwks_file(path: &str) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{path}: not JSON: {e}"))?;
    match v.get("keys") {
        Some(serde_json::Value::Array(_)) => Ok(text),
        _ => Err(format!(
            "{path}: not a JSON Web Key Set (no \"keys\" array)"
        )),
    }
}

/// Checks one `allow` list (of a route or a prefix) at `at`.
pub(super) fn validate_allow(allow: &[String], at: &str, issues: &mut Issues) {
    for (i, a) in allow.iter().enumerate() {
        if let Err(m) = check_allow(a) {
            issues.add(format!("{at}.allow[{i}]"), m);
        }
    }
}

/// Checks `[[rate_limits]]`.
pub(super) fn validate_limits(limits: &[RateLimit], cluster_on: bool, issues: &mut Issues) {
    let mut names = std::collections::HashSet::new();
    for (i, l) in limits.iter().enumerate() {
        let at = |k: &str| format!("rate_limits[{i}].{k}");
        if l.name.is_empty() {
            issues.add(
                at("name"),
                "required: the limit's name in metrics and headers".into(),
            );
        } else if !names.insert(l.name.as_str()) {
            issues.add(at("name"), format!("duplicate limit {:?}", l.name));
        } else if !l
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            issues.add(at("name"), "letters, digits, '-', '_' and '.' only".into());
        }
        if l.matches.is_empty() || l.matches.iter().any(|m| m.is_empty() || m == "path:") {
            issues.add(
                at("match"),
                "name at least one method glob or path:PREFIX".into(),
            );
        }
        if let Err(m) = LimitKey::parse(&l.key) {
            issues.add(at("key"), m);
        }
        if !(l.rate_per_s > 0.0 && l.rate_per_s.is_finite()) {
            issues.add(at("rate_per_s"), "must be above 0".into());
        }
        if l.burst == 0 {
            issues.add(at("burst"), "must be at least 1".into());
        }
        if l.shared && !cluster_on {
            issues.add(
                at("shared"),
                "a shared budget needs [cluster] (its Redis holds the budget)".into(),
            );
        }
    }
}
