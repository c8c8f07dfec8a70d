//! Which side of a split serves a caller: a stable hash of who the caller is, placed on the
//! weights. Pure: no clocks, no randomness but what the caller passes in.
//!
//! The hash is FNV-1a followed by a 64-bit finaliser, fixed here rather than taken from `std`
//! (whose `DefaultHasher` may change between Rust releases), so every replica and every restart
//! puts a caller on the same side. Sides are laid out primary first, so when a canary's weight
//! grows from 10 to 20 the callers it already had stay on it.

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
}

/// The caller's key under `rule`, or `None` when the request does not carry it. Credentials
/// are only ever hashed here and never returned.
pub(crate) fn key_hash(rule: &Sticky, who: &Who<'_>) -> Option<u64> {
    match rule {
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

/// The side at `point` (any u64: a caller's hash salted by the route, or a random number for a
/// caller without a key) given `weights`. `None` when every weight is 0.
pub(crate) fn choose(weights: &[u32], point: u64) -> Option<usize> {
    let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
    if total == 0 {
        return None;
    }
    // point / 2^64 scaled onto [0, total): the same fraction of the line whatever the weights.
    let at = ((u128::from(point) * u128::from(total)) >> 64) as u64;
    let mut acc = 0u64;
    for (i, w) in weights.iter().enumerate() {
        acc += u64::from(*w);
        if at < acc {
            return Some(i);
        }
    }
    None
}

/// A caller's point on a route: the caller's hash salted with the route's name, so a caller on
/// the canary of one route is not thereby on the canary of every route.
pub(crate) fn point(route_salt: u64, caller: u64) -> u64 {
    mix(route_salt ^ caller.rotate_left(17))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_are_honoured_over_many_callers() {
        let salt = hash(b"plans");
        let mut counts = [0usize; 2];
        for i in 0..100_000 {
            let caller = hash(format!("token-{i}").as_bytes());
            counts[choose(&[90, 10], point(salt, caller)).unwrap()] += 1;
        }
        let share = counts[1] as f64 / 100_000.0;
        assert!((share - 0.10).abs() < 0.005, "canary share {share}");
    }

    #[test]
    fn a_growing_canary_keeps_its_callers() {
        let salt = hash(b"r");
        for i in 0..10_000 {
            let p = point(salt, hash(format!("c{i}").as_bytes()));
            if choose(&[90, 10], p) == Some(1) {
                assert_eq!(choose(&[80, 20], p), Some(1));
            }
        }
    }

    #[test]
    fn zero_weights_choose_nothing_and_extremes_hold() {
        assert_eq!(choose(&[0, 0], 5), None);
        assert_eq!(choose(&[0, 7], 0), Some(1));
        assert_eq!(choose(&[3, 0], u64::MAX), Some(0));
        assert_eq!(choose(&[1, 1], u64::MAX), Some(1));
        assert_eq!(choose(&[1, 1], 0), Some(0));
    }

    #[test]
    fn keys_follow_the_rule_and_hide_the_token() {
        let auth = Auth::bearer("s3cret");
        let mut headers = axum::http::HeaderMap::new();
        headers.insert("x-client", "billing".parse().unwrap());
        let who = Who {
            auth: Some(&auth),
            headers: Some(Headers::Map(&headers)),
            ip: Some("10.0.0.1".parse().unwrap()),
        };
        assert_eq!(key_hash(&Sticky::Auth, &who), Some(hash(b"s3cret")));
        assert_eq!(
            key_hash(&Sticky::Header("x-client".into()), &who),
            Some(hash(b"billing"))
        );
        assert_eq!(key_hash(&Sticky::Ip, &who), Some(hash(b"10.0.0.1")));
        assert_eq!(key_hash(&Sticky::Auth, &Who::default()), None);
        assert_eq!(key_hash(&Sticky::Header("x-other".into()), &who), None);
    }
}
