//! Who still speaks legacy: per caller, its dialects, methods, calls and when it was last seen,
//! bounded to the most active `max_callers` (the rest counted together). Pure: the caller passes
//! the time.
//!
//! When the table is full a new caller takes the place of the least active one (fewest calls,
//! then longest unseen), whose calls move to `others`: a caller that keeps calling keeps its
//! row, and a flood of one-off callers only churns the bottom of the table.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::config::Sticky;

use crate::upstream::affinity::{hash, key_hash, Who};

/// Methods named per caller; more are counted in `more_methods`.
pub(crate) const MAX_METHODS_PER_CALLER: usize = 16;
/// Longest caller id or method name kept, in characters.
const MAX_NAME_CHARS: usize = 64;

/// The id a caller is reported under, as a new string (the tests' reading of it).
#[cfg(test)]
fn caller_id(rule: &Sticky, who: &Who<'_>) -> String {
    let mut id = String::new();
    write_caller_id(rule, who, &mut id);
    id
}

/// The id a caller is reported under, appended to `out`: every call names its caller, and a
/// buffer kept by the caller spares it an allocation each time. Credentials only ever as a
/// short hash.
pub(crate) fn write_caller_id(rule: &Sticky, who: &Who<'_>, out: &mut String) {
    use std::fmt::Write;
    // Writing to a `String` cannot fail.
    let _ = match rule {
        Sticky::Auth if who.caller.is_some() => match who.caller {
            Some((kind, id)) => {
                out.push_str(kind);
                out.push(':');
                out.write_str(super::compare::cut_str(id, MAX_NAME_CHARS))
            }
            None => Ok(()),
        },
        Sticky::Auth => match key_hash(rule, who) {
            Some(h) => write!(out, "auth:{:012x}", h >> 16),
            None => out.write_str("(no auth)"),
        },
        Sticky::Header(name) => match who.headers.and_then(|h| h.get(name.as_str())) {
            Some(v) => match crate::http::headers::visible(v) {
                Some(s) => out.write_str(super::compare::cut_str(s, MAX_NAME_CHARS)),
                None => write!(out, "hash:{:012x}", hash(v) >> 16),
            },
            None => write!(out, "(no {name})"),
        },
        Sticky::Ip => match who.ip {
            Some(ip) => write!(out, "{ip}"),
            None => out.write_str("(unknown)"),
        },
    };
}

/// One caller's row.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Caller {
    /// Calls by client dialect (`legacy`, `jsonrpc`, `a2a-1.0`, ...).
    pub dialects: BTreeMap<&'static str, u64>,
    /// Calls by method, for the first [`MAX_METHODS_PER_CALLER`] methods.
    pub methods: BTreeMap<String, u64>,
    /// Calls of methods beyond those.
    pub more_methods: u64,
    /// All its calls.
    pub calls: u64,
    /// Unix time of its first call in this table, ms.
    pub first_seen_ms: u64,
    /// Unix time of its last call, ms.
    pub last_seen_ms: u64,
}

impl Caller {
    /// Counts one call of `method` in `dialect` at `now_ms`.
    fn count(&mut self, dialect: &'static str, method: &str, now_ms: u64) {
        self.calls += 1;
        self.last_seen_ms = now_ms;
        *self.dialects.entry(dialect).or_default() += 1;
        if let Some(n) = self.methods.get_mut(method) {
            *n += 1;
        } else if self.methods.len() < MAX_METHODS_PER_CALLER {
            self.methods
                .insert(super::compare::cut(method, MAX_NAME_CHARS), 1);
        } else {
            self.more_methods += 1;
        }
    }
}

/// The bounded caller table.
#[derive(Debug)]
pub(crate) struct Callers {
    max: usize,
    /// Hashed with foldhash, seeded per process (ids are client-sent; the table is bounded by
    /// `max`).
    rows: HashMap<String, Caller, foldhash::fast::RandomState>,
    others_callers: u64,
    others_calls: u64,
}

/// The table as `/migration` shows it.
#[derive(Debug, Serialize)]
pub(crate) struct CallersReport {
    /// Callers reported one by one, most active first.
    pub tracked: Vec<CallerRow>,
    /// Callers pushed out of the table, and their calls.
    pub others: Others,
}

/// One reported caller.
#[derive(Debug, Serialize)]
pub(crate) struct CallerRow {
    /// The id (see [`write_caller_id`]).
    pub caller: String,
    /// Its figures.
    #[serde(flatten)]
    pub row: Caller,
}

/// What is left of callers pushed out of the table.
#[derive(Debug, Serialize)]
pub(crate) struct Others {
    /// How many.
    pub callers: u64,
    /// Their calls while they were tracked.
    pub calls: u64,
}

impl Callers {
    /// An empty table of at most `max` rows.
    pub(crate) fn new(max: usize) -> Self {
        Callers {
            max: max.max(1),
            rows: HashMap::default(),
            others_callers: 0,
            others_calls: 0,
        }
    }

    /// Records one call by `id`.
    pub(crate) fn saw(&mut self, id: &str, dialect: &'static str, method: &str, now_ms: u64) {
        // One lookup for a caller already in the table (nearly every call).
        if let Some(row) = self.rows.get_mut(id) {
            row.count(dialect, method, now_ms);
            return;
        }
        if self.rows.len() >= self.max {
            self.evict();
        }
        self.rows
            .entry(id.to_owned())
            .or_insert(Caller {
                first_seen_ms: now_ms,
                ..Caller::default()
            })
            .count(dialect, method, now_ms);
    }

    fn evict(&mut self) {
        let least = self
            .rows
            .iter()
            .min_by_key(|(_, r)| (r.calls, r.last_seen_ms))
            .map(|(k, _)| k.clone());
        if let Some(k) = least {
            if let Some(r) = self.rows.remove(&k) {
                self.others_callers += 1;
                self.others_calls += r.calls;
            }
        }
    }

    /// Changes the bound (a reload), pushing out the least active rows beyond it.
    pub(crate) fn set_max(&mut self, max: usize) {
        self.max = max.max(1);
        while self.rows.len() > self.max {
            self.evict();
        }
    }

    /// The report, most active first.
    pub(crate) fn report(&self) -> CallersReport {
        let mut tracked: Vec<CallerRow> = self
            .rows
            .iter()
            .map(|(k, r)| CallerRow {
                caller: k.clone(),
                row: r.clone(),
            })
            .collect();
        tracked.sort_by(|a, b| b.row.calls.cmp(&a.row.calls).then(a.caller.cmp(&b.caller)));
        CallersReport {
            tracked,
            others: Others {
                callers: self.others_callers,
                calls: self.others_calls,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::legacy::Auth;

    #[test]
    fn rows_count_dialects_and_methods() {
        let mut t = Callers::new(10);
        t.saw("a", "legacy", "plan.get", 1);
        t.saw("a", "legacy", "plan.get", 2);
        t.saw("a", "jsonrpc", "plan.list", 3);
        let r = t.report();
        assert_eq!(r.tracked.len(), 1);
        let a = &r.tracked[0].row;
        assert_eq!(a.calls, 3);
        assert_eq!(a.dialects["legacy"], 2);
        assert_eq!(a.dialects["jsonrpc"], 1);
        assert_eq!(a.methods["plan.get"], 2);
        assert_eq!((a.first_seen_ms, a.last_seen_ms), (1, 3));
        for i in 0..20 {
            t.saw("a", "legacy", &format!("m{i}"), 4);
        }
        let r = t.report();
        assert_eq!(r.tracked[0].row.methods.len(), MAX_METHODS_PER_CALLER);
        assert_eq!(r.tracked[0].row.more_methods, 6);
    }

    #[test]
    fn the_most_active_stay_and_the_rest_are_counted() {
        let mut t = Callers::new(3);
        for _ in 0..5 {
            t.saw("busy", "legacy", "m", 1);
        }
        for i in 0..100 {
            t.saw(&format!("once-{i}"), "jsonrpc", "m", 2 + i);
        }
        let r = t.report();
        assert_eq!(r.tracked.len(), 3);
        assert_eq!(r.tracked[0].caller, "busy");
        assert_eq!(r.others.callers, 98);
        assert_eq!(r.others.calls, 98);
        t.set_max(1);
        assert_eq!(t.report().tracked.len(), 1);
        assert_eq!(t.report().tracked[0].caller, "busy");
    }

    #[test]
    fn ids_never_show_a_token() {
        let auth = Auth::bearer("s3cret-token");
        let who = Who {
            auth: Some(&auth),
            ..Who::default()
        };
        let id = caller_id(&Sticky::Auth, &who);
        assert!(id.starts_with("auth:") && id.len() == 17, "{id}");
        assert!(!id.contains("s3cret"));
        let named = Who {
            caller: Some(("jwt", "alice")),
            ..who
        };
        assert_eq!(
            caller_id(&Sticky::Auth, &named),
            "jwt:alice",
            "a verified caller is reported by name"
        );
        assert_eq!(caller_id(&Sticky::Auth, &Who::default()), "(no auth)");
        assert_eq!(caller_id(&Sticky::Ip, &Who::default()), "(unknown)");
    }
}
