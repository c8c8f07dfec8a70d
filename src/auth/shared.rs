//! One budget for all replicas (`shared = true` limits), without a Redis round trip per call.
//!
//! Redis holds the fleet's bucket for each (limit, key): a GCRA whose TAT is one key
//! (`wiregate:rl:{limit}:{hash of the key}`), updated by one Lua script on Redis' own clock, so
//! the replicas' clocks never matter. A replica does not ask it per call: it *leases* a block of
//! tokens (`max(1, rate/20)`, at most the burst) and spends them locally; when the block runs
//! low the next is fetched in the background (`tokio::spawn`). A call never waits on Redis:
//! - the first calls of a key run ahead of its lease (a credit of half a block, at most the
//!   replica's share of the burst, repaid by the lease), so a new caller is not refused for the
//!   lease's round trip;
//! - with no token left and a lease on its way, the call is refused with a short retry;
//! - when Redis' bucket is empty, its answer says when `block` tokens will be there again; the
//!   replica refuses until then (exactly that long, plus a jitter that keeps the replicas from
//!   asking all at once) and asks no sooner, so an overloaded key costs Redis about one round
//!   trip per block and replica, not one per refusal.
//!
//! Leased tokens are taken from the one bucket, so the fleet grants at most what one bucket
//! would, plus what leases still hold (a block and a half per replica, against tokens the
//! bucket granted earlier: 15 % of a second's rate for 3 replicas, a tenth of that in a 3 s
//! window). A lease is spent within a second; what is left then goes
//! back to Redis' bucket with the next lease, so a replica's idle key does not hoard.
//!
//! Without Redis (the link down, or a command failed): each replica keeps a local bucket at its
//! share, the rate and burst divided by the replicas seen recently (they register themselves
//! in a sorted set, every second); it says so once and once again when Redis is back.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::bucket::{Gcra, KeyPart, Pass, MAX_KEYS};
use crate::cluster::keys::PREFIX;
use crate::cluster::Link;
use crate::util::bounded::{Bounded, Evict};
use crate::util::clock::now_ns;

const NS_PER_S: u64 = 1_000_000_000;
const NS_PER_MS: u64 = 1_000_000;
/// How long leased tokens may be spent; beyond, they go back to the fleet's bucket.
const LEASE_NS: u64 = NS_PER_S;
/// A lease or heartbeat Redis has not answered in this long failed.
const ASK_TIMEOUT: Duration = Duration::from_millis(500);
/// How often a replica says it is there.
const BEAT: Duration = Duration::from_secs(1);
/// How soon it tries again when it could not.
const BEAT_RETRY: Duration = Duration::from_millis(200);
/// A replica not heard of for this long no longer counts in the shares.
const RECENT_MS: u64 = 5_000;
/// A replica whose Redis has not answered yet is not "down" until this long after start (the
/// link's first ping is on its way).
const GRACE_NS: u64 = 3 * NS_PER_S;
/// The replicas counting in the shares, scored by when each was last heard of (Redis' ms).
const REPLICAS: &str = "wiregate:rl:replicas";

/// Leases up to `ARGV[3]` tokens (after giving `ARGV[4]` back) from the GCRA at `KEYS[1]`
/// (interval `ARGV[1]` and tolerance `ARGV[2]`, in µs): `{granted, TAT - now in µs}`.
const LEASE_SCRIPT: &str = "local t = redis.call('TIME') \
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2]) \
    local interval = tonumber(ARGV[1]) local tau = tonumber(ARGV[2]) \
    local want = tonumber(ARGV[3]) local give = tonumber(ARGV[4]) \
    local tat = tonumber(redis.call('GET', KEYS[1]) or '0') or 0 \
    if give > 0 then tat = tat - give * interval end \
    if tat < now then tat = now end \
    local room = math.floor((now + tau - tat) / interval + 1e-9) \
    if room > want then room = want end \
    if room < 0 then room = 0 end \
    if room > 0 or give > 0 then \
      tat = tat + room * interval \
      redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.floor((tat - now) / 1000) + 1000) \
    end \
    return {room, math.floor(tat - now)}";

/// Registers replica `ARGV[1]` in `KEYS[1]`, forgets those not heard of in `ARGV[2]` ms, and
/// counts the rest.
const BEAT_SCRIPT: &str = "local t = redis.call('TIME') \
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) \
    local recent = tonumber(ARGV[2]) \
    redis.call('ZADD', KEYS[1], now, ARGV[1]) \
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - recent) \
    redis.call('PEXPIRE', KEYS[1], recent * 2) \
    return redis.call('ZCARD', KEYS[1])";

/// [`Replicas`]'s `state`: not known yet, Redis answering, Redis not answering.
const UNKNOWN: u8 = 0;
const UP: u8 = 1;
const DOWN: u8 = 2;

/// This replica's side of the fleet: the link, how many replicas share, and whether Redis
/// answers. One per [`Limits`](super::limits::Limits), kept over reloads on the same link.
pub(crate) struct Replicas {
    link: Arc<Link>,
    started_ns: u64,
    replicas: AtomicU32,
    /// A lease or heartbeat failed since the last heartbeat that did not.
    failed: AtomicBool,
    /// Whether the shared limits use Redis, as the calls last saw it.
    state: AtomicU8,
    round_trips: AtomicU64,
}

impl Replicas {
    /// Starts its heartbeat, when a runtime runs (without one nothing could lease: the replica
    /// keeps to its share).
    pub(super) fn start(link: Arc<Link>) -> Arc<Replicas> {
        let fleet = Arc::new(Replicas {
            link,
            started_ns: now_ns(),
            replicas: AtomicU32::new(1),
            failed: AtomicBool::new(false),
            state: AtomicU8::new(UNKNOWN),
            round_trips: AtomicU64::new(0),
        });
        match crate::util::background::handle() {
            Some(rt) => drop(rt.spawn(heartbeat(Arc::downgrade(&fleet)))),
            None => fleet.failed.store(true, Ordering::Release),
        }
        fleet
    }

    pub(super) fn same_link(&self, link: &Arc<Link>) -> bool {
        Arc::ptr_eq(&self.link, link)
    }

    /// Whether the shared limits must do without Redis at `now`; a change is logged once.
    fn down(&self, now: u64) -> bool {
        let down = !self.link.is_up() || self.failed.load(Ordering::Acquire);
        let want = if down { DOWN } else { UP };
        let seen = self.state.load(Ordering::Relaxed);
        if seen != want {
            self.changed(seen, want, now);
        }
        down
    }

    #[cold]
    fn changed(&self, seen: u8, want: u8, now: u64) {
        if seen == UNKNOWN && want == DOWN && now < self.started_ns.saturating_add(GRACE_NS) {
            return;
        }
        if self
            .state
            .compare_exchange(seen, want, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        match (seen, want) {
            (_, DOWN) => tracing::warn!(
                node = %self.link.node_id,
                replicas = self.replicas.load(Ordering::Relaxed),
                "Redis does not answer: shared rate limits fall back to this replica's share"
            ),
            (DOWN, _) => tracing::info!(
                node = %self.link.node_id,
                "Redis answers again: shared rate limits count in Redis"
            ),
            _ => {}
        }
    }

    /// The replicas the shares divide by.
    fn replicas(&self) -> u32 {
        self.replicas.load(Ordering::Relaxed).max(1)
    }

    /// Says this replica is there, and counts those that are.
    async fn beat(&self) -> bool {
        let Ok(mut conn) = self.link.conn() else {
            return false;
        };
        let counted = tokio::time::timeout(
            ASK_TIMEOUT,
            redis::cmd("EVAL")
                .arg(BEAT_SCRIPT)
                .arg(1)
                .arg(REPLICAS)
                .arg(&self.link.node_id)
                .arg(RECENT_MS)
                .query_async::<u32>(&mut conn),
        )
        .await;
        match counted {
            Ok(Ok(n)) => {
                self.replicas.store(n.max(1), Ordering::Relaxed);
                self.failed.store(false, Ordering::Release);
                true
            }
            Ok(Err(e)) => {
                self.failed.store(true, Ordering::Release);
                self.link.failed(&e);
                false
            }
            Err(_) => {
                self.failed.store(true, Ordering::Release);
                false
            }
        }
    }
}

/// Beats while the fleet lives (a reload that drops it ends it).
async fn heartbeat(fleet: Weak<Replicas>) {
    loop {
        let Some(f) = fleet.upgrade() else { return };
        let beat = f.beat().await;
        drop(f);
        tokio::time::sleep(if beat { BEAT } else { BEAT_RETRY }).await;
    }
}

/// One key's lease on this replica, and its local bucket for when Redis does not answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Lease {
    /// Leased tokens not spent; below 0 when calls ran ahead on credit.
    tokens: i64,
    /// Tokens of a lapsed lease, to give back with the next lease.
    stale: u64,
    expires_ns: u64,
    in_flight: bool,
    /// No lease is asked for before this: Redis' bucket will not have a block sooner.
    gate_ns: u64,
    /// What Redis' bucket had left at the last lease (for `RateLimit`'s `r`).
    room: u64,
    used_ns: u64,
    /// The local bucket (a TAT) used while Redis does not answer.
    local_tat: u64,
}

impl Evict for Lease {
    fn stale(&self, now: u64) -> bool {
        !self.in_flight && self.local_tat <= now && self.used_ns.saturating_add(LEASE_NS) <= now
    }
    fn rank(&self) -> u64 {
        self.used_ns.max(self.local_tat)
    }
}

/// A lease to ask Redis for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Order {
    want: u64,
    give: u64,
}

/// A shared limit's rule: the fleet's bucket and the block it is leased in.
#[derive(Clone, Copy, Debug)]
struct Rule {
    gcra: Gcra,
    burst: u32,
    block: u64,
}

impl Rule {
    /// How long a call waits for a lease already asked for: about a token's time, from 1 to
    /// 10 ms.
    fn soon(self) -> u64 {
        self.gcra.interval_ns.clamp(NS_PER_MS, 10 * NS_PER_MS)
    }

    /// Tokens a replica may spend of a key ahead of its lease (so that a new key's first calls
    /// do not wait for the round trip): half a block, at most its share of the burst. What the
    /// fleet grants beyond its bucket is at most this much a replica, and repaid by the next
    /// leases.
    fn credit(self, replicas: u32) -> i64 {
        (self.block / 2).clamp(1, u64::from(self.burst.div_ceil(replicas.max(1)))) as i64
    }

    /// Spends one token of `l` at `now` (one of `replicas`), or says how long until one is
    /// there; and the lease to ask for, when it runs low.
    fn spend(self, l: &mut Lease, now: u64, replicas: u32) -> (Result<Pass, u64>, Option<Order>) {
        l.used_ns = now;
        if l.tokens > 0 && now >= l.expires_ns {
            l.stale += l.tokens as u64;
            l.tokens = 0;
        }
        let open = now >= l.gate_ns;
        let result = if l.tokens > 0 || (open && l.tokens > -self.credit(replicas)) {
            l.tokens -= 1;
            Ok(Pass {
                remaining: l.tokens.max(0) as u64 + l.room,
                next_ns: self.gcra.interval_ns,
            })
        } else if !open {
            Err(l.gate_ns - now)
        } else {
            Err(self.soon())
        };
        let low = (self.block / 2) as i64;
        let order = (!l.in_flight && open && l.tokens <= low).then(|| {
            l.in_flight = true;
            Order {
                want: self.block + l.tokens.min(0).unsigned_abs(),
                give: std::mem::take(&mut l.stale),
            }
        });
        (result, order)
    }

    /// Redis' answer to a lease: `granted` tokens, its bucket's TAT `ahead_ns` past its now.
    /// `jitter_ns` delays the next lease when Redis' bucket ran short: replicas refused at
    /// once would otherwise all ask again at once, and the nearest to Redis win every time.
    fn landed(self, l: &mut Lease, now: u64, granted: u64, ahead_ns: u64, jitter_ns: u64) {
        let Gcra {
            interval_ns,
            tau_ns,
        } = self.gcra;
        l.in_flight = false;
        l.tokens += granted as i64;
        l.expires_ns = now + LEASE_NS;
        l.room = tau_ns.saturating_sub(ahead_ns) / interval_ns;
        l.gate_ns = now
            + ahead_ns
                .saturating_add(self.block.saturating_mul(interval_ns))
                .saturating_sub(tau_ns)
            + jitter_ns;
    }

    /// The jitter of a lease that got `granted` of `want`: up to half a block's time.
    fn jitter(self, granted: u64, want: u64) -> u64 {
        match granted < want {
            true => fastrand::u64(0..=self.block * self.gcra.interval_ns / 2),
            false => 0,
        }
    }

    /// The local bucket of one of `replicas`: its share of the rate and of the burst.
    fn share(self, replicas: u32) -> Gcra {
        let replicas = replicas.max(1);
        let interval_ns = self.gcra.interval_ns.saturating_mul(u64::from(replicas));
        Gcra {
            interval_ns,
            tau_ns: interval_ns.saturating_mul(u64::from(self.burst.div_ceil(replicas).max(1))),
        }
    }
}

/// The replicas sharing a limit (this one alone without a cluster).
fn replicas(fleet: Option<&Arc<Replicas>>) -> u32 {
    fleet.map_or(1, |f| f.replicas())
}

/// The block a replica leases: about 50 ms of the rate, at most the burst.
fn block(rate_per_s: f64, burst: u32) -> u64 {
    ((rate_per_s / 20.0).ceil() as u64).clamp(1, u64::from(burst.max(1)))
}

/// Redis' key for a limit's bucket of `key`: the key's SHA-256 (the same on every replica and
/// version; no caller id or address in Redis' key names).
fn redis_key(limit: &str, key: &KeyPart<'_>) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, &key.text());
    let mut out = format!("{PREFIX}rl:{limit}:");
    crate::util::hex::push(&mut out, &digest.as_ref()[..16]);
    out
}

/// µs, as the Lua script reads them.
fn micros(ns: u64) -> String {
    (ns as f64 / 1000.0).to_string()
}

/// A `shared = true` limit: the leases of its keys on this replica.
pub(crate) struct SharedLimit {
    name: Arc<str>,
    rule: Rule,
    leases: Bounded<Lease>,
}

impl SharedLimit {
    pub(super) fn new(name: Arc<str>, rate_per_s: f64, burst: u32) -> Self {
        SharedLimit {
            name,
            rule: Rule {
                gcra: Gcra::new(rate_per_s, burst),
                burst,
                block: block(rate_per_s, burst),
            },
            leases: Bounded::new(MAX_KEYS),
        }
    }

    /// The local bucket's rule while Redis does not answer (the whole budget without a
    /// cluster).
    fn local(&self, fleet: Option<&Arc<Replicas>>) -> Gcra {
        self.rule.share(replicas(fleet))
    }

    pub(super) fn take(
        self: &Arc<Self>,
        fleet: Option<&Arc<Replicas>>,
        key: &KeyPart<'_>,
        now: u64,
    ) -> Result<Pass, u64> {
        let hash = self.leases.hash(key);
        let Some(fleet) = fleet.filter(|f| !f.down(now)) else {
            let local = self.local(fleet);
            return self.leases.with(hash, now, |l| {
                l.used_ns = now;
                let took = local.take(l.local_tat, now)?;
                l.local_tat = took.tat;
                Ok(took.into())
            });
        };
        let n = fleet.replicas();
        let (result, order) = self.leases.with(hash, now, |l| self.rule.spend(l, now, n));
        if let Some(order) = order {
            self.ask(fleet, key, hash, order);
        }
        result
    }

    pub(super) fn peek(
        &self,
        fleet: Option<&Arc<Replicas>>,
        key: &KeyPart<'_>,
        now: u64,
    ) -> Result<Pass, u64> {
        let hash = self.leases.hash(key);
        let mut l = self.leases.peek(hash, |l| l.copied()).unwrap_or_default();
        match fleet.filter(|f| !f.down(now)) {
            None => self.local(fleet).take(l.local_tat, now).map(Pass::from),
            Some(f) => self.rule.spend(&mut l, now, f.replicas()).0,
        }
    }

    pub(super) fn give_back(&self, fleet: Option<&Arc<Replicas>>, key: &KeyPart<'_>, now: u64) {
        let hash = self.leases.hash(key);
        let down = fleet.is_none_or(|f| f.down(now));
        let local = self.local(fleet);
        self.leases.update(hash, |l| match down {
            true => l.local_tat = local.give_back(l.local_tat),
            false => l.tokens += 1,
        });
    }

    /// Sends `order` for `key` in the background.
    fn ask(self: &Arc<Self>, fleet: &Arc<Replicas>, key: &KeyPart<'_>, hash: u64, order: Order) {
        let Some(rt) = crate::util::background::handle() else {
            self.leases.update(hash, |l| l.in_flight = false);
            fleet.failed.store(true, Ordering::Release);
            return;
        };
        let redis_key = redis_key(&self.name, key);
        let (limit, fleet) = (self.clone(), fleet.clone());
        drop(rt.spawn(async move { limit.lease(&fleet, hash, redis_key, order).await }));
    }

    async fn lease(&self, fleet: &Replicas, hash: u64, key: String, order: Order) {
        fleet.round_trips.fetch_add(1, Ordering::Relaxed);
        let answer = match fleet.link.conn() {
            Ok(mut conn) => {
                let asked = tokio::time::timeout(
                    ASK_TIMEOUT,
                    redis::cmd("EVAL")
                        .arg(LEASE_SCRIPT)
                        .arg(1)
                        .arg(&key)
                        .arg(micros(self.rule.gcra.interval_ns))
                        .arg(micros(self.rule.gcra.tau_ns))
                        .arg(order.want)
                        .arg(order.give)
                        .query_async::<(i64, i64)>(&mut conn),
                )
                .await;
                match asked {
                    Ok(Ok(got)) => Some(got),
                    Ok(Err(e)) => {
                        fleet.link.failed(&e);
                        None
                    }
                    Err(_) => None,
                }
            }
            Err(_) => None,
        };
        if answer.is_none() {
            fleet.failed.store(true, Ordering::Release);
        }
        let now = now_ns();
        self.leases.update(hash, |l| match answer {
            Some((granted, ahead_us)) => {
                let granted = granted.max(0) as u64;
                let jitter = self.rule.jitter(granted, order.want);
                let ahead = (ahead_us.max(0) as u64).saturating_mul(1000);
                self.rule.landed(l, now, granted, ahead, jitter)
            }
            None => l.in_flight = false,
        });
    }
}

// The integration tests' helper (`cluster::log`'s tests load it too, privately).
#[cfg(test)]
#[allow(dead_code, unreachable_pub, clippy::duplicate_mod)]
#[path = "../../tests/support/redis_server.rs"]
mod redis_server;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::limits::{Limits, Subject, Target};
    use crate::config::RateLimit;
    use std::sync::Mutex;
    use std::time::Instant;

    const T0: u64 = 1_000 * NS_PER_S;
    const MS: u64 = NS_PER_MS;

    fn rule() -> Rule {
        // 200/s, burst 20: a token every 5 ms, blocks of 10.
        Rule {
            gcra: Gcra::new(200.0, 20),
            burst: 20,
            block: block(200.0, 20),
        }
    }

    #[test]
    fn a_new_key_runs_ahead_of_its_lease_by_its_credit_then_waits_briefly() {
        let r = rule();
        assert_eq!((r.block, r.credit(3)), (10, 5));
        assert_eq!(r.credit(10), 2, "at most a share of the burst");
        let mut l = Lease::default();
        let (first, order) = r.spend(&mut l, T0, 3);
        assert!(
            first.is_ok(),
            "the first call is not refused for the round trip"
        );
        assert_eq!(
            order,
            Some(Order { want: 11, give: 0 }),
            "a block and the debt"
        );
        for _ in 0..4 {
            let (ahead, order) = r.spend(&mut l, T0, 3);
            assert!(ahead.is_ok());
            assert_eq!(order, None, "one lease at a time");
        }
        let (sixth, order) = r.spend(&mut l, T0, 3);
        assert_eq!(
            sixth,
            Err(5 * MS),
            "beyond the credit: the lease is on its way"
        );
        assert_eq!(order, None);

        // The lease lands: 11 tokens, the debt (5) repaid, 6 to spend; Redis' bucket has half
        // its burst left, so the next lease may be asked for at once.
        r.landed(&mut l, T0 + MS, 11, 50 * MS, 0);
        assert_eq!((l.tokens, l.in_flight, l.room), (6, false, 10));
        let (got, order) = r.spend(&mut l, T0 + 2 * MS, 3);
        assert_eq!(got.map(|p| p.remaining), Ok(5 + 10));
        // Down to half a block: the next is asked for ahead of need.
        assert_eq!(order, Some(Order { want: 10, give: 0 }));
    }

    #[test]
    fn an_empty_fleet_bucket_closes_the_gate_until_a_block_is_there() {
        let r = rule();
        let mut l = Lease::default();
        let (_, order) = r.spend(&mut l, T0, 3);
        assert!(order.is_some());
        // Redis granted nothing: its TAT is a whole burst (100 ms) ahead.
        r.landed(&mut l, T0, 0, 100 * MS, 0);
        assert_eq!(l.tokens, -1, "the credit is still owed");
        let (got, order) = r.spend(&mut l, T0 + 10 * MS, 3);
        assert_eq!(
            got,
            Err(40 * MS),
            "a block is there 50 ms after Redis' answer"
        );
        assert_eq!(order, None, "and not asked for sooner");
        // The gate opens: the call runs ahead again, the debt asked for with the block.
        let (got, order) = r.spend(&mut l, T0 + 50 * MS, 3);
        assert!(got.is_ok());
        assert_eq!(order, Some(Order { want: 12, give: 0 }));
        for _ in 0..3 {
            assert!(r.spend(&mut l, T0 + 50 * MS, 3).0.is_ok());
        }
        assert_eq!(
            r.spend(&mut l, T0 + 50 * MS, 3).0,
            Err(5 * MS),
            "the credit is spent"
        );
        // Short answers spread the replicas' next asks over half a block's time.
        assert_eq!(r.jitter(11, 11), 0);
        assert!((0..100).all(|_| r.jitter(3, 11) <= 25 * MS));
    }

    #[test]
    fn a_lapsed_lease_gives_its_tokens_back_with_the_next() {
        let r = rule();
        let mut l = Lease::default();
        assert!(r.spend(&mut l, T0, 3).0.is_ok());
        r.landed(&mut l, T0, 11, 55 * MS, 0);
        assert!(r.spend(&mut l, T0 + MS, 3).0.is_ok());
        assert_eq!(l.tokens, 9);
        let later = T0 + 2 * NS_PER_S;
        let (got, order) = r.spend(&mut l, later, 3);
        assert!(got.is_ok(), "on credit");
        assert_eq!(order, Some(Order { want: 11, give: 9 }));
        assert_eq!((l.tokens, l.stale), (-1, 0));
    }

    #[test]
    fn a_replica_s_share_divides_rate_and_burst() {
        let share = rule().share(3);
        assert_eq!(share.interval_ns, 15 * MS);
        assert_eq!(share.tau_ns, 7 * 15 * MS, "ceil(20 / 3) at once");
        assert_eq!(rule().share(1), rule().gcra);
        let small = Rule { burst: 2, ..rule() };
        assert_eq!(small.share(5).tau_ns, 25 * MS, "at least one");
        assert_eq!(block(3.0, 10), 1);
        assert_eq!(block(10_000.0, 20), 20);
    }

    #[test]
    fn redis_keys_name_the_limit_and_hide_the_key() {
        let k = redis_key("per-ip", &KeyPart::Ip([10, 0, 0, 1].into()));
        assert!(k.starts_with("wiregate:rl:per-ip:"), "{k}");
        assert_eq!(k.len(), "wiregate:rl:per-ip:".len() + 32);
        assert!(!k.contains("10.0.0.1"));
        assert_ne!(k, redis_key("per-ip", &KeyPart::Ip([10, 0, 0, 2].into())));
        assert_eq!(k, redis_key("per-ip", &KeyPart::Ip([10, 0, 0, 1].into())));
    }

    fn shared_limit() -> [RateLimit; 1] {
        [RateLimit {
            name: "fleet".into(),
            matches: vec!["*".into()],
            key: "ip".into(),
            rate_per_s: 200.0,
            burst: 20,
            shared: true,
        }]
    }

    #[test]
    fn without_a_cluster_a_shared_limit_is_a_local_one() {
        let limits = Limits::new(&shared_limit(), None, None);
        let s = Subject::default();
        let call = Target::Method("plan.get");
        let passed = (0..25).filter(|_| limits.check(call, &s).is_ok()).count();
        assert!((20..=22).contains(&passed), "{passed}");
    }

    /// What one replica's driver saw.
    #[derive(Debug, Default)]
    struct Drove {
        calls: u64,
        granted: u64,
        granted_down: u64,
        down_for: Duration,
        recovered: bool,
    }

    /// Calls `limits` five times every `pace` for `time` (or, with `until_up`, until the
    /// shared limits count in Redis again), logging into `log`.
    fn drive(
        limits: &Limits,
        (time, pace, client): (Duration, Duration, u8),
        until_up: bool,
        log: Arc<Mutex<Vec<u8>>>,
    ) -> Drove {
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || Log(log.clone()))
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let fleet = limits.fleet().unwrap();
            let call = Target::Method("plan.get");
            let s = Subject {
                ip: Some([10, 0, 0, client].into()),
                ..Subject::default()
            };
            let start = Instant::now();
            let mut drove = Drove::default();
            let mut down_since = None;
            while start.elapsed() < time {
                for _ in 0..5 {
                    let ok = limits.check(call, &s).is_ok();
                    drove.calls += 1;
                    drove.granted += u64::from(ok);
                    if fleet.state.load(Ordering::Relaxed) == DOWN {
                        down_since.get_or_insert_with(Instant::now);
                        drove.granted_down += u64::from(ok);
                    } else if until_up && fleet.state.load(Ordering::Relaxed) == UP {
                        drove.recovered = true;
                    }
                }
                if drove.recovered {
                    break;
                }
                std::thread::sleep(pace);
            }
            drove.down_for = down_since.map_or(Duration::ZERO, |d| d.elapsed());
            drove
        })
    }

    struct Log(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Log {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    async fn run_all(
        replicas: &[Arc<Limits>],
        logs: &[Arc<Mutex<Vec<u8>>>],
        time: (Duration, Duration, u8),
        until_up: bool,
    ) -> Vec<Drove> {
        let runs: Vec<_> = replicas
            .iter()
            .zip(logs)
            .map(|(l, log)| {
                let (l, log) = (l.clone(), log.clone());
                tokio::task::spawn_blocking(move || drive(&l, time, until_up, log))
            })
            .collect();
        let mut out = Vec::new();
        for r in runs {
            out.push(r.await.unwrap());
        }
        out
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn three_replicas_share_one_budget_and_fall_back_to_their_share_without_redis() {
        let mut redis = redis_server::RedisServer::start().await;
        let replicas: Vec<Arc<Limits>> = ["a", "b", "c"]
            .iter()
            .map(|node| {
                let link = Link::start(&crate::config::Cluster {
                    redis: redis.url(),
                    node_id: (*node).into(),
                    ..Default::default()
                })
                .unwrap();
                Arc::new(Limits::new(&shared_limit(), None, Some(link)))
            })
            .collect();
        let logs: Vec<_> = (0..3).map(|_| Arc::new(Mutex::new(Vec::new()))).collect();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !replicas.iter().all(|l| l.fleet().unwrap().replicas() == 3) {
            assert!(
                Instant::now() < deadline,
                "the replicas did not see one another"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        // Three replicas, each calling at 50 times the rate, for 3 s: one budget.
        let fast = Duration::from_micros(400);
        let drove = run_all(&replicas, &logs, (Duration::from_secs(3), fast, 1), false).await;
        let granted: u64 = drove.iter().map(|d| d.granted).sum();
        let calls: u64 = drove.iter().map(|d| d.calls).sum();
        let trips: u64 = replicas
            .iter()
            .map(|l| l.fleet().unwrap().round_trips.load(Ordering::Relaxed))
            .sum();
        let expected = 200.0 * 3.0 + 20.0;
        eprintln!(
            "shared: {granted} granted of {calls} calls (expected {expected}, {:+.1} %), \
             {trips} leases: {:.2} round trips per 100 calls, {:.1} per 100 granted; per replica {:?}",
            (granted as f64 / expected - 1.0) * 100.0,
            trips as f64 * 100.0 / calls as f64,
            trips as f64 * 100.0 / granted as f64,
            drove.iter().map(|d| d.granted).collect::<Vec<_>>(),
        );
        assert!(
            (granted as f64 - expected).abs() <= expected * 0.1,
            "{granted} granted, {expected} expected"
        );
        assert!(drove.iter().all(|d| d.calls > 10 * 200));
        assert!(drove.iter().all(|d| d.granted > 0), "{drove:?}");

        // Redis stops: each replica falls back to its third, and says so once.
        redis.kill();
        let drove = run_all(&replicas, &logs, (Duration::from_secs(3), fast, 1), false).await;
        for (d, log) in drove.iter().zip(&logs) {
            let share = 200.0 / 3.0 * d.down_for.as_secs_f64() + 7.0;
            eprintln!(
                "without Redis: {} granted in {:?} (share {share:.0})",
                d.granted_down, d.down_for
            );
            assert!(d.down_for > Duration::from_secs(2), "{d:?}");
            assert!(
                (d.granted_down as f64 - share).abs() <= share * 0.2,
                "{d:?}: {share} expected"
            );
            let log = String::from_utf8(log.lock().unwrap().clone()).unwrap();
            assert_eq!(
                log.matches("fall back to this replica's share").count(),
                1,
                "{log}"
            );
            assert!(log.contains("WARN"), "{log}");
        }

        // Redis returns: each replica counts in it again, and says so once.
        redis.restart().await;
        let drove = run_all(&replicas, &logs, (Duration::from_secs(10), fast, 1), true).await;
        for (d, log) in drove.iter().zip(&logs) {
            assert!(d.recovered, "{d:?}");
            let log = String::from_utf8(log.lock().unwrap().clone()).unwrap();
            assert_eq!(log.matches("count in Redis").count(), 1, "{log}");
            assert_eq!(log.matches("fall back").count(), 1, "{log}");
        }

        // Below the rate (a new client, 50 calls a second on each replica, 150 of 200): all
        // pass but for a few (at most 5 %) while the first leases settle, a lease every block
        // (10 calls).
        let before: u64 = replicas
            .iter()
            .map(|l| l.fleet().unwrap().round_trips.load(Ordering::Relaxed))
            .sum();
        let slow = (Duration::from_secs(3), Duration::from_millis(100), 2);
        let drove = run_all(&replicas, &logs, slow, false).await;
        let trips = replicas
            .iter()
            .map(|l| l.fleet().unwrap().round_trips.load(Ordering::Relaxed))
            .sum::<u64>()
            - before;
        let calls: u64 = drove.iter().map(|d| d.calls).sum();
        let granted: u64 = drove.iter().map(|d| d.granted).sum();
        eprintln!(
            "below the rate: {granted} granted of {calls}, {trips} leases: {:.1} per 100 calls",
            trips as f64 * 100.0 / calls as f64
        );
        assert!(granted + calls / 20 >= calls, "{granted} of {calls}");
        assert!(
            trips * 100 <= calls * 15,
            "{trips} leases for {calls} calls"
        );
    }
}
