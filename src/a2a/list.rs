//! `ListTasks`: its params, filters and cursor pagination over the tasks the bridge keeps. Pure:
//! the caller hands in the tasks.
//!
//! Tasks are ordered by status timestamp, newest first (ties by id), as the spec asks. A page
//! token is opaque to the client: it names the last task of the previous page (its timestamp
//! and id, hex-encoded), so a page follows where the previous one ended even when newer tasks
//! arrived meanwhile. Page size: 50 unless asked, 1 to 100 (spec §3.1.4).

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use serde_json::{json, Value};

use super::shapes::{self, View};
use super::Version;
use crate::model::error::GatewayError;
use crate::model::task::{Task, TaskState};

/// Tasks per page when the client does not say.
pub(crate) const DEFAULT_PAGE_SIZE: usize = 50;
/// The most tasks a page holds.
pub(crate) const MAX_PAGE_SIZE: usize = 100;

/// `ListTasks` params as sent.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListRequest {
    #[serde(default)]
    context_id: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    page_size: Option<i64>,
    #[serde(default)]
    page_token: Option<String>,
    #[serde(default)]
    history_length: Option<i64>,
    #[serde(default)]
    status_timestamp_after: Option<String>,
    #[serde(default)]
    include_artifacts: Option<bool>,
}

/// A checked `ListTasks` request.
#[derive(Debug, PartialEq)]
pub(crate) struct Query {
    context_id: Option<String>,
    status: Option<TaskState>,
    page_size: usize,
    after: Option<Cursor>,
    since: Option<SystemTime>,
    view: View,
}

/// Where a page starts: after this task.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Cursor {
    nanos: u128,
    id: String,
}

impl Cursor {
    fn of(t: &Task) -> Self {
        Cursor {
            nanos: nanos(t.updated),
            id: t.id.clone(),
        }
    }

    fn token(&self) -> String {
        crate::util::hex::encode(format!("1:{}:{}", self.nanos, self.id).as_bytes())
    }

    fn parse(token: &str) -> Option<Self> {
        if token.len() > 1024 {
            return None;
        }
        let mut bytes = vec![0; token.len() / 2];
        crate::util::hex::decode_into(token.as_bytes(), &mut bytes, true)?;
        let plain = String::from_utf8(bytes).ok()?;
        let mut it = plain.splitn(3, ':');
        (it.next()? == "1").then_some(())?;
        let nanos = it.next()?.parse().ok()?;
        let id = it.next()?.to_owned();
        Some(Cursor { nanos, id })
    }
}

fn nanos(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos()
}

/// A 1.0 state name (`TASK_STATE_WORKING`) or a 0.3 one (`working`).
fn parse_state(s: &str) -> Option<TaskState> {
    TaskState::parse(s).or_else(|| {
        let rest = s.strip_prefix("TASK_STATE_")?;
        TaskState::parse(&rest.to_ascii_lowercase().replace('_', "-"))
    })
}

impl ListRequest {
    /// Checks the params; every bad one is -32602 with what was wrong.
    pub(crate) fn into_query(self) -> Result<Query, GatewayError> {
        let bad = |m: String| GatewayError::InvalidParams(m);
        let status = match self.status.as_deref() {
            None | Some("") | Some("TASK_STATE_UNSPECIFIED") => None,
            Some(s) => Some(parse_state(s).ok_or_else(|| {
                bad(format!(
                    "status {s:?} is not a task state (TASK_STATE_WORKING, TASK_STATE_COMPLETED, …)"
                ))
            })?),
        };
        let page_size = match self.page_size {
            None => DEFAULT_PAGE_SIZE,
            Some(n) if (1..=MAX_PAGE_SIZE as i64).contains(&n) => n as usize,
            Some(n) => {
                return Err(bad(format!(
                    "pageSize {n} is out of range: 1 to {MAX_PAGE_SIZE}"
                )))
            }
        };
        let after = match self.page_token.as_deref() {
            None | Some("") => None,
            Some(t) => Some(Cursor::parse(t).ok_or_else(|| {
                bad("pageToken is not one this gateway gave; start again without it".into())
            })?),
        };
        let since = match self.status_timestamp_after.as_deref() {
            None | Some("") => None,
            Some(s) => Some(crate::util::time::parse_rfc3339(s).ok_or_else(|| {
                bad(format!(
                    "statusTimestampAfter {s:?} is not an RFC 3339 timestamp"
                ))
            })?),
        };
        Ok(Query {
            context_id: self.context_id.filter(|c| !c.is_empty()),
            status,
            page_size,
            after,
            since,
            view: View {
                history_length: shapes::history_length(self.history_length)?,
                artifacts: self.include_artifacts.unwrap_or(false),
            },
        })
    }
}

/// One page of `tasks` (each with its context) as the `ListTasks` result.
pub(crate) fn page(version: Version, q: &Query, mut tasks: Vec<(Task, String)>) -> Value {
    tasks.retain(|(t, ctx)| {
        q.context_id.as_ref().is_none_or(|c| c == ctx)
            && q.status.is_none_or(|s| s == t.state)
            && q.since.is_none_or(|s| t.updated >= s)
    });
    tasks.sort_by(|(a, _), (b, _)| {
        nanos(b.updated)
            .cmp(&nanos(a.updated))
            .then_with(|| a.id.cmp(&b.id))
    });
    let total = tasks.len();
    let start = match &q.after {
        None => 0,
        Some(c) => tasks
            .iter()
            .position(|(t, _)| {
                let n = nanos(t.updated);
                n < c.nanos || (n == c.nanos && t.id > c.id)
            })
            .unwrap_or(total),
    };
    let end = (start + q.page_size).min(total);
    let page = &tasks[start..end];
    let next = match (end < total, page.last()) {
        (true, Some((t, _))) => Cursor::of(t).token(),
        _ => String::new(),
    };
    let out: Vec<Value> = page
        .iter()
        .map(|(t, ctx)| shapes::task_view(version, t, ctx, q.view))
        .collect();
    json!({
        "tasks": out,
        "nextPageToken": next,
        "pageSize": out.len(),
        "totalSize": total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::task::Tracker;

    fn query(v: Value) -> Result<Query, GatewayError> {
        serde_json::from_value::<ListRequest>(v)
            .unwrap()
            .into_query()
    }

    fn tasks(n: usize) -> Vec<(Task, String)> {
        let mut tr = Tracker::default();
        (0..n)
            .map(|i| {
                let id = format!("t{i:02}");
                let at = UNIX_EPOCH + std::time::Duration::from_secs(1_000 + i as u64);
                tr.begin_turn(&id, Some(("hi", None)), at);
                let ctx = if i % 2 == 0 { "even" } else { "odd" };
                (tr.task(&id).unwrap().clone(), ctx.to_owned())
            })
            .collect()
    }

    #[test]
    fn pages_follow_each_other_newest_first_without_repeats() {
        let all = tasks(7);
        let q = query(json!({"pageSize": 3})).unwrap();
        let mut seen = Vec::new();
        let mut q = q;
        loop {
            let p = page(Version::V1_0, &q, all.clone());
            assert_eq!(p["totalSize"], 7);
            let ids: Vec<String> = p["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(p["pageSize"], ids.len());
            seen.extend(ids);
            let next = p["nextPageToken"].as_str().unwrap().to_owned();
            if next.is_empty() {
                break;
            }
            q = query(json!({"pageSize": 3, "pageToken": next})).unwrap();
        }
        assert_eq!(seen, ["t06", "t05", "t04", "t03", "t02", "t01", "t00"]);
    }

    #[test]
    fn filters_apply_together_and_artifacts_are_left_out_unless_asked() {
        let all = tasks(6);
        let q = query(json!({"contextId": "odd", "status": "TASK_STATE_SUBMITTED",
                             "statusTimestampAfter": "1970-01-01T00:16:43Z"}))
        .unwrap();
        let p = page(Version::V1_0, &q, all.clone());
        let ids: Vec<_> = p["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| &t["id"])
            .collect();
        assert_eq!(ids, [&json!("t05"), &json!("t03")]);
        assert!(p["tasks"][0].get("artifacts").is_none());
        assert_eq!(p["nextPageToken"], "");
        let q = query(json!({"includeArtifacts": true, "historyLength": 0})).unwrap();
        let p = page(Version::V1_0, &q, all);
        assert_eq!(p["tasks"][0]["artifacts"], json!([]));
        assert_eq!(p["tasks"][0]["history"], json!([]));
    }

    #[test]
    fn bad_params_are_invalid_params() {
        for bad in [
            json!({"pageSize": 0}),
            json!({"pageSize": 101}),
            json!({"pageSize": -1}),
            json!({"status": "INVALID_STATUS"}),
            json!({"pageToken": "zz"}),
            json!({"pageToken": "abc"}),
            json!({"historyLength": -1}),
            json!({"statusTimestampAfter": "-1"}),
        ] {
            assert!(
                matches!(query(bad.clone()), Err(GatewayError::InvalidParams(_))),
                "{bad}"
            );
        }
    }
}
