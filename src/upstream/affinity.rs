//! Who a call's caller is, as a stable hash: what keeps a caller on one side of a split
//! (`routes[].sticky`) and on one endpoint of an upstream (`upstreams[].hash_key`).
//!
//! The hash is FNV-1a followed by a 64-bit finaliser, fixed here rather than taken from `std`
//! (whose `DefaultHasher` may change between Rust releases), so every replica and every restart
//! puts a caller in the same place.

use std::net::IpAddr;

use crate::config::Sticky;
use crate::http::headers::Headers;
use crate::wire::legacy::Auth;

/// What identifies the caller of one call, borrowed from the request.
#[derive(Clone, Copy, Debug, Default)]
pub struct Who<'a> {
    /// The credential: `Authorization` or the legacy envelope's `auth`.
    pub auth: Option<&'a Auth>,
    /// The request's headers.
    pub headers: Option<Headers<'a>>,
    /// The client's address.
    pub ip: Option<IpAddr>,
    /// The caller `[auth]` verified: how it proved it (`jwt`, `api_key`, `mtls`) and its id.
    /// What `auth` keys mean when it is there, so the migration knows callers by name.
    pub caller: Option<(&'static str, &'a str)>,
}

/// The caller's key under `rule`, or `None` when the request does not carry it. Credentials
/// are only ever hashed here and never returned.
pub(crate) fn key_hash(rule: &Sticky, who: &Who<'_>) -> Option<u64> {
    match rule {
        Sticky::Auth if who.caller.is_some() => {
            let (kind, id) = who.caller?;
            Some(hash(kind.as_bytes()) ^ hash(id.as_bytes()))
        }
        Sticky::Auth => {
            let a = who.auth?;
            // The token when the auth object has one, else the object as sent.
            let h = match a.0.get("token").and_then(|t| t.as_str()) {
                Some(t) => hash(t.as_bytes()),
                None => hash(serde_json::to_string(&a.0).ok()?.as_bytes()),
            };
            Some(h)
        }
        Sticky::Header(name) => Some(hash(who.headers?.get(name.as_str())?)),
        Sticky::Ip => Some(hash(who.ip?.to_string().as_bytes())),
    }
}

/// The key under `rule` of a request passed through as it came (no envelope): `auth` is its
/// `Authorization` header; `get` reads a header by (lowercase) name.
pub(crate) fn request_key<'a>(
    rule: &Sticky,
    get: impl Fn(&str) -> Option<&'a [u8]>,
    ip: Option<IpAddr>,
) -> Option<u64> {
    match rule {
        Sticky::Auth => get("authorization").map(hash),
        Sticky::Header(name) => get(name.as_str()).map(hash),
        Sticky::Ip => Some(hash(ip?.to_string().as_bytes())),
    }
}

/// FNV-1a over `bytes`, then a finaliser that spreads every input bit over the whole word.
pub(crate) fn hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    mix(h)
}

/// The splitmix64 finaliser.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_rule_and_hide_the_token() {
        let auth = Auth::bearer("s3cret");
        let mut headers = axum::http::HeaderMap::new();
        headers.insert("x-client", "billing".parse().unwrap());
        let who = Who {
            auth: Some(&auth),
            headers: Some(Headers::Map(&headers)),
            ip: Some("10.0.0.1".parse().unwrap()),
            caller: None,
        };
        assert_eq!(key_hash(&Sticky::Auth, &who), Some(hash(b"s3cret")));
        let named = Who {
            caller: Some(("jwt", "alice")),
            ..who
        };
        assert_eq!(
            key_hash(&Sticky::Auth, &named),
            Some(hash(b"jwt") ^ hash(b"alice")),
            "a verified caller is keyed by its name, not its token"
        );
        assert_eq!(
            key_hash(&Sticky::Header("x-client".into()), &who),
            Some(hash(b"billing"))
        );
        assert_eq!(key_hash(&Sticky::Ip, &who), Some(hash(b"10.0.0.1")));
        assert_eq!(key_hash(&Sticky::Auth, &Who::default()), None);
        assert_eq!(key_hash(&Sticky::Header("x-other".into()), &who), None);
    }
}
