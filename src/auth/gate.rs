//! The gate a call passes on its way in: who the caller is (once per request, from the
//! credential it sent), whether the rule of its route or prefix lets it through, and whether a
//! rate limit holds it back.
//!
//! Built from the configuration with the gateway's state and rebuilt on reload, keeping what
//! must not start over: the fetched JWKS, the verified-token cache and the rate buckets. With
//! `[auth]` off everywhere and no `[[rate_limits]]`, [`Gate::is_open`] is true and a call never
//! reaches it.

use std::net::IpAddr;
use std::sync::Arc;

use axum::http::{header, HeaderName};

use super::caller::{Caller, Kind};
use super::limits::{Limits, Subject, Target};
use super::{jwt, keys, mtls};
use crate::config::{AuthMode, Config, MtlsIdentity};
use crate::http::client_ip::Proxies;
use crate::http::headers::{Headers, X_API_KEY};
use crate::model::error::GatewayError;
use crate::wire::authorization;

/// The rule of one route or pass-through prefix.
#[derive(Debug)]
struct Rule {
    mode: AuthMode,
    allow: Vec<Allow>,
}

/// One `allow` entry.
#[derive(Debug)]
enum Allow {
    /// `scope:NAME`: a caller holding the scope.
    Scope(Box<str>),
    /// `sub:ID`: a JWT's subject or a client certificate's name.
    Sub(Box<str>),
    /// `key:ID`: an API key's id.
    Key(Box<str>),
}

impl Allow {
    fn parse(entry: &str) -> Self {
        let (kind, value) = entry.split_once(':').unwrap_or(("scope", entry));
        let value = value.into();
        match kind {
            "sub" => Allow::Sub(value),
            "key" => Allow::Key(value),
            _ => Allow::Scope(value),
        }
    }

    fn grants(&self, caller: &Caller) -> bool {
        match self {
            Allow::Scope(s) => caller.has_scope(s),
            Allow::Sub(id) => caller.kind != Kind::ApiKey && *caller.id == **id,
            Allow::Key(id) => caller.kind == Kind::ApiKey && *caller.id == **id,
        }
    }
}

impl Rule {
    fn new(mode: Option<AuthMode>, default: AuthMode, allow: &[String]) -> Self {
        Rule {
            mode: mode.unwrap_or(default),
            allow: allow.iter().map(|a| Allow::parse(a)).collect(),
        }
    }
}

/// What a request shows of who sent it: its raw `Authorization`, the API key header, and the
/// client certificate the TLS handshake verified (DER).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Credentials<'a> {
    pub(crate) authorization: Option<&'a [u8]>,
    pub(crate) api_key: Option<&'a [u8]>,
    pub(crate) cert: Option<&'a [u8]>,
}

/// Who sent a request, as far as the gate could tell.
#[derive(Clone, Debug, Default)]
pub(crate) enum Identity {
    /// No credential the gate checks was sent.
    #[default]
    Anonymous,
    /// A valid one.
    Caller(Caller),
    /// One that is not valid; why, without the credential.
    Refused(String),
}

impl Identity {
    /// The verified caller, if any.
    pub(crate) fn caller(&self) -> Option<&Caller> {
        match self {
            Identity::Caller(c) => Some(c),
            _ => None,
        }
    }
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Gate {
    /// `[auth] mode`, for what has no route (built-in methods, the sid bridge's).
    default: Rule,
    /// Each `[[routes]]` entry's rule, by index.
    routes: Vec<Rule>,
    /// Each `[[passthrough]]` entry's rule, by index.
    prefixes: Vec<Rule>,
    /// Whether any rule is not `off`: only then are credentials looked at.
    checks: bool,
    jwt: Option<Arc<jwt::Verifier>>,
    keys: Option<keys::ApiKeys>,
    key_header: HeaderName,
    mtls: MtlsIdentity,
    limits: Limits,
    /// `auth.strip_credentials`.
    pub(crate) strip_credentials: bool,
    /// `auth.identity_header`.
    pub(crate) identity_header: Option<HeaderName>,
    /// `server.trusted_proxies` and `server.forwarded_header`: whose word on the client's
    /// address is taken, in which header.
    proxies: Proxies,
}

impl Gate {
    /// The gate of a validated configuration; `previous` is the one before a reload, `link`
    /// the cluster's (for shared limits). Fails when an API key file or a JWKS file cannot be
    /// read, naming its key.
    pub(crate) fn new(
        config: &Config,
        previous: Option<&Gate>,
        link: Option<Arc<crate::cluster::Link>>,
    ) -> Result<Self, String> {
        let auth = &config.auth;
        let default = Rule::new(None, auth.mode, &[]);
        let routes: Vec<Rule> = config
            .routes
            .iter()
            .map(|r| Rule::new(r.auth, auth.mode, &r.allow))
            .collect();
        let prefixes: Vec<Rule> = config
            .passthrough
            .iter()
            .map(|p| Rule::new(p.auth, auth.mode, &p.allow))
            .collect();
        let checks = std::iter::once(&default)
            .chain(&routes)
            .chain(&prefixes)
            .any(|r| r.mode != AuthMode::Off);
        let jwt = match auth.jwt.is_empty() {
            true => None,
            false => {
                let verifier =
                    jwt::Verifier::new(&auth.jwt, previous.and_then(|p| p.jwt.as_deref()))?;
                let verifier = Arc::new(verifier);
                verifier.start();
                Some(verifier)
            }
        };
        let keys = match auth.api_keys.file.is_empty() {
            true => None,
            false => Some(
                keys::ApiKeys::load(&auth.api_keys.file)
                    .map_err(|e| format!("auth.api_keys.file: {e}"))?,
            ),
        };
        Ok(Gate {
            default,
            routes,
            prefixes,
            checks,
            jwt,
            keys,
            key_header: HeaderName::from_bytes(auth.api_keys.header.as_bytes())
                .map_err(|_| "auth.api_keys.header: not a header name".to_owned())?,
            mtls: auth.mtls.identity,
            limits: Limits::new(&config.rate_limits, previous.map(|p| &p.limits), link),
            strip_credentials: auth.strip_credentials,
            identity_header: match auth.identity_header.is_empty() {
                true => None,
                false => Some(
                    HeaderName::from_bytes(auth.identity_header.as_bytes())
                        .map_err(|_| "auth.identity_header: not a header name".to_owned())?,
                ),
            },
            proxies: config.server.proxies(),
        })
    }

    /// A gate that lets nobody in: what serves when the files of `[auth]` could not be read.
    pub(crate) fn closed() -> Self {
        Gate {
            default: Rule {
                mode: AuthMode::Required,
                allow: Vec::new(),
            },
            routes: Vec::new(),
            prefixes: Vec::new(),
            checks: true,
            jwt: None,
            keys: None,
            key_header: X_API_KEY,
            mtls: MtlsIdentity::Off,
            limits: Limits::new(&[], None, None),
            strip_credentials: true,
            identity_header: None,
            proxies: Proxies::default(),
        }
    }

    /// True when nothing is checked: every rule `off` and no rate limit. A call then skips the
    /// gate altogether.
    #[inline]
    pub(crate) fn is_open(&self) -> bool {
        !self.checks && self.limits.is_empty() && self.identity_header.is_none()
    }

    /// Whether callers are told apart: some rule looks at credentials.
    pub(crate) fn identifies(&self) -> bool {
        self.checks
    }

    /// Whether the rule of `route` (a `[[routes]]` index; `None`: `auth.mode`) looks at
    /// credentials.
    pub(crate) fn checks_route(&self, route: Option<usize>) -> bool {
        let rule = route
            .and_then(|i| self.routes.get(i))
            .unwrap_or(&self.default);
        rule.mode != AuthMode::Off
    }

    /// The address of the client of a request from `peer` with `headers`: `peer`, or what a
    /// trusted proxy says ([`Proxies::client_ip`]). Rate limits keyed by `ip`, splits sticky by it, the
    /// caller report, the access log and spans all name this one.
    #[inline]
    pub(crate) fn client_ip(&self, peer: IpAddr, headers: Headers<'_>) -> IpAddr {
        self.proxies.client_ip(peer, &headers)
    }

    /// Whether a request from `peer` came over TLS: `tls`, or what a trusted proxy says
    /// ([`Proxies::over_tls`]).
    pub(crate) fn over_tls(&self, tls: bool, peer: Option<IpAddr>, headers: &Headers<'_>) -> bool {
        self.proxies.over_tls(tls, peer, headers)
    }

    /// The header an API key comes in.
    pub(crate) fn key_header(&self) -> &HeaderName {
        &self.key_header
    }

    /// Who sent a request, from its `Authorization` and API key headers and `cert` (the client
    /// certificate the handshake verified): none is read unless some rule looks at credentials.
    pub(crate) async fn identify(&self, headers: Headers<'_>, cert: Option<&[u8]>) -> Identity {
        if !self.checks {
            return Identity::Anonymous;
        }
        let creds = Credentials {
            authorization: headers.get(&header::AUTHORIZATION),
            api_key: headers.get(&self.key_header),
            cert,
        };
        self.identify_by(creds).await
    }

    /// Who sent a request whose credential came in `Authorization`'s form from elsewhere (a
    /// legacy envelope's `auth`), read as that header is.
    pub(crate) async fn identify_credential(&self, authorization: &[u8]) -> Identity {
        if !self.checks {
            return Identity::Anonymous;
        }
        let creds = Credentials {
            authorization: Some(authorization),
            ..Credentials::default()
        };
        self.identify_by(creds).await
    }

    /// Who sent a request: a client certificate's name first (the handshake verified it), then
    /// a bearer JWT, then an API key. A credential of a kind the configuration does not check
    /// is not one (a bearer token meant for the upstream, with no `[[auth.jwt]]`).
    async fn identify_by(&self, creds: Credentials<'_>) -> Identity {
        if let Some(cert) = creds.cert {
            if let Some(caller) = mtls::caller(cert, self.mtls) {
                return Identity::Caller(caller);
            }
        }
        let bearer = creds
            .authorization
            .and_then(|a| authorization::token_of(a, "bearer"));
        if let (Some(jwt), Some(token)) = (&self.jwt, bearer) {
            if let Some(caller) = jwt.cached(token) {
                return Identity::Caller(caller);
            }
            if let Ok(token) = std::str::from_utf8(token) {
                // Boxed: a signature check that may wait for the key set is no part of the
                // futures of calls whose token is in the cache.
                return match Box::pin(jwt.verify(token)).await {
                    Ok(caller) => Identity::Caller(caller),
                    Err(e) => Identity::Refused(e.to_string()),
                };
            }
        }
        if let Some(keys) = &self.keys {
            if let Some(key) = keys::key_of(creds.api_key, creds.authorization) {
                return match keys.find(key) {
                    Some(caller) => Identity::Caller(caller.clone()),
                    None => Identity::Refused("unknown API key".into()),
                };
            }
        }
        Identity::Anonymous
    }

    /// Whether `identity` may call `method`, routed by `route` (a `[[routes]]` index; `None`:
    /// a built-in or sid method, under `auth.mode`), and a token of every rate limit on it.
    pub(crate) fn admit_call(
        &self,
        route: Option<usize>,
        method: &str,
        identity: &Identity,
        subject: &Subject<'_>,
    ) -> Result<(), GatewayError> {
        let rule = route
            .and_then(|i| self.routes.get(i))
            .unwrap_or(&self.default);
        self.allowed(rule, identity, method)?;
        self.limit(Target::Method(method), subject)
    }

    /// The same for a pass-through request to `path` under prefix `prefix` (its index).
    pub(crate) fn admit_path(
        &self,
        prefix: usize,
        path: &str,
        identity: &Identity,
        subject: &Subject<'_>,
    ) -> Result<(), GatewayError> {
        let rule = self.prefixes.get(prefix).unwrap_or(&self.default);
        self.allowed(rule, identity, path)?;
        self.limit(Target::Path(path), subject)
    }

    /// Whether the rule of a call lets `identity` in: a bad credential is refused wherever
    /// credentials are looked at; `required` needs a caller; an `allow` list needs a caller
    /// one of its entries grants.
    fn allowed(&self, rule: &Rule, identity: &Identity, what: &str) -> Result<(), GatewayError> {
        if rule.mode == AuthMode::Off {
            return Ok(());
        }
        let caller = match identity {
            Identity::Refused(reason) => {
                return Err(GatewayError::Unauthenticated {
                    sent: true,
                    reason: reason.clone(),
                })
            }
            Identity::Anonymous if rule.mode == AuthMode::Required || !rule.allow.is_empty() => {
                return Err(GatewayError::Unauthenticated {
                    sent: false,
                    reason: String::new(),
                })
            }
            Identity::Anonymous => return Ok(()),
            Identity::Caller(c) => c,
        };
        match rule.allow.is_empty() || rule.allow.iter().any(|a| a.grants(caller)) {
            true => Ok(()),
            false => Err(GatewayError::Forbidden(what.to_owned())),
        }
    }

    fn limit(&self, target: Target<'_>, subject: &Subject<'_>) -> Result<(), GatewayError> {
        if self.limits.is_empty() {
            return Ok(());
        }
        match self.limits.check(target, subject) {
            Ok(_) => Ok(()),
            Err(limited) => Err(GatewayError::RateLimited {
                limit: limited.limit.to_string(),
                retry_after_ms: limited.retry_after_ms,
                policy: limited.policy,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(kind: Kind, id: &str, scopes: &[&str]) -> Caller {
        Caller::new(kind, id, scopes.iter().map(|s| s.to_string()))
    }

    fn rule(mode: AuthMode, allow: &[&str]) -> Rule {
        let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
        Rule::new(Some(mode), AuthMode::Off, &allow)
    }

    fn gate() -> Gate {
        Gate::new(&Config::default(), None, None).unwrap()
    }

    #[test]
    fn a_default_gate_is_open() {
        assert!(gate().is_open());
    }

    #[test]
    fn allow_entries_grant_by_scope_subject_or_key_id() {
        let g = gate();
        let r = rule(
            AuthMode::Required,
            &["scope:plans:read", "sub:alice", "key:ci-bot"],
        );
        let ok = |c: Caller| g.allowed(&r, &Identity::Caller(c), "m");
        assert!(ok(caller(Kind::Jwt, "bob", &["plans:read"])).is_ok());
        assert!(ok(caller(Kind::Jwt, "alice", &[])).is_ok());
        assert!(ok(caller(Kind::Mtls, "alice", &[])).is_ok());
        assert!(ok(caller(Kind::ApiKey, "ci-bot", &[])).is_ok());
        assert!(
            matches!(
                ok(caller(Kind::ApiKey, "alice", &[])),
                Err(GatewayError::Forbidden(_))
            ),
            "an API key's id is not a subject"
        );
        assert!(matches!(
            ok(caller(Kind::Jwt, "ci-bot", &["plans:write"])),
            Err(GatewayError::Forbidden(_))
        ));
    }

    #[test]
    fn modes_decide_what_an_anonymous_or_refused_caller_gets() {
        let g = gate();
        let anon = Identity::Anonymous;
        let bad = Identity::Refused("expired".into());
        assert!(g.allowed(&rule(AuthMode::Off, &[]), &bad, "m").is_ok());
        assert!(g
            .allowed(&rule(AuthMode::Optional, &[]), &anon, "m")
            .is_ok());
        assert!(matches!(
            g.allowed(&rule(AuthMode::Optional, &[]), &bad, "m"),
            Err(GatewayError::Unauthenticated { sent: true, .. })
        ));
        assert!(matches!(
            g.allowed(&rule(AuthMode::Required, &[]), &anon, "m"),
            Err(GatewayError::Unauthenticated { sent: false, .. })
        ));
        assert!(matches!(
            g.allowed(&rule(AuthMode::Optional, &["sub:a"]), &anon, "m"),
            Err(GatewayError::Unauthenticated { sent: false, .. })
        ));
    }
}
