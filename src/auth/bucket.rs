//! A rate limit's buckets: the GCRA rule and the key a bucket is kept for, shared by the local
//! limits ([`limits`](super::limits)) and the replicas' shared ones ([`shared`](super::shared)),
//! which keep their buckets in [`Bounded`](crate::util::bounded::Bounded) maps on the
//! process's monotonic clock ([`crate::util::clock::now_ns`]).

use std::hash::{Hash, Hasher};
use std::net::IpAddr;

use super::caller::Kind;
use crate::util::bounded::Evict;

/// Keys a limit remembers at most. Beyond it, full buckets go first, then those nearest to
/// full.
pub(super) const MAX_KEYS: usize = 100_000;

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

/// A local bucket: its TAT.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Tat(pub(super) u64);

/// A full bucket (its TAT passed) is stale: dropping it changes nothing.
impl Evict for Tat {
    fn stale(&self, now: u64) -> bool {
        self.0 <= now
    }
    fn rank(&self) -> u64 {
        self.0
    }
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
