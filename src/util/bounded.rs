//! The bounded maps that remember what clients send (rate buckets, verified tokens, verified
//! API keys): keyed by a seeded hash, spread over locks, never larger than asked.
//!
//! A flood of distinct keys (spoofed headers, many addresses, made-up tokens) costs bounded
//! memory. A full shard first drops what is stale (nothing a later call would miss: a full
//! bucket, an expired token); when that frees too little, the lowest ranked go down to seven
//! eighths of the shard, so that a shard full of live keys sorts once per eighth of new keys
//! rather than on every one.

use std::hash::{BuildHasher, Hash};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::util::prehashed::PrehashedMap;

/// Locks a map is spread over, so calls of different keys rarely wait on one another.
pub(crate) const SHARDS: usize = 16;

/// What a full shard asks of a value.
pub(crate) trait Evict {
    /// Whether dropping it at `now` changes nothing a later call would see.
    fn stale(&self, now: u64) -> bool;
    /// When too few are stale, the lowest go first.
    fn rank(&self) -> u64;
}

/// See the module docs. The hasher is seeded per map (the keys are client-sent: nobody can aim
/// at another's entry), and a key's hash is used as it is inside a shard.
pub(crate) struct Bounded<V> {
    hasher: foldhash::fast::RandomState,
    shards: Box<[RwLock<PrehashedMap<V>>]>,
    per_shard: usize,
}

impl<V: Evict> Bounded<V> {
    /// A map of at most `max` entries (rounded up to a multiple of [`SHARDS`]).
    pub(crate) fn new(max: usize) -> Self {
        Bounded {
            hasher: foldhash::fast::RandomState::default(),
            shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
            per_shard: max.div_ceil(SHARDS).max(1),
        }
    }

    /// The key's hash, which every other method takes.
    #[inline]
    pub(crate) fn hash<K: Hash + ?Sized>(&self, key: &K) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Bits 32..36 of the hash choose the shard: a shard's map indexes by the low bits and tags
    /// by the top seven, which stay spread this way.
    fn shard(&self, hash: u64) -> &RwLock<PrehashedMap<V>> {
        &self.shards[(hash >> 32) as usize % SHARDS]
    }

    fn read(&self, hash: u64) -> RwLockReadGuard<'_, PrehashedMap<V>> {
        self.shard(hash)
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self, hash: u64) -> RwLockWriteGuard<'_, PrehashedMap<V>> {
        self.shard(hash)
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// `f` on the key's value (`None` when missing), under a read lock.
    #[inline]
    pub(crate) fn peek<R>(&self, hash: u64, f: impl FnOnce(Option<&V>) -> R) -> R {
        f(self.read(hash).get(&hash))
    }

    /// `f` on the key's value when it is there.
    pub(crate) fn update<R>(&self, hash: u64, f: impl FnOnce(&mut V) -> R) -> Option<R> {
        self.write(hash).get_mut(&hash).map(f)
    }

    /// `f` on the key's value, made when missing (room made first when its shard is full).
    #[inline]
    pub(crate) fn with<R>(&self, hash: u64, now: u64, f: impl FnOnce(&mut V) -> R) -> R
    where
        V: Default,
    {
        let mut map = self.write(hash);
        if map.len() >= self.per_shard && !map.contains_key(&hash) {
            evict(&mut map, now, self.per_shard);
        }
        f(map.entry(hash).or_default())
    }

    /// Keeps `value` for the key (room made first when its shard is full).
    pub(crate) fn insert(&self, hash: u64, now: u64, value: V) {
        let mut map = self.write(hash);
        if map.len() >= self.per_shard && !map.contains_key(&hash) {
            evict(&mut map, now, self.per_shard);
        }
        map.insert(hash, value);
    }

    /// Entries held, stale ones included.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.read().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }
}

/// Makes room in a full shard of `cap` entries (see the module docs).
fn evict<V: Evict>(map: &mut PrehashedMap<V>, now: u64, cap: usize) {
    map.retain(|_, v| !v.stale(now));
    let target = cap - (cap / 8).max(1);
    if map.len() <= target {
        return;
    }
    let drop = map.len() - target;
    let mut ranks: Vec<u64> = map.values().map(Evict::rank).collect();
    let (_, &mut cut, _) = ranks.select_nth_unstable(drop - 1);
    let mut left = drop;
    map.retain(|_, v| {
        if left > 0 && v.rank() <= cut {
            left -= 1;
            false
        } else {
            true
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value stale from its `until`, ranked by it.
    #[derive(Default, Clone, Copy, Debug, PartialEq)]
    struct Until(u64);

    impl Evict for Until {
        fn stale(&self, now: u64) -> bool {
            self.0 <= now
        }
        fn rank(&self) -> u64 {
            self.0
        }
    }

    #[test]
    fn a_flood_of_keys_stays_within_the_bound() {
        let m = Bounded::new(SHARDS * 8);
        for k in 0..10_000u64 {
            m.insert(m.hash(&k), 0, Until(1_000 + k));
            assert!(m.len() <= SHARDS * 8);
        }
        assert!(m.len() >= SHARDS * 7, "{}", m.len());
        // The latest keys are kept, the lowest ranked went.
        assert_eq!(
            m.peek(m.hash(&9_999u64), |v| v.copied()),
            Some(Until(10_999))
        );
        assert_eq!(m.peek(m.hash(&0u64), |v| v.copied()), None);
    }

    #[test]
    fn stale_values_go_first_then_the_lowest_ranked() {
        let mut map = PrehashedMap::default();
        map.extend((0..8).map(|k| (k, Until(if k % 2 == 0 { 100 } else { 10 }))));
        evict(&mut map, 50, 8);
        let mut kept: Vec<u64> = map.keys().copied().collect();
        kept.sort_unstable();
        assert_eq!(kept, [0, 2, 4, 6], "only the stale went");

        let mut map = PrehashedMap::default();
        map.extend((0..16).map(|k| (k, Until(100 + k))));
        evict(&mut map, 50, 16);
        let mut kept: Vec<u64> = map.keys().copied().collect();
        kept.sort_unstable();
        assert_eq!(kept, (2..16).collect::<Vec<_>>(), "the lowest eighth went");
    }

    #[test]
    fn with_makes_a_missing_value_and_update_leaves_it_missing() {
        let m: Bounded<Until> = Bounded::new(64);
        let h = m.hash("a");
        assert_eq!(m.update(h, |v| v.0 = 5), None);
        assert_eq!(m.peek(h, |v| v.copied()), None);
        assert_eq!(m.with(h, 0, |v| std::mem::replace(v, Until(7))), Until(0));
        assert_eq!(m.update(h, |v| v.0), Some(7));
        assert_ne!(m.hash("a"), m.hash("b"));
    }
}
