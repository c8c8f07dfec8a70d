//! `[migration]` and the migration keys of `[[routes]]` (`split`, `sticky`, `shadow*`,
//! `[routes.rollback]`): moving a method from one upstream to another a slice at a time.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::{Issues, Route, Upstream};

/// `[migration]`: how callers are told apart, and the shadow queue's bounds.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Migration {
    /// Who a caller is, for the caller report: `"auth"` (a short hash of the `Authorization` /
    /// legacy `auth` token), `"header:NAME"` (that header's value) or `"ip"`.
    pub caller: String,
    /// Most callers reported one by one (the most active); the rest are counted together.
    pub max_callers: usize,
    /// Shadow calls waiting to be sent; beyond, new shadows are dropped and counted.
    pub shadow_queue: usize,
    /// Shadow exchanges in flight at once.
    pub shadow_concurrency: usize,
}

impl Default for Migration {
    fn default() -> Self {
        Migration {
            caller: "auth".into(),
            max_callers: 1000,
            shadow_queue: 1024,
            shadow_concurrency: 16,
        }
    }
}

/// Upper bound of `max_callers` (each tracked caller costs a few hundred bytes).
const MAX_CALLERS_LIMIT: usize = 1_000_000;
/// Upper bound of `shadow_queue` and `shadow_concurrency`.
const SHADOW_LIMIT: usize = 1_000_000;

impl Migration {
    pub(super) fn validate(&self, issues: &mut Issues) {
        if let Err(e) = Sticky::parse(&self.caller) {
            issues.add("migration.caller".into(), e);
        }
        if !(1..=MAX_CALLERS_LIMIT).contains(&self.max_callers) {
            issues.add(
                "migration.max_callers".into(),
                format!("must be between 1 and {MAX_CALLERS_LIMIT}"),
            );
        }
        for (key, v) in [
            ("shadow_queue", self.shadow_queue),
            ("shadow_concurrency", self.shadow_concurrency),
        ] {
            if !(1..=SHADOW_LIMIT).contains(&v) {
                issues.add(
                    format!("migration.{key}"),
                    format!("must be between 1 and {SHADOW_LIMIT}"),
                );
            }
        }
    }
}

/// One side of `split = [{ upstream = "legacy", weight = 90 }, ...]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SplitSide {
    /// Upstream name.
    pub upstream: String,
    /// Relative weight (0 keeps the side configured but sends it nothing).
    pub weight: u32,
}

/// `[routes.rollback]`: when a split's non-primary side is taken out by itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Rollback {
    /// Error rate over the window above which the side is rolled back.
    pub max_error_rate: f64,
    /// Calls the side must have served in the window before it is judged.
    pub min_calls: u64,
    /// The sliding window.
    pub window_ms: u64,
    /// Optional: a p99 latency over the window above which the side is rolled back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_p99_ms: Option<u64>,
}

impl Default for Rollback {
    fn default() -> Self {
        Rollback {
            max_error_rate: 0.05,
            min_calls: 50,
            window_ms: 60_000,
            max_p99_ms: None,
        }
    }
}

/// How a caller is identified: for `sticky` (which split side it keeps) and `migration.caller`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sticky {
    /// The `Authorization` header, or the legacy envelope's `auth` token.
    Auth,
    /// A request header's value (the name lower-cased).
    Header(String),
    /// The client's IP address.
    Ip,
}

impl Sticky {
    /// `"auth"`, `"header:NAME"` or `"ip"`.
    pub fn parse(s: &str) -> Result<Sticky, String> {
        match s {
            "auth" => Ok(Sticky::Auth),
            "ip" => Ok(Sticky::Ip),
            _ => match s.strip_prefix("header:") {
                Some(name) if axum::http::HeaderName::from_bytes(name.as_bytes()).is_ok() => {
                    Ok(Sticky::Header(name.to_ascii_lowercase()))
                }
                Some(name) => Err(format!("{name:?} is not a header name")),
                None => Err(format!(
                    "{s:?} is not one of \"auth\", \"header:NAME\", \"ip\""
                )),
            },
        }
    }
}

/// A JSON pointer (RFC 6901): empty, or `/` followed by reference tokens.
pub fn is_json_pointer(p: &str) -> bool {
    if !(p.is_empty() || p.starts_with('/')) {
        return false;
    }
    // `~` must be followed by 0 or 1.
    let b = p.as_bytes();
    b.iter()
        .enumerate()
        .all(|(i, c)| *c != b'~' || matches!(b.get(i + 1), Some(b'0' | b'1')))
}

/// Checks the migration keys of every route. `names` are the upstream names.
pub(super) fn validate_routes(routes: &[Route], upstreams: &[Upstream], issues: &mut Issues) {
    let names: HashSet<&str> = upstreams.iter().map(|u| u.name.as_str()).collect();
    let known = |n: &str| names.contains(n);
    let mut route_names = HashSet::new();
    for (i, r) in routes.iter().enumerate() {
        let key = |k: &str| format!("routes[{i}].{k}");
        let name = r.display_name(i);
        if !route_names.insert(name.clone()) {
            issues.add(key("name"), format!("duplicate route name {name:?}"));
        }
        validate_target(i, r, &known, issues);
        validate_sticky_and_shadow(i, r, &known, issues);
        if let Some(rb) = &r.rollback {
            validate_rollback(i, r, rb, issues);
        }
    }
}

/// Checks where route `i` sends its calls: `upstream` or `split` (not both), the split's
/// sides (known, distinct upstreams) and its weights. `known` tells upstream names.
fn validate_target(i: usize, r: &Route, known: &impl Fn(&str) -> bool, issues: &mut Issues) {
    let key = |k: &str| format!("routes[{i}].{k}");
    match (r.upstream.is_empty(), r.split.is_empty()) {
        (true, true) => issues.add(
            key("upstream"),
            "a route names an upstream or a split".into(),
        ),
        (false, false) => issues.add(
            key("split"),
            "a route names either an upstream or a split, not both".into(),
        ),
        (false, true) if !known(&r.upstream) => issues.add(
            key("upstream"),
            format!("no upstream is named {:?}", r.upstream),
        ),
        _ => {}
    }
    let mut sides = HashSet::new();
    for (j, s) in r.split.iter().enumerate() {
        if !known(&s.upstream) {
            issues.add(
                format!("routes[{i}].split[{j}].upstream"),
                format!("no upstream is named {:?}", s.upstream),
            );
        } else if !sides.insert(s.upstream.as_str()) {
            issues.add(
                format!("routes[{i}].split[{j}].upstream"),
                format!("{:?} is already a side of this split", s.upstream),
            );
        }
    }
    if !r.split.is_empty() && r.split.iter().all(|s| s.weight == 0) {
        issues.add(key("split"), "at least one weight must be positive".into());
    }
    if r.split.iter().map(|s| u64::from(s.weight)).sum::<u64>() > u64::from(u32::MAX) {
        issues.add(key("split"), "the weights add up to more than 2^32".into());
    }
}

/// Checks route `i`'s `sticky` rule and its `shadow`, `shadow_sample`, `shadow_ignore` and
/// `shadow_noise` keys. `known` tells upstream names.
fn validate_sticky_and_shadow(
    i: usize,
    r: &Route,
    known: &impl Fn(&str) -> bool,
    issues: &mut Issues,
) {
    let key = |k: &str| format!("routes[{i}].{k}");
    if let Err(e) = Sticky::parse(&r.sticky) {
        issues.add(key("sticky"), e);
    }
    if !r.shadow.is_empty() && !known(&r.shadow) {
        issues.add(
            key("shadow"),
            format!("no upstream is named {:?}", r.shadow),
        );
    }
    if !(0.0..=1.0).contains(&r.shadow_sample) {
        issues.add(key("shadow_sample"), "must be between 0.0 and 1.0".into());
    }
    for (j, p) in r.shadow_ignore.iter().enumerate() {
        if !is_json_pointer(p) {
            issues.add(
                format!("routes[{i}].shadow_ignore[{j}]"),
                format!("{p:?} is not a JSON pointer (\"/result/updated_at\")"),
            );
        }
    }
    if !r.shadow_noise.is_empty() {
        if r.shadow.is_empty() {
            issues.add(
                key("shadow_noise"),
                "needs `shadow` on the same route".into(),
            );
        } else if !known(&r.shadow_noise) {
            issues.add(
                key("shadow_noise"),
                format!("no upstream is named {:?}", r.shadow_noise),
            );
        }
    }
}

/// Checks route `i`'s `[routes.rollback]` `rb`: a split to roll back, and its bounds.
fn validate_rollback(i: usize, r: &Route, rb: &Rollback, issues: &mut Issues) {
    let key = |k: &str| format!("routes[{i}].{k}");
    if r.split.len() < 2 {
        issues.add(
            key("rollback"),
            "needs a split of at least two sides (the first is the one kept)".into(),
        );
    }
    if !(0.0..=1.0).contains(&rb.max_error_rate) {
        issues.add(
            format!("routes[{i}].rollback.max_error_rate"),
            "must be between 0.0 and 1.0".into(),
        );
    }
    if rb.min_calls == 0 {
        issues.add(
            format!("routes[{i}].rollback.min_calls"),
            "must be positive".into(),
        );
    }
    if rb.window_ms < 100 || rb.window_ms > 86_400_000 {
        issues.add(
            format!("routes[{i}].rollback.window_ms"),
            "must be between 100 and 86400000 (a day)".into(),
        );
    }
    if rb.max_p99_ms == Some(0) {
        issues.add(
            format!("routes[{i}].rollback.max_p99_ms"),
            "must be positive".into(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sticky_rules_parse() {
        assert_eq!(Sticky::parse("auth"), Ok(Sticky::Auth));
        assert_eq!(Sticky::parse("ip"), Ok(Sticky::Ip));
        assert_eq!(
            Sticky::parse("header:X-Client"),
            Ok(Sticky::Header("x-client".into()))
        );
        assert!(Sticky::parse("header:bad name").is_err());
        assert!(Sticky::parse("cookie").is_err());
    }

    #[test]
    fn pointers() {
        assert!(is_json_pointer(""));
        assert!(is_json_pointer("/result/updated_at"));
        assert!(is_json_pointer("/a~1b/~0c"));
        assert!(!is_json_pointer("result"));
        assert!(!is_json_pointer("/a~2"));
        assert!(!is_json_pointer("/a~"));
    }
}
