//! A rate limit's buckets: the GCRA rule, the key a bucket is kept for, and the sharded,
//! bounded maps that hold the buckets, shared by the local limits ([`limits`](super::limits))
//! and the replicas' shared ones ([`shared`](super::shared)).

use std::hash::{BuildHasher, Hash, Hasher};
use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use super::caller::Kind;
use crate::util::prehashed::PrehashedMap;

/// Keys a limit remembers at most: a flood of distinct keys (spoofed headers, many addresses)
/// costs bounded memory. Beyond it, full buckets go first, then those nearest to full.
pub(super) const MAX_KEYS: usize = 100_000;
/// Locks a limit's buckets are spread over, so calls of different keys rarely wait on one
/// another.
pub(super) const SHARDS: usize = 16;

/// Nanoseconds on a monotonic clock shared by the whole process (buckets kept over a reload
/// stay comparable).
pub(super) fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

pub(super) fn ceil_div(n: u64, d: u64) -> u64 {
    n.div_ceil(d)
}

/// One bucket's rule: a token every `interval_ns`, at most `tau_ns / interval_ns` at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Gcra {
    pub(super) interval_ns: u64,
    pub(super) tau_ns: u64,
}

/// A token taken: the bucket's new TAT, the tokens left, and how long until one more is there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Took {
    pub(super) tat: u64,
    pub(super) remaining: u64,
    pub(super) next_ns: u64,
}

impl Gcra {
    pub(super) fn new(rate_per_s: f64, burst: u32) -> Self {
        let interval_ns = (1e9 / rate_per_s).round().clamp(1.0, (u64::MAX / 4) as f64) as u64;
        Gcra {
            interval_ns,
            tau_ns: interval_ns.saturating_mul(u64::from(burst.max(1))),
        }
    }

    /// One token from the bucket whose TAT is `tat`, at `now`; or how long until there is one.
    pub(super) fn take(self, tat: u64, now: u64) -> Result<Took, u64> {
        let tat = tat.max(now).saturating_add(self.interval_ns);
        let limit = now.saturating_add(self.tau_ns);
        if tat > limit {
            return Err(tat - limit);
        }
        let room = limit - tat;
        Ok(Took {
            tat,
            remaining: room / self.interval_ns,
            next_ns: self.interval_ns - room % self.interval_ns,
        })
    }

    /// The TAT with one token given back.
    pub(super) fn give_back(self, tat: u64) -> u64 {
        tat.saturating_sub(self.interval_ns)
    }
}

/// What a bucket is kept for, read from a call: hashed for the local maps, written out (and
/// hashed again, stably) for Redis' keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KeyPart<'a> {
    /// A verified caller: its kind is part of the key, so an API key's id and a JWT subject
    /// that read the same never share a bucket.
    Caller(Kind, &'a str),
    Ip(IpAddr),
    Header(&'a [u8]),
    /// The callers that did not send the header.
    NoHeader,
    /// The callers whose address is unknown.
    Unknown,
    Global,
}

impl<'a> KeyPart<'a> {
    /// The key as bytes, the same on every replica (for Redis).
    pub(super) fn text(&self) -> Vec<u8> {
        let (tag, value): (&str, Vec<u8>) = match *self {
            KeyPart::Caller(kind, id) => (kind.as_str(), id.as_bytes().to_vec()),
            KeyPart::Ip(ip) => ("ip", ip.to_string().into_bytes()),
            KeyPart::Header(v) => ("header", v.to_vec()),
            KeyPart::NoHeader => ("no-header", Vec::new()),
            KeyPart::Unknown => ("no-ip", Vec::new()),
            KeyPart::Global => ("global", Vec::new()),
        };
        let mut out = Vec::with_capacity(tag.len() + 1 + value.len());
        out.extend_from_slice(tag.as_bytes());
        out.push(b':');
        out.extend_from_slice(&value);
        out
    }
}

impl Hash for KeyPart<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        match *self {
            KeyPart::Caller(kind, id) => {
                h.write_u8(match kind {
                    Kind::Jwt => 1,
                    Kind::ApiKey => 2,
                    Kind::Mtls => 3,
                });
                h.write(id.as_bytes());
            }
            KeyPart::Ip(ip) => {
                h.write_u8(4);
                ip.hash(h);
            }
            KeyPart::Header(v) => {
                h.write_u8(5);
                h.write(v);
            }
            KeyPart::NoHeader => h.write_u8(6),
            KeyPart::Unknown => h.write_u8(7),
            KeyPart::Global => h.write_u8(8),
        }
    }
}

/// A bucket's state in [`Buckets`]: what eviction asks of it.
pub(super) trait Slot: Default {
    /// Whether dropping it now changes nothing a later call would see (a bucket full again).
    fn idle(&self, now: u64) -> bool;
    /// When none is idle, the lowest go first (the nearest to idle).
    fn rank(&self) -> u64;
}

/// A local bucket: its TAT.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Tat(pub(super) u64);

impl Slot for Tat {
    fn idle(&self, now: u64) -> bool {
        self.0 <= now
    }
    fn rank(&self) -> u64 {
        self.0
    }
}

/// A key's hash is already a good hash: the maps use it as it is. The shard is chosen by bits
/// 32..36, which hashbrown uses for neither its bucket index (low bits) nor its tag (top 7).
type Map<V> = PrehashedMap<V>;

/// A limit's buckets: sharded, bounded maps from a key's hash to its state. The hasher is
/// seeded per process (the keys are client-sent: nobody can aim at another's bucket).
pub(super) struct Buckets<V> {
    hasher: foldhash::fast::RandomState,
    shards: Box<[Mutex<Map<V>>]>,
    per_shard: usize,
}

impl<V: Slot> Buckets<V> {
    pub(super) fn new(max_keys: usize) -> Self {
        Buckets {
            hasher: foldhash::fast::RandomState::default(),
            shards: (0..SHARDS).map(|_| Mutex::new(Map::default())).collect(),
            per_shard: max_keys.div_ceil(SHARDS).max(1),
        }
    }

    pub(super) fn hash(&self, key: &KeyPart<'_>) -> u64 {
        self.hasher.hash_one(key)
    }

    fn lock(&self, hash: u64) -> MutexGuard<'_, Map<V>> {
        self.shards[(hash >> 32) as usize % SHARDS]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// `f` on the key's state, made when missing (room made first when its shard is full).
    pub(super) fn with<R>(&self, hash: u64, now: u64, f: impl FnOnce(&mut V) -> R) -> R {
        let mut map = self.lock(hash);
        if map.len() >= self.per_shard && !map.contains_key(&hash) {
            evict(&mut map, now, self.per_shard);
        }
        f(map.entry(hash).or_default())
    }

    /// `f` on the key's state as it is (a new one when missing); nothing is stored.
    pub(super) fn peek<R>(&self, hash: u64, f: impl FnOnce(&V) -> R) -> R {
        let map = self.lock(hash);
        match map.get(&hash) {
            Some(v) => f(v),
            None => f(&V::default()),
        }
    }

    /// `f` on the key's state when it is there.
    pub(super) fn update<R>(&self, hash: u64, f: impl FnOnce(&mut V) -> R) -> Option<R> {
        self.lock(hash).get_mut(&hash).map(f)
    }

    /// Keys held.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }
}

/// Makes room in a full shard: the idle states go; when that frees too little, the lowest
/// ranked down to seven eighths of `cap`, so that a shard full of live keys sorts once per
/// eighth of new keys rather than on every one.
fn evict<V: Slot>(map: &mut Map<V>, now: u64, cap: usize) {
    map.retain(|_, v| !v.idle(now));
    let target = cap - (cap / 8).max(1);
    if map.len() <= target {
        return;
    }
    let drop = map.len() - target;
    let mut ranks: Vec<u64> = map.values().map(Slot::rank).collect();
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

/// What one limit said of a call it let through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Pass {
    pub(super) remaining: u64,
    pub(super) next_ns: u64,
}

impl From<Took> for Pass {
    fn from(t: Took) -> Self {
        Pass {
            remaining: t.remaining,
            next_ns: t.next_ns,
        }
    }
}
