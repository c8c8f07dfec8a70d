//! Tokens verified already, so a client that sends the same bearer token on every call pays a
//! hash and a lookup, not a signature check.
//!
//! Entries are found by a seeded 64-bit hash of the token and hold the token itself, which a
//! lookup compares: two tokens of one hash only cost a miss, never one caller taken for
//! another. An entry is good until the token's `exp` (no leeway: the cache never extends a
//! token's life) and while the key set that verified it still holds every key it had (the
//! issuer's generation); a full shard drops its expired entries, then arbitrary ones.

use std::hash::BuildHasher;
use std::sync::{PoisonError, RwLock};

use crate::auth::Caller;
use crate::util::prehashed::PrehashedMap;

/// Independent locks, so callers on many threads rarely touch the same one.
const SHARDS: usize = 16;

/// Entries kept at most.
pub(super) const CAPACITY: usize = 10_000;

const PER_SHARD: usize = CAPACITY / SHARDS;

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

type Shard = PrehashedMap<Entry>;

/// See the module docs.
pub(super) struct Cache {
    hasher: foldhash::fast::RandomState,
    shards: [RwLock<Shard>; SHARDS],
}

impl Cache {
    pub(super) fn new() -> Cache {
        Cache {
            hasher: foldhash::fast::RandomState::default(),
            shards: std::array::from_fn(|_| RwLock::default()),
        }
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
        let hash = self.hasher.hash_one(token);
        let shard = self.shards[shard_of(hash)]
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let e = shard.get(&hash)?;
        (now_ms < e.exp_ms
            && crate::util::secret::same(e.token.as_bytes(), token)
            && current(e.issuer, e.generation))
        .then(|| e.caller.clone())
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
        let hash = self.hasher.hash_one(token.as_bytes());
        let mut shard = self.shards[shard_of(hash)]
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if shard.len() >= PER_SHARD && !shard.contains_key(&hash) {
            make_room(&mut shard, now_ms);
        }
        shard.insert(
            hash,
            Entry {
                token: token.into(),
                caller,
                exp_ms,
                issuer,
                generation,
            },
        );
    }

    /// Entries held, expired ones included.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.read().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }
}

/// Bits 32..36 of the hash: the map inside a shard indexes by the low bits and tags by the
/// top seven, which stay spread this way.
fn shard_of(hash: u64) -> usize {
    (hash >> 32) as usize % SHARDS
}

/// Drops the expired entries of a full shard and, when that is not enough, a quarter of it.
fn make_room(shard: &mut Shard, now_ms: u64) {
    shard.retain(|_, e| e.exp_ms > now_ms);
    let mut excess = (shard.len() + 1).saturating_sub(PER_SHARD);
    if excess > 0 {
        excess = excess.max(PER_SHARD / 4);
        shard.retain(|_, _| match excess {
            0 => true,
            _ => {
                excess -= 1;
                false
            }
        });
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
