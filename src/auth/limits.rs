//! How much a caller may call: `[[rate_limits]]`, one token bucket per limit and key, checked
//! once per call on the request path.
//!
//! Each bucket is a GCRA (the generic cell rate algorithm): its whole state is one "theoretical
//! arrival time" (TAT, ns), the moment the bucket would be full again. A call at `now` passes
//! when taking one more token (`TAT + 1/rate`) stays within `now + burst/rate`; its refusal says
//! exactly how long until it would pass. One `u64` a key, no timer, no refill task: the buckets
//! of a limit fit a sharded `Mutex<HashMap<u64, u64>>` keyed by a seeded 64-bit hash of the key,
//! bounded in size (a bucket whose TAT is past is full, so dropping it changes nothing).
//!
//! A `shared = true` limit keeps one budget for all replicas; [`shared`](super::shared) leases
//! its tokens from Redis in blocks, so a call never waits on Redis.
//!
//! The check is apart from the I/O: [`Limits::check`] is synchronous and reads the clock once;
//! a call it refuses ([`Limited`]) carries its limit's IETF HTTPAPI `RateLimit-Policy` value
//! (draft-ietf-httpapi-ratelimit-headers), which [`refusal_headers`](super::refusal::refusal_headers)
//! writes with `RateLimit` and `Retry-After`.

use std::net::IpAddr;
use std::sync::Arc;

use super::bucket::{ceil_div, Gcra, KeyPart, Pass, Tat, MAX_KEYS};
use super::shared::{Replicas, SharedLimit};
use crate::auth::Caller;
use crate::cluster::Link;
use crate::config::{LimitKey, RateLimit};
use crate::http::headers::Headers;
use crate::upstream::router::glob_match;
use crate::util::bounded::Bounded;
use crate::util::clock::now_ns;

const NS_PER_S: u64 = 1_000_000_000;
const NS_PER_MS: u64 = 1_000_000;
/// The largest integer a structured field carries (RFC 8941, 15 digits).
const SF_INT_MAX: u64 = 999_999_999_999_999;

/// What a call asks for: limits match a JSON-RPC call by its method, a pass-through request by
/// its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target<'a> {
    /// A call's JSON-RPC method (matched by a limit's method globs).
    Method(&'a str),
    /// A pass-through request's path (matched by a limit's `path:` globs).
    Path(&'a str),
}

/// Who calls, as far as the keys of the limits need it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Subject<'a> {
    /// The verified caller; none when anonymous.
    pub(crate) caller: Option<&'a Caller>,
    /// The client's address; none when unknown (the callers without one share a bucket).
    pub(crate) ip: Option<IpAddr>,
    /// The request's headers, for `header:NAME` keys.
    pub(crate) headers: Option<Headers<'a>>,
}

/// The `[[rate_limits]]` of one configuration, with their buckets. Built at start and at each
/// reload (keeping the buckets of the limits that did not change); shared by the calls.
pub(crate) struct Limits {
    limits: Box<[Limit]>,
    /// The Redis side of the shared limits (none without a shared limit or without a cluster).
    fleet: Option<Arc<Replicas>>,
}

impl std::fmt::Debug for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.limits.iter().map(|l| &*l.name))
            .finish()
    }
}

/// A call let through, and what the `RateLimit` fields say of the matching limit nearest to
/// empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Passed {
    /// The `RateLimit-Policy` value: `"name";q=<burst>;w=<seconds to refill a burst>` (the
    /// limit's own, shared: a call let through allocates nothing).
    pub(crate) policy: Arc<str>,
    /// Calls that would pass now, after this one.
    pub(crate) remaining: u64,
    /// Seconds until one more token is there (rounded up).
    pub(crate) reset_s: u64,
}

/// A call refused: the strictest of the limits it ran into (the longest wait).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limited {
    /// The limit's name.
    pub(crate) limit: Arc<str>,
    /// How long until the call would pass (rounded up to the millisecond).
    pub(crate) retry_after_ms: u64,
    /// The limit's `RateLimit-Policy` value.
    pub(crate) policy: String,
    /// Seconds until a token is there (rounded up): `RateLimit`'s `t`.
    pub(crate) reset_s: u64,
}

/// A limit's `RateLimit-Policy` item: its name as an sf-string, its quota (the burst) and the
/// window the quota refills in (`ceil(burst / rate)` seconds).
fn policy_item(name: &str, rate_per_s: f64, burst: u32) -> String {
    let mut quoted = String::with_capacity(name.len() + 2);
    quoted.push('"');
    for c in name.chars() {
        match c {
            '"' | '\\' => {
                quoted.push('\\');
                quoted.push(c);
            }
            ' '..='~' => quoted.push(c),
            _ => quoted.push('?'),
        }
    }
    quoted.push('"');
    let window = (f64::from(burst) / rate_per_s)
        .ceil()
        .clamp(1.0, SF_INT_MAX as f64) as u64;
    format!("{quoted};q={burst};w={window}")
}

impl<'a> KeyPart<'a> {
    /// The part of `key` a call from `subject` is counted under.
    pub(super) fn of(key: &'a LimitKey, subject: &Subject<'a>) -> Self {
        let ip = || subject.ip.map_or(KeyPart::Unknown, KeyPart::Ip);
        match key {
            LimitKey::Caller => match subject.caller {
                Some(c) => KeyPart::Caller(c.kind, &c.id),
                None => ip(),
            },
            LimitKey::Ip => ip(),
            LimitKey::Header(name) => subject
                .headers
                .and_then(|h| h.get(name.as_str()))
                .map_or(KeyPart::NoHeader, KeyPart::Header),
            LimitKey::Global => KeyPart::Global,
        }
    }
}

/// One `[[rate_limits]]` entry.
struct Limit {
    name: Arc<str>,
    methods: Box<[Box<str>]>,
    paths: Box<[Box<str>]>,
    key: LimitKey,
    rate_per_s: f64,
    burst: u32,
    shared: bool,
    policy: Arc<str>,
    store: Store,
}

/// Where a limit's buckets are.
#[derive(Clone)]
enum Store {
    Local(Arc<Local>),
    Shared(Arc<SharedLimit>),
}

/// A limit of this replica alone.
struct Local {
    gcra: Gcra,
    buckets: Bounded<Tat>,
}

impl Limit {
    fn new(c: &RateLimit, previous: Option<&Limits>) -> Option<Limit> {
        let key = match LimitKey::parse(&c.key) {
            Ok(k) => k,
            Err(e) => {
                // Validation refuses it first; a limit that cannot key its buckets is left out.
                tracing::warn!(limit = %c.name, error = %e, "rate limit left out");
                return None;
            }
        };
        let (mut methods, mut paths) = (Vec::new(), Vec::new());
        for m in &c.matches {
            match m.strip_prefix("path:") {
                Some(p) => paths.push(p.into()),
                None => methods.push(m.as_str().into()),
            }
        }
        let kept = previous.and_then(|p| {
            p.limits
                .iter()
                .find(|l| {
                    *l.name == *c.name
                        && l.rate_per_s == c.rate_per_s
                        && l.burst == c.burst
                        && l.key == key
                        && l.shared == c.shared
                })
                .map(|l| (l.name.clone(), l.store.clone()))
        });
        let (name, store) = kept.unwrap_or_else(|| {
            let name: Arc<str> = c.name.as_str().into();
            let store = match c.shared {
                true => Store::Shared(Arc::new(SharedLimit::new(
                    name.clone(),
                    c.rate_per_s,
                    c.burst,
                ))),
                false => Store::Local(Arc::new(Local {
                    gcra: Gcra::new(c.rate_per_s, c.burst),
                    buckets: Bounded::new(MAX_KEYS),
                })),
            };
            (name, store)
        });
        Some(Limit {
            name,
            methods: methods.into(),
            paths: paths.into(),
            key,
            rate_per_s: c.rate_per_s,
            burst: c.burst,
            shared: c.shared,
            policy: policy_item(&c.name, c.rate_per_s, c.burst).into(),
            store,
        })
    }

    fn matches(&self, target: Target<'_>) -> bool {
        match target {
            Target::Method(m) => self.methods.iter().any(|g| glob_match(g, m)),
            Target::Path(p) => self.paths.iter().any(|g| glob_match(g, p)),
        }
    }

    fn take(
        &self,
        key: &KeyPart<'_>,
        now: u64,
        fleet: Option<&Arc<Replicas>>,
    ) -> Result<Pass, u64> {
        match &self.store {
            Store::Local(l) => {
                let hash = l.buckets.hash(key);
                l.buckets.with(hash, now, |tat| {
                    let took = l.gcra.take(tat.0, now)?;
                    tat.0 = took.tat;
                    Ok(took.into())
                })
            }
            Store::Shared(s) => s.take(fleet, key, now),
        }
    }

    fn peek(
        &self,
        key: &KeyPart<'_>,
        now: u64,
        fleet: Option<&Arc<Replicas>>,
    ) -> Result<Pass, u64> {
        match &self.store {
            Store::Local(l) => {
                let hash = l.buckets.hash(key);
                let tat = l.buckets.peek(hash, |tat| tat.copied()).unwrap_or_default();
                l.gcra.take(tat.0, now).map(Pass::from)
            }
            Store::Shared(s) => s.peek(fleet, key, now),
        }
    }

    fn give_back(&self, key: &KeyPart<'_>, now: u64, fleet: Option<&Arc<Replicas>>) {
        match &self.store {
            Store::Local(l) => {
                let hash = l.buckets.hash(key);
                l.buckets
                    .update(hash, |tat| tat.0 = l.gcra.give_back(tat.0));
            }
            Store::Shared(s) => s.give_back(fleet, key, now),
        }
    }
}

impl Limits {
    /// From `[[rate_limits]]` (validated). `previous` (before a reload): a limit whose name,
    /// rate, burst and key are unchanged keeps its buckets. `link`: the cluster's, for
    /// `shared = true` limits.
    pub(crate) fn new(
        config: &[RateLimit],
        previous: Option<&Limits>,
        link: Option<Arc<Link>>,
    ) -> Self {
        let fleet = match config.iter().any(|c| c.shared) {
            true => link.map(|link| {
                previous
                    .and_then(|p| p.fleet.clone())
                    .filter(|f| f.same_link(&link))
                    .unwrap_or_else(|| Replicas::start(link))
            }),
            false => None,
        };
        Limits {
            limits: config
                .iter()
                .filter_map(|c| Limit::new(c, previous))
                .collect(),
            fleet,
        }
    }

    /// Whether there is no limit at all (the call path then skips the check).
    pub(crate) fn is_empty(&self) -> bool {
        self.limits.is_empty()
    }

    /// Takes one token from every limit that matches `target`, for `subject`'s key. When any
    /// is empty: the strictest answer (the longest wait), and no token taken from the others
    /// (those taken are given back). No allocation and no clock read when no limit matches.
    pub(crate) fn check(
        &self,
        target: Target<'_>,
        subject: &Subject<'_>,
    ) -> Result<Option<Passed>, Limited> {
        let Some(first) = self.limits.iter().position(|l| l.matches(target)) else {
            return Ok(None);
        };
        self.check_from(first, target, subject, now_ns()).map(Some)
    }

    /// [`check`](Self::check) at `now` (tests drive the clock).
    #[cfg(test)]
    fn check_at(
        &self,
        target: Target<'_>,
        subject: &Subject<'_>,
        now: u64,
    ) -> Result<Option<Passed>, Limited> {
        match self.limits.iter().position(|l| l.matches(target)) {
            Some(first) => self.check_from(first, target, subject, now).map(Some),
            None => Ok(None),
        }
    }

    fn check_from(
        &self,
        first: usize,
        target: Target<'_>,
        subject: &Subject<'_>,
        now: u64,
    ) -> Result<Passed, Limited> {
        let fleet = self.fleet.as_ref();
        let mut nearest: Option<(&Limit, Pass)> = None;
        for (i, limit) in self.limits.iter().enumerate().skip(first) {
            if i > first && !limit.matches(target) {
                continue;
            }
            let key = KeyPart::of(&limit.key, subject);
            match limit.take(&key, now, fleet) {
                Ok(pass) => {
                    if nearest.is_none_or(|(_, n)| pass.remaining < n.remaining) {
                        nearest = Some((limit, pass));
                    }
                }
                Err(wait) => return Err(self.refuse(i, wait, target, subject, now)),
            }
        }
        let (limit, pass) = nearest.unwrap_or((
            &self.limits[first],
            Pass {
                remaining: 0,
                next_ns: 0,
            },
        ));
        Ok(Passed {
            policy: limit.policy.clone(),
            remaining: pass.remaining,
            reset_s: ceil_div(pass.next_ns, NS_PER_S),
        })
    }

    /// The refusal of limit `at` (empty for `wait` ns): the tokens the limits before it took
    /// are given back, the limits after it are looked at without taking, and the longest wait
    /// wins.
    fn refuse(
        &self,
        at: usize,
        wait: u64,
        target: Target<'_>,
        subject: &Subject<'_>,
        now: u64,
    ) -> Limited {
        let fleet = self.fleet.as_ref();
        let mut worst = (at, wait);
        for (i, limit) in self.limits.iter().enumerate() {
            if i == at || !limit.matches(target) {
                continue;
            }
            let key = KeyPart::of(&limit.key, subject);
            if i < at {
                limit.give_back(&key, now, fleet);
            } else if let Err(w) = limit.peek(&key, now, fleet) {
                if w > worst.1 {
                    worst = (i, w);
                }
            }
        }
        let limit = &self.limits[worst.0];
        Limited {
            limit: limit.name.clone(),
            retry_after_ms: ceil_div(worst.1, NS_PER_MS).max(1),
            policy: limit.policy.to_string(),
            reset_s: ceil_div(worst.1, NS_PER_S).max(1),
        }
    }

    /// The Redis side of the shared limits.
    #[cfg(test)]
    pub(super) fn fleet(&self) -> Option<&Arc<Replicas>> {
        self.fleet.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Kind;
    use crate::util::bounded::SHARDS;
    use axum::http::HeaderMap;

    const T0: u64 = 1_000 * NS_PER_S;
    const MS: u64 = NS_PER_MS;

    fn limit(name: &str, matches: &[&str], key: &str, rate: f64, burst: u32) -> RateLimit {
        RateLimit {
            name: name.into(),
            matches: matches.iter().map(|m| m.to_string()).collect(),
            key: key.into(),
            rate_per_s: rate,
            burst,
            shared: false,
        }
    }

    fn ip(last: u8) -> Subject<'static> {
        Subject {
            ip: Some(IpAddr::from([10, 0, 0, last])),
            ..Subject::default()
        }
    }

    const CALL: Target<'static> = Target::Method("plan.get");

    #[test]
    fn a_burst_passes_then_the_next_waits_exactly_one_interval() {
        let limits = Limits::new(&[limit("per-ip", &["*"], "ip", 10.0, 5)], None, None);
        let s = ip(1);
        for left in (0..5).rev() {
            let passed = limits.check_at(CALL, &s, T0).unwrap().unwrap();
            assert_eq!(passed.remaining, left);
        }
        let refused = limits.check_at(CALL, &s, T0).unwrap_err();
        assert_eq!(
            refused,
            Limited {
                limit: "per-ip".into(),
                retry_after_ms: 100,
                policy: r#""per-ip";q=5;w=1"#.into(),
                reset_s: 1,
            }
        );
        // A millisecond short of the interval: still refused, 1 ms to go.
        let early = limits.check_at(CALL, &s, T0 + 99 * MS).unwrap_err();
        assert_eq!(early.retry_after_ms, 1);
        // After 1/rate, one more passes (the last), and the next waits a whole interval again.
        let refilled = limits.check_at(CALL, &s, T0 + 100 * MS).unwrap().unwrap();
        assert_eq!(refilled.remaining, 0);
        let again = limits.check_at(CALL, &s, T0 + 100 * MS).unwrap_err();
        assert_eq!(again.retry_after_ms, 100);
        // A quiet spell refills the whole burst, no more.
        for _ in 0..5 {
            limits.check_at(CALL, &s, T0 + 60 * NS_PER_S).unwrap();
        }
        assert!(limits.check_at(CALL, &s, T0 + 60 * NS_PER_S).is_err());
    }

    #[test]
    fn retry_after_rounds_up_an_uneven_interval() {
        let limits = Limits::new(&[limit("slow", &["*"], "global", 3.0, 1)], None, None);
        let s = Subject::default();
        limits.check_at(CALL, &s, T0).unwrap();
        let refused = limits.check_at(CALL, &s, T0).unwrap_err();
        assert_eq!(refused.retry_after_ms, 334, "1/3 s is 333.33… ms");
        assert!(limits.check_at(CALL, &s, T0 + 333_333_332).is_err());
        assert!(limits.check_at(CALL, &s, T0 + 333_333_333).is_ok());
    }

    #[test]
    fn the_strictest_of_several_limits_wins_and_the_others_keep_their_tokens() {
        let limits = Limits::new(
            &[
                limit("fast", &["plan.*"], "global", 10.0, 2),
                limit("slow", &["*"], "global", 1.0, 3),
                limit("other", &["task.*"], "global", 1.0, 1),
            ],
            None,
            None,
        );
        let s = Subject::default();
        // The nearest to empty speaks for a call that passes.
        let first = limits.check_at(CALL, &s, T0).unwrap().unwrap();
        assert_eq!((&*first.policy, first.remaining), (r#""fast";q=2;w=1"#, 1));
        limits.check_at(CALL, &s, T0).unwrap();
        // "fast" is empty: refused, and "slow" keeps its last token.
        let refused = limits.check_at(CALL, &s, T0).unwrap_err();
        assert_eq!((&*refused.limit, refused.retry_after_ms), ("fast", 100));
        let slow_only = Target::Method("session.get");
        let left = limits.check_at(slow_only, &s, T0).unwrap().unwrap();
        assert_eq!((&*left.policy, left.remaining), (r#""slow";q=3;w=3"#, 0));
        // Both empty now: the longer wait ("slow", 950 ms against 50) is the answer.
        let refused = limits.check_at(CALL, &s, T0 + 50 * MS).unwrap_err();
        assert_eq!((&*refused.limit, refused.retry_after_ms), ("slow", 950));
        // "fast" refills first; the call is still refused by "slow", and the token "fast" gave
        // it is given back: "fast" still holds two.
        let refused = limits.check_at(CALL, &s, T0 + 300 * MS).unwrap_err();
        assert_eq!((&*refused.limit, refused.retry_after_ms), ("slow", 700));
        let fast_only = Limits::new(
            &[limit("fast", &["*"], "global", 10.0, 2)],
            Some(&limits),
            None,
        );
        let fast = fast_only
            .check_at(CALL, &s, T0 + 300 * MS)
            .unwrap()
            .unwrap();
        assert_eq!(
            fast.remaining, 1,
            "fast's buckets kept, its token given back"
        );
        let passed = limits.check_at(CALL, &s, T0 + NS_PER_S).unwrap().unwrap();
        assert_eq!(
            (&*passed.policy, passed.remaining),
            (r#""slow";q=3;w=3"#, 0),
            "slow's one token, taken"
        );
    }

    #[test]
    fn keys_keep_kinds_apart_and_anonymous_callers_go_by_address() {
        let limits = Limits::new(&[limit("c", &["*"], "caller", 1.0, 1)], None, None);
        let jwt = Caller::new(Kind::Jwt, "x", []);
        let key = Caller::new(Kind::ApiKey, "x", []);
        let by = |caller| Subject {
            caller: Some(caller),
            ip: Some(IpAddr::from([10, 0, 0, 1])),
            headers: None,
        };
        assert!(limits.check_at(CALL, &by(&jwt), T0).is_ok());
        assert!(limits.check_at(CALL, &by(&jwt), T0).is_err());
        assert!(
            limits.check_at(CALL, &by(&key), T0).is_ok(),
            "an API key \"x\" is not the JWT subject \"x\""
        );
        assert!(
            limits.check_at(CALL, &ip(1), T0).is_ok(),
            "anonymous: by address, apart from the callers"
        );
        assert!(limits.check_at(CALL, &ip(1), T0).is_err());
        assert!(limits.check_at(CALL, &ip(2), T0).is_ok());
        let nowhere = Subject::default();
        assert!(limits.check_at(CALL, &nowhere, T0).is_ok());
        assert!(
            limits.check_at(CALL, &nowhere, T0).is_err(),
            "one bucket for no address"
        );

        let by_ip = Limits::new(&[limit("i", &["*"], "ip", 1.0, 1)], None, None);
        assert!(by_ip.check_at(CALL, &by(&jwt), T0).is_ok());
        assert!(
            by_ip.check_at(CALL, &by(&key), T0).is_err(),
            "by address, whoever the caller"
        );

        let by_header = Limits::new(&[limit("h", &["*"], "header:X-Tenant", 1.0, 1)], None, None);
        let mut a = HeaderMap::new();
        a.insert("x-tenant", "a".parse().unwrap());
        let mut b = HeaderMap::new();
        b.insert("x-tenant", "b".parse().unwrap());
        let none = HeaderMap::new();
        let with = |h| Subject {
            headers: Some(Headers::Map(h)),
            ..ip(1)
        };
        assert!(by_header.check_at(CALL, &with(&a), T0).is_ok());
        assert!(by_header.check_at(CALL, &with(&a), T0).is_err());
        assert!(by_header.check_at(CALL, &with(&b), T0).is_ok());
        assert!(by_header.check_at(CALL, &with(&none), T0).is_ok());
        assert!(
            by_header.check_at(CALL, &ip(9), T0).is_err(),
            "without the header: one shared bucket"
        );

        let global = Limits::new(&[limit("g", &["*"], "global", 1.0, 1)], None, None);
        assert!(global.check_at(CALL, &ip(1), T0).is_ok());
        assert!(global.check_at(CALL, &ip(2), T0).is_err());
    }

    #[test]
    fn path_entries_match_pass_through_paths_and_method_globs_match_methods() {
        let limits = Limits::new(
            &[
                limit("files", &["path:/files/*"], "global", 1.0, 1),
                limit("plans", &["plan.*", "path:/plans"], "global", 1.0, 1),
            ],
            None,
            None,
        );
        let s = Subject::default();
        assert_eq!(
            limits.check_at(Target::Method("/files/a"), &s, T0),
            Ok(None)
        );
        assert_eq!(limits.check_at(Target::Path("/other"), &s, T0), Ok(None));
        assert_eq!(limits.check_at(Target::Path("/plans/x"), &s, T0), Ok(None));
        assert_eq!(limits.check(Target::Method("task.get"), &s), Ok(None));
        let files = limits
            .check_at(Target::Path("/files/a/b"), &s, T0)
            .unwrap()
            .unwrap();
        assert!(files.policy.starts_with("\"files\""));
        assert!(limits.check_at(Target::Path("/files/c"), &s, T0).is_err());
        assert!(limits.check_at(Target::Path("/plans"), &s, T0).is_ok());
        assert_eq!(
            &*limits
                .check_at(Target::Method("plan.get"), &s, T0)
                .unwrap_err()
                .limit,
            "plans",
            "one bucket for the methods and the path of one limit"
        );
    }

    #[test]
    fn a_reload_keeps_the_buckets_of_unchanged_limits_only() {
        let config = [
            limit("a", &["*"], "global", 1.0, 1),
            limit("b", &["*"], "global", 1.0, 1),
        ];
        let before = Limits::new(&config, None, None);
        let s = Subject::default();
        before.check_at(CALL, &s, T0).unwrap();
        assert!(before.check_at(CALL, &s, T0).is_err());

        // "a" unchanged but for its match list; "b"'s rate changed.
        let mut next = config.clone();
        next[0].matches = vec!["plan.*".into(), "task.*".into()];
        next[1].rate_per_s = 2.0;
        let after = Limits::new(&next, Some(&before), None);
        let refused = after.check_at(CALL, &s, T0).unwrap_err();
        assert_eq!(&*refused.limit, "a", "a kept its empty bucket");
        let only_b = Limits::new(&next[1..], Some(&after), None);
        assert!(only_b.check_at(CALL, &s, T0).is_ok(), "b started afresh");
        assert!(!after.is_empty());
        assert!(Limits::new(&[], Some(&after), None).is_empty());
    }

    #[test]
    fn buckets_stay_bounded_full_ones_going_first() {
        let b: Bounded<Tat> = Bounded::new(SHARDS * 8);
        let gcra = Gcra::new(1.0, 1);
        let take = |k: u64, now: u64| {
            let h = b.hash(&KeyPart::Header(&k.to_le_bytes()));
            b.with(h, now, |t| gcra.take(t.0, now).map(|took| t.0 = took.tat))
        };
        for k in 0..10_000 {
            take(k, T0).unwrap();
            assert!(b.len() <= SHARDS * 8);
        }
        // Each shard sorted at most once per eighth of its room: never below 7/8 after.
        assert!(b.len() >= SHARDS * 7, "{}", b.len());
        // Full buckets (TAT past) are dropped before any live one.
        let later = T0 + 10 * NS_PER_S;
        let live = 20_000;
        take(live, later + MS).unwrap();
        for k in 30_000..30_000 + SHARDS as u64 * 7 {
            take(k, later).unwrap();
        }
        assert!(take(live, later + MS).is_err(), "the live bucket was kept");
        // The default cap: the shard count times its share.
        assert!(MAX_KEYS.div_ceil(SHARDS) * SHARDS <= MAX_KEYS + SHARDS);
    }

    #[test]
    fn the_policy_follows_the_ratelimit_draft() {
        assert_eq!(
            policy_item("per-caller", 100.0, 200),
            r#""per-caller";q=200;w=2"#
        );
        assert_eq!(policy_item("a\"b", 0.5, 3), r#""a\"b";q=3;w=6"#);
    }

    #[test]
    fn gcra_arithmetic_stays_in_range() {
        let g = Gcra::new(1e-12, u32::MAX);
        assert!(g.take(0, u64::MAX - 5).is_ok());
        let fast = Gcra::new(1e12, 1);
        assert_eq!(fast.interval_ns, 1);
        let took = Gcra::new(10.0, 5).take(0, T0).unwrap();
        assert_eq!((took.remaining, took.next_ns), (4, 100 * MS));
    }
}
