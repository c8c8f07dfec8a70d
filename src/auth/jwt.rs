//! Callers proven by a JWT of a configured identity provider (`[[auth.jwt]]`), sent as
//! `Authorization: Bearer`.
//!
//! A token is taken to the issuer its (unverified) `iss` names, and only a configured one; its
//! signature is checked with that issuer's keys alone, with an algorithm the issuer accepts
//! and the key's type takes (never `none`, never HMAC: a public key must not double as a
//! secret). Keys come from a file read at start and reload, or from a `jwks_url` fetched in the
//! background and again at once when a token names a key not seen yet (a rotation), at most
//! once per 10 s. A token verified once is kept in a bounded [`cache`] until its `exp`.
//!
//! Tokens are never logged and never put in an error: [`JwtError`]'s text is sent to clients.

mod cache;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

use super::jwks::{Fetcher, KeySet};
use super::{Caller, Kind};
use crate::config::Jwt;

/// The least time between two fetches made because a token named an unknown key.
const REFETCH_EVERY: Duration = Duration::from_secs(10);

/// The least time between two warnings of one issuer's failing fetches.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Longer bearer tokens are refused unread.
const MAX_TOKEN: usize = 16 * 1024;

type Claims = Map<String, Value>;

/// Why a token was refused. The text is short and safe to send the client: it holds no key
/// material and nothing of the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum JwtError {
    /// Not a JWT, or one whose header names no algorithm the gateway knows (`none` included).
    #[error("malformed token")]
    Malformed,
    /// Its `iss` is not a configured issuer.
    #[error("token of an unknown issuer")]
    UnknownIssuer,
    /// Its algorithm is not one its issuer accepts, or not one its key takes.
    #[error("token algorithm not accepted")]
    Algorithm,
    /// No key of its issuer has its `kid`, even after fetching the key set again.
    #[error("token signed by an unknown key")]
    UnknownKey,
    #[error("token signature is not valid")]
    Signature,
    #[error("token expired")]
    Expired,
    #[error("token not valid yet")]
    NotYetValid,
    /// Its `aud` names none of the issuer's `audiences`.
    #[error("token audience not accepted")]
    Audience,
    /// A claim that must be there (`exp`, `aud`, the subject claim) is missing or not of its
    /// type.
    #[error("token has no valid {0:?} claim")]
    Claim(Box<str>),
}

/// See the module docs. One per configuration; a reload builds a new one from the old.
pub(crate) struct Verifier {
    issuers: Vec<Issuer>,
    cache: cache::Cache,
    started: AtomicBool,
}

/// One `[[auth.jwt]]` entry.
struct Issuer {
    issuer: Box<str>,
    /// Per accepted algorithm, what `jsonwebtoken` checks: the signature, `iss`, `aud`, and
    /// that `exp` is there (times are checked here, in milliseconds).
    validations: Vec<(Algorithm, Validation)>,
    leeway_ms: u64,
    subject_claim: Box<str>,
    keys: ArcSwap<KeySet>,
    /// Raised when a new key set drops a key, so tokens it verified leave the cache.
    generation: AtomicU64,
    /// `None`: a `jwks_file`.
    remote: Option<Remote>,
}

/// Where an issuer's keys are fetched from.
struct Remote {
    url: Box<str>,
    fetcher: Fetcher,
    refresh: Duration,
    /// Held while fetching, so callers that find an unknown key wait on the fetch under way;
    /// it holds when the last fetch for an unknown key was made.
    fetching: tokio::sync::Mutex<Option<Instant>>,
    /// Fetches finished: a caller that waited tells by it that one was made meanwhile.
    fetched: AtomicU64,
    /// When a failing fetch was last warned of ([`crate::util::clock::now_ms`]; 0: never).
    warned_ms: AtomicU64,
}

impl Verifier {
    /// Builds from config: reads each `jwks_file` now (an error names
    /// `auth.jwt[i].jwks_file`); keys of a `jwks_url` are fetched by [`Verifier::start`].
    /// `previous`, the verifier before a reload, lends the keys it fetched to an issuer whose
    /// `jwks_url` is unchanged, so a reload never leaves a window without keys.
    pub(crate) fn new(jwts: &[Jwt], previous: Option<&Verifier>) -> Result<Self, String> {
        let mut issuers: Vec<Issuer> = Vec::with_capacity(jwts.len());
        for (i, jwt) in jwts.iter().enumerate() {
            if issuers.iter().any(|x| *x.issuer == *jwt.issuer) {
                return Err(format!(
                    "auth.jwt[{i}].issuer: {:?} is configured twice",
                    jwt.issuer
                ));
            }
            let kept = previous.and_then(|p| p.fetched_keys(jwt));
            issuers.push(
                Issuer::new(jwt, kept).map_err(|(key, e)| format!("auth.jwt[{i}].{key}: {e}"))?,
            );
        }
        Ok(Verifier {
            issuers,
            cache: cache::Cache::new(),
            started: AtomicBool::new(false),
        })
    }

    /// The keys this verifier fetched for `jwt`'s issuer from `jwt`'s `jwks_url`.
    fn fetched_keys(&self, jwt: &Jwt) -> Option<Arc<KeySet>> {
        self.issuers
            .iter()
            .find(|x| *x.issuer == *jwt.issuer)
            .filter(|x| x.remote.as_ref().is_some_and(|r| *r.url == *jwt.jwks_url))
            .map(|x| x.keys.load_full())
    }

    /// Spawns, when a tokio runtime runs, the refresh of each `jwks_url` issuer: a fetch at
    /// once, then every `jwks_refresh_ms`. A failed fetch keeps the cached keys. The tasks
    /// hold the verifier weakly and end once it is dropped.
    pub(crate) fn start(self: &Arc<Self>) {
        let Some(runtime) = crate::util::background::handle() else {
            return;
        };
        if self.is_empty() || self.started.swap(true, Ordering::Relaxed) {
            return;
        }
        for (i, issuer) in self.issuers.iter().enumerate() {
            if let Some(remote) = &issuer.remote {
                runtime.spawn(refresh_loop(Arc::downgrade(self), i, remote.refresh));
            }
        }
    }

    /// The caller a bearer token proves, checked as the module docs say; a token seen before
    /// comes from the cache.
    pub(crate) async fn verify(&self, token: &str) -> Result<Caller, JwtError> {
        match self.cached(token.as_bytes()) {
            Some(caller) => Ok(caller),
            None => self.verify_uncached(token, unix_ms()).await,
        }
    }

    /// The caller a token verified before proves, while it is good: the token's bytes as they
    /// came (no UTF-8 check, which a token seen before has passed).
    #[inline]
    pub(crate) fn cached(&self, token: &[u8]) -> Option<Caller> {
        let current = |i: usize, generation: u64| {
            self.issuers[i].generation.load(Ordering::Acquire) == generation
        };
        self.cache.get(token, unix_ms(), current)
    }

    async fn verify_uncached(&self, token: &str, now_ms: u64) -> Result<Caller, JwtError> {
        if token.len() > MAX_TOKEN {
            return Err(JwtError::Malformed);
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| JwtError::Malformed)?;
        let i = self.issuer_of(token)?;
        let issuer = &self.issuers[i];
        let validation = issuer.validation(header.alg).ok_or(JwtError::Algorithm)?;
        let (claims, generation) = issuer
            .check(token, header.kid.as_deref(), header.alg, validation)
            .await?;
        let (caller, exp_ms) = issuer.caller(&claims, now_ms)?;
        self.cache
            .insert(token, caller.clone(), exp_ms, (i, generation), now_ms);
        Ok(caller)
    }

    /// The configured issuer the token's unverified `iss` names.
    fn issuer_of(&self, token: &str) -> Result<usize, JwtError> {
        #[derive(serde::Deserialize)]
        struct Unverified {
            iss: Option<String>,
        }
        // The signature is checked later, with the keys of the issuer chosen here.
        static UNVERIFIED: LazyLock<Validation> = LazyLock::new(|| {
            let mut v = Validation::default();
            v.insecure_disable_signature_validation();
            v.required_spec_claims.clear();
            v.validate_exp = false;
            v.validate_aud = false;
            v
        });
        static NO_KEY: LazyLock<DecodingKey> = LazyLock::new(|| DecodingKey::from_secret(&[]));
        let claims = jsonwebtoken::decode::<Unverified>(token, &NO_KEY, &UNVERIFIED)
            .map_err(|_| JwtError::Malformed)?
            .claims;
        let iss = claims.iss.ok_or_else(|| JwtError::Claim("iss".into()))?;
        self.issuers
            .iter()
            .position(|x| *x.issuer == *iss)
            .ok_or(JwtError::UnknownIssuer)
    }

    /// Whether any issuer is configured.
    pub(crate) fn is_empty(&self) -> bool {
        self.issuers.is_empty()
    }
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(
                self.issuers
                    .iter()
                    .map(|x| (&x.issuer, x.keys.load().len())),
            )
            .finish()
    }
}

/// One issuer's refresh: fetches at once, then every `every`, while the verifier lives.
async fn refresh_loop(verifier: Weak<Verifier>, i: usize, every: Duration) {
    loop {
        let Some(v) = verifier.upgrade() else {
            return;
        };
        v.issuers[i].refresh().await;
        drop(v);
        tokio::time::sleep(every).await;
    }
}

impl Issuer {
    /// An issuer of `jwt`, with `kept` (a previous verifier's) keys for its `jwks_url`. An
    /// error names the offending key.
    fn new(jwt: &Jwt, kept: Option<Arc<KeySet>>) -> Result<Issuer, (&'static str, String)> {
        if jwt.issuer.is_empty() {
            return Err(("issuer", "required: the `iss` its tokens carry".into()));
        }
        let audiences: Vec<&str> = jwt
            .audiences
            .iter()
            .map(String::as_str)
            .filter(|a| !a.is_empty())
            .collect();
        if audiences.is_empty() {
            return Err(("audiences", "name at least one audience".into()));
        }
        if jwt.subject_claim.is_empty() {
            return Err(("subject_claim", "must name a claim".into()));
        }
        let validations = algorithms(&jwt.algorithms)?
            .into_iter()
            .map(|alg| (alg, validation(alg, &jwt.issuer, &audiences)))
            .collect();
        let (keys, remote) = match (jwt.jwks_file.is_empty(), jwt.jwks_url.is_empty()) {
            (false, true) => (Arc::new(read_keys(&jwt.jwks_file)?), None),
            (true, false) => (kept.unwrap_or_default(), Some(Remote::new(jwt)?)),
            (false, false) => {
                return Err(("jwks_file", "set jwks_url or jwks_file, not both".into()))
            }
            (true, true) => return Err(("jwks_url", "set jwks_url or jwks_file".into())),
        };
        Ok(Issuer {
            issuer: jwt.issuer.as_str().into(),
            validations,
            leeway_ms: jwt.leeway_ms,
            subject_claim: jwt.subject_claim.as_str().into(),
            keys: ArcSwap::new(keys),
            generation: AtomicU64::new(0),
            remote,
        })
    }

    /// What a token signed by `alg` is checked with, when the issuer accepts `alg`.
    fn validation(&self, alg: Algorithm) -> Option<&Validation> {
        self.validations
            .iter()
            .find(|(a, _)| *a == alg)
            .map(|(_, v)| v)
    }

    /// The token's claims once its signature, `iss` and `aud` are checked, and the key set
    /// generation that checked them. An unknown key of a `jwks_url` issuer makes it fetch
    /// the set again (see [`Issuer::refetch`]) and try once more.
    async fn check(
        &self,
        token: &str,
        kid: Option<&str>,
        alg: Algorithm,
        validation: &Validation,
    ) -> Result<(Claims, u64), JwtError> {
        let generation = self.generation.load(Ordering::Acquire);
        match check_with(&self.keys.load(), token, kid, alg, validation) {
            Err(JwtError::UnknownKey) => {}
            other => return other.map(|c| (c, generation)),
        }
        match &self.remote {
            Some(remote) if self.refetch(remote).await => {
                let generation = self.generation.load(Ordering::Acquire);
                check_with(&self.keys.load(), token, kid, alg, validation).map(|c| (c, generation))
            }
            _ => Err(JwtError::UnknownKey),
        }
    }

    /// Fetches the key set again for a token that named an unknown key, unless one was so
    /// fetched less than [`REFETCH_EVERY`] ago. A caller that waited on a fetch under way
    /// takes that one. True when a fetch was made, so looking again may find the key.
    async fn refetch(&self, remote: &Remote) -> bool {
        let seen = remote.fetched.load(Ordering::Acquire);
        let mut last = remote.fetching.lock().await;
        if remote.fetched.load(Ordering::Acquire) != seen {
            return true;
        }
        if last.is_some_and(|t| t.elapsed() < REFETCH_EVERY) {
            return false;
        }
        *last = Some(Instant::now());
        self.fetch(remote).await
    }

    /// The background refresh's fetch; nothing is done without a remote.
    async fn refresh(&self) {
        if let Some(remote) = &self.remote {
            let _one_at_a_time = remote.fetching.lock().await;
            self.fetch(remote).await;
        }
    }

    /// Fetches the set (the caller holds `remote.fetching`) and takes it; a failure keeps the
    /// keys there are. True when a set was taken.
    async fn fetch(&self, remote: &Remote) -> bool {
        let result = remote.fetcher.fetch().await;
        remote.fetched.fetch_add(1, Ordering::AcqRel);
        match result {
            Ok(set) => {
                self.replace_keys(set);
                true
            }
            Err(why) => {
                self.warn(remote, &why);
                false
            }
        }
    }

    fn replace_keys(&self, set: KeySet) {
        let old = self.keys.load_full();
        let dropped = !old.kept_in(&set);
        if dropped || !set.kept_in(&old) {
            tracing::info!(issuer = %self.issuer, keys = set.len(), "JWT issuer's key set changed");
        }
        // Keys first, then the generation: a caller that reads the new generation reads the
        // new keys too.
        self.keys.store(Arc::new(set));
        if dropped {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Warns of a failed fetch, at most once per [`WARN_EVERY`].
    fn warn(&self, remote: &Remote, why: &str) {
        let now = crate::util::clock::now_ms();
        let last = remote.warned_ms.load(Ordering::Relaxed);
        if last != 0 && now < last + WARN_EVERY.as_millis() as u64 {
            return;
        }
        if remote
            .warned_ms
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            tracing::warn!(
                issuer = %self.issuer,
                url = %crate::util::redact::url(&remote.url),
                reason = %why,
                cached_keys = self.keys.load().len(),
                "fetching a JWT issuer's key set failed: its cached keys stay in use"
            );
        }
    }

    /// The caller verified claims name and when the token expires (ms since the epoch),
    /// once `exp` and `nbf` hold at `now_ms` with the issuer's leeway.
    fn caller(&self, claims: &Claims, now_ms: u64) -> Result<(Caller, u64), JwtError> {
        let exp_ms = claims
            .get("exp")
            .and_then(seconds_to_ms)
            .ok_or_else(|| JwtError::Claim("exp".into()))?;
        if now_ms >= exp_ms.saturating_add(self.leeway_ms) {
            return Err(JwtError::Expired);
        }
        if let Some(nbf) = claims.get("nbf") {
            let nbf_ms = seconds_to_ms(nbf).ok_or_else(|| JwtError::Claim("nbf".into()))?;
            if nbf_ms > now_ms.saturating_add(self.leeway_ms) {
                return Err(JwtError::NotYetValid);
            }
        }
        let id = claims
            .get(&*self.subject_claim)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| JwtError::Claim(self.subject_claim.clone()))?;
        Ok((Caller::new(Kind::Jwt, id, scopes(claims)), exp_ms))
    }
}

impl Remote {
    fn new(jwt: &Jwt) -> Result<Remote, (&'static str, String)> {
        Ok(Remote {
            url: jwt.jwks_url.as_str().into(),
            fetcher: Fetcher::new(&jwt.jwks_url, &jwt.ca_file)?,
            // As `config` requires; a smaller value would fetch in a loop.
            refresh: Duration::from_millis(jwt.jwks_refresh_ms.max(10_000)),
            fetching: tokio::sync::Mutex::new(None),
            fetched: AtomicU64::new(0),
            warned_ms: AtomicU64::new(0),
        })
    }
}

/// The configured algorithms, each an asymmetric signature one.
fn algorithms(names: &[String]) -> Result<Vec<Algorithm>, (&'static str, String)> {
    if names.is_empty() {
        return Err(("algorithms", "name at least one algorithm".into()));
    }
    names
        .iter()
        .map(|name| {
            crate::config::JWT_ALGORITHMS
                .contains(&name.as_str())
                .then(|| name.parse::<Algorithm>().ok())
                .flatten()
                .ok_or_else(|| {
                    let accepted = crate::config::JWT_ALGORITHMS.join(", ");
                    ("algorithms", format!("{name:?} is not one of {accepted}"))
                })
        })
        .collect()
}

/// What `jsonwebtoken` checks of a token signed by `alg`.
fn validation(alg: Algorithm, issuer: &str, audiences: &[&str]) -> Validation {
    let mut v = Validation::new(alg);
    v.set_required_spec_claims(&["exp", "iss", "aud"]);
    v.set_issuer(&[issuer]);
    v.set_audience(audiences);
    // In milliseconds, with the configured leeway, by [`Issuer::caller`].
    v.validate_exp = false;
    v.validate_nbf = false;
    v.leeway = 0;
    v
}

fn read_keys(path: &str) -> Result<KeySet, (&'static str, String)> {
    let text = crate::config::read_jwks_file(path).map_err(|e| ("jwks_file", e))?;
    KeySet::parse(text.as_bytes()).map_err(|e| ("jwks_file", format!("{path}: {e}")))
}

/// The claims of a token signed by one of `keys`: the key of its `kid`, or without a `kid`
/// each key `alg` goes with, in turn.
fn check_with(
    keys: &KeySet,
    token: &str,
    kid: Option<&str>,
    alg: Algorithm,
    validation: &Validation,
) -> Result<Claims, JwtError> {
    let mut refused = JwtError::UnknownKey;
    for key in keys.named(kid) {
        if !key.takes(alg) {
            if refused == JwtError::UnknownKey {
                refused = JwtError::Algorithm;
            }
            continue;
        }
        match jsonwebtoken::decode::<Claims>(token, &key.decoding, validation) {
            Ok(data) => return Ok(data.claims),
            // Another key may have signed it; a key the crypto refuses is one that did not.
            Err(e) if is_signature_error(e.kind()) => refused = JwtError::Signature,
            Err(e) => return Err(refusal(e.kind())),
        }
    }
    Err(refused)
}

fn is_signature_error(kind: &ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::InvalidSignature
            | ErrorKind::Crypto(_)
            | ErrorKind::InvalidEcdsaKey
            | ErrorKind::InvalidRsaKey(_)
            | ErrorKind::InvalidKeyFormat
    )
}

/// Why `jsonwebtoken` refused a token whose signature it checked.
fn refusal(kind: &ErrorKind) -> JwtError {
    match kind {
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => JwtError::Algorithm,
        ErrorKind::ExpiredSignature => JwtError::Expired,
        ErrorKind::ImmatureSignature => JwtError::NotYetValid,
        ErrorKind::InvalidIssuer => JwtError::UnknownIssuer,
        ErrorKind::InvalidAudience => JwtError::Audience,
        ErrorKind::MissingRequiredClaim(c) => JwtError::Claim(c.as_str().into()),
        k if is_signature_error(k) => JwtError::Signature,
        _ => JwtError::Malformed,
    }
}

/// A NumericDate (seconds, maybe with a fraction) in milliseconds.
fn seconds_to_ms(v: &Value) -> Option<u64> {
    if let Some(s) = v.as_u64() {
        return s.checked_mul(1000);
    }
    let s = v.as_f64()?;
    (s.is_finite() && s >= 0.0).then_some((s * 1000.0) as u64)
}

/// The `scope` (space-separated) and `scp` (an array, or a space-separated string) claims'
/// scopes, each once.
fn scopes(claims: &Claims) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(Value::String(s)) = claims.get("scope") {
        add_words(&mut out, s);
    }
    match claims.get("scp") {
        Some(Value::String(s)) => add_words(&mut out, s),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .for_each(|s| add_words(&mut out, s)),
        _ => {}
    }
    out
}

fn add_words(out: &mut Vec<String>, s: &str) {
    for w in s.split_whitespace() {
        if !out.iter().any(|o| o == w) {
            out.push(w.to_owned());
        }
    }
}

/// Milliseconds since the Unix epoch: the clock `exp` and `nbf` are of.
fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
