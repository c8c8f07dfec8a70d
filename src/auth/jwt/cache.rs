//! Tokens verified already, so a client that sends the same bearer token on every call pays a
//! hash and a lookup, not a signature check.
//!
//! Entries are found by a seeded 64-bit hash of the token and hold the token itself, which a
//! lookup compares: two tokens of one hash only cost a miss, never one caller taken for
//! another. An entry is good until the token's `exp` (no leeway: the cache never extends a
//! token's life) and while the key set that verified it still holds every key it had (the
//! issuer's generation); a full cache drops its expired entries, then those nearest to expiry.

use crate::auth::Caller;
use crate::util::bounded::{Bounded, Evict};

/// Entries kept at most.
pub(super) const CAPACITY: usize = 10_000;

/// Longer tokens are verified each time: with this bound the cache holds at most ~40 MiB of
/// tokens.
const MAX_CACHED_TOKEN: usize = 4096;

/// What a verified token proved.
struct Entry {
    token: Box<str>,
    caller: Caller,
    /// The token's `exp`, in milliseconds since the Unix epoch.
    exp_ms: u64,
    /// The issuer (its index) and its key set generation when the token was verified.
    issuer: usize,
    generation: u64,
}

/// An expired token is stale; when none is, those nearest to expiry go first.
impl Evict for Entry {
    fn stale(&self, now_ms: u64) -> bool {
        self.exp_ms <= now_ms
    }
    fn rank(&self) -> u64 {
        self.exp_ms
    }
}

/// See the module docs.
pub(super) struct Cache(Bounded<Entry>);

impl Cache {
    pub(super) fn new() -> Cache {
        Cache(Bounded::new(CAPACITY))
    }

    /// The caller `token` proved, while it is good at `now_ms`; `current(issuer, generation)`
    /// says whether the key set that verified it still holds all its keys. One hash, one read
    /// lock, no allocation.
    #[inline]
    pub(super) fn get(
        &self,
        token: &[u8],
        now_ms: u64,
        current: impl Fn(usize, u64) -> bool,
    ) -> Option<Caller> {
        self.0.peek(self.0.hash(token), |e| {
            let e = e?;
            (now_ms < e.exp_ms
                && crate::util::secret::same(e.token.as_bytes(), token)
                && current(e.issuer, e.generation))
            .then(|| e.caller.clone())
        })
    }

    /// Keeps what `token` proved until `exp_ms`.
    pub(super) fn insert(
        &self,
        token: &str,
        caller: Caller,
        exp_ms: u64,
        (issuer, generation): (usize, u64),
        now_ms: u64,
    ) {
        if token.len() > MAX_CACHED_TOKEN || exp_ms <= now_ms {
            return;
        }
        let entry = Entry {
            token: token.into(),
            caller,
            exp_ms,
            issuer,
            generation,
        };
        self.0.insert(self.0.hash(token.as_bytes()), now_ms, entry);
    }

    /// Entries held, expired ones included.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Kind;

    fn caller(id: &str) -> Caller {
        Caller::new(Kind::Jwt, id, Vec::new())
    }

    #[test]
    fn an_entry_is_good_until_exp_and_while_its_keys_are() {
        let c = Cache::new();
        c.insert("a.b.c", caller("alice"), 2_000, (0, 7), 1_000);
        let now_current = |_: usize, g: u64| g == 7;
        assert_eq!(
            c.get(b"a.b.c", 1_999, now_current).unwrap().id.as_ref(),
            "alice"
        );
        assert!(
            c.get(b"a.b.c", 2_000, now_current).is_none(),
            "expired at exp"
        );
        assert!(
            c.get(b"a.b.c", 1_500, |_, g| g == 8).is_none(),
            "its keys changed"
        );
        assert!(c.get(b"a.b.d", 1_500, now_current).is_none());
    }

    #[test]
    fn an_expired_or_long_token_is_not_kept() {
        let c = Cache::new();
        c.insert("t", caller("a"), 1_000, (0, 0), 1_000);
        c.insert(
            &"x".repeat(MAX_CACHED_TOKEN + 1),
            caller("a"),
            9_000,
            (0, 0),
            1_000,
        );
        assert_eq!(c.len(), 0);
    }

    #[test]
    fn the_cache_stays_within_its_bound() {
        let c = Cache::new();
        for i in 0..CAPACITY * 3 {
            c.insert(&format!("token-{i}"), caller("a"), 10_000, (0, 0), 1);
        }
        assert!(c.len() <= CAPACITY, "{} entries", c.len());
        assert!(c.len() >= CAPACITY / 2, "{} entries", c.len());
        // Expired entries go first.
        c.insert("fresh", caller("b"), 50_000, (0, 0), 20_000);
        assert!(c.get(b"fresh", 20_001, |_, _| true).is_some());
    }
}
