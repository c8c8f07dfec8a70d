//! `wiregate migration`: the `/migration` JSON as plain-text tables. Pure: JSON in, text out.

use serde_json::Value;

/// Differences printed per route (the newest).
const RECENT_DIFFS: usize = 5;

/// Renders the report as tables: routes and their sides, shadows, recent differences, callers.
pub fn tables(report: &Value) -> String {
    let mut out = String::new();
    let routes = report["routes"].as_array().cloned().unwrap_or_default();
    out.push_str(&routes_table(&routes));
    out.push_str(&rollbacks(&routes));
    let shadowed: Vec<&Value> = routes.iter().filter(|r| r["shadow"].is_object()).collect();
    if !shadowed.is_empty() {
        out.push_str(&shadows_table(&shadowed));
        out.push_str(&recent_differences(&shadowed));
    }
    out.push_str(&callers_table(&report["callers"]));
    out
}

/// The `Routes` table: one row per side of each route, with its weight, calls and state.
fn routes_table(routes: &[Value]) -> String {
    let mut out = String::new();
    let mut rows = vec![row(&[
        "ROUTE", "METHODS", "STICKY", "UPSTREAM", "WEIGHT", "CALLS", "STATE",
    ])];
    for r in routes {
        for s in r["sides"].as_array().into_iter().flatten() {
            let state = match (s["rolled_back"].as_bool(), s["primary"].as_bool()) {
                (Some(true), _) => "rolled back".to_owned(),
                (_, Some(true)) => "primary".to_owned(),
                _ => String::new(),
            };
            let weight = match s["weight"] == s["effective_weight"] {
                true => text(&s["weight"]),
                false => format!(
                    "{} (was {})",
                    text(&s["effective_weight"]),
                    text(&s["weight"])
                ),
            };
            rows.push(vec![
                text(&r["name"]),
                list(&r["methods"]),
                text(&r["sticky"]),
                text(&s["upstream"]),
                weight,
                text(&s["calls"]),
                state,
            ]);
        }
    }
    out.push_str("Routes\n");
    out.push_str(&grid(&rows));
    out
}

/// The `Rollbacks` list: each rolled-back route with its reason; empty when there are none.
fn rollbacks(routes: &[Value]) -> String {
    let mut out = String::new();
    let rolled: Vec<&Value> = routes
        .iter()
        .filter(|r| r["rollback"]["state"] == "rolled_back")
        .collect();
    if !rolled.is_empty() {
        out.push_str("\nRollbacks\n");
        for r in rolled {
            out.push_str(&format!(
                "  {}: {}\n",
                text(&r["name"]),
                text(&r["rollback"]["reason"])
            ));
        }
    }
    out
}

/// The `Shadows` table: one row of comparison counters per shadowed route.
fn shadows_table(shadowed: &[&Value]) -> String {
    let mut out = String::new();
    let mut rows = vec![row(&[
        "ROUTE",
        "SHADOW",
        "SAMPLE",
        "MATCH",
        "DIFF",
        "NOISE",
        "SHADOW_ERROR",
        "DROPPED",
    ])];
    for r in shadowed {
        let s = &r["shadow"];
        rows.push(vec![
            text(&r["name"]),
            text(&s["upstream"]),
            text(&s["sample"]),
            text(&s["match"]),
            text(&s["diff"]),
            text(&s["noise"]),
            text(&s["shadow_error"]),
            text(&s["dropped"]),
        ]);
    }
    out.push_str("\nShadows\n");
    out.push_str(&grid(&rows));
    out
}

/// The `Recent differences` table: the newest differing pointers per shadowed route;
/// empty when there are none.
fn recent_differences(shadowed: &[&Value]) -> String {
    let mut out = String::new();
    let mut rows = vec![row(&[
        "ROUTE",
        "METHOD",
        "REQUEST ID",
        "POINTER",
        "PRIMARY",
        "SHADOW",
    ])];
    for r in shadowed {
        let diffs = r["shadow"]["last_diffs"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        // The newest few per route; `--json` (or `/migration`) has all 50.
        for d in diffs.iter().skip(diffs.len().saturating_sub(RECENT_DIFFS)) {
            for p in d["pointers"].as_array().into_iter().flatten() {
                rows.push(vec![
                    text(&r["name"]),
                    text(&d["method"]),
                    text(&d["request_id"]),
                    text(&p["pointer"]),
                    short(&text(&p["primary"])),
                    short(&text(&p["shadow"])),
                ]);
            }
        }
    }
    if rows.len() > 1 {
        out.push_str("\nRecent differences\n");
        out.push_str(&grid(&rows));
    }
    out
}

/// The `Callers` table: each tracked caller, then a line for the untracked others if any.
fn callers_table(c: &Value) -> String {
    let mut out = String::new();
    let mut rows = vec![row(&[
        "CALLER",
        "DIALECTS",
        "CALLS",
        "LAST SEEN",
        "METHODS",
    ])];
    for t in c["tracked"].as_array().into_iter().flatten() {
        rows.push(caller_row(t));
    }
    out.push_str(&format!("\nCallers (by {})\n", text(&c["rule"])));
    out.push_str(&grid(&rows));
    let others = &c["others"];
    if others["callers"].as_u64().unwrap_or(0) > 0 {
        out.push_str(&format!(
            "  and {} other callers ({} calls) beyond migration.max_callers\n",
            text(&others["callers"]),
            text(&others["calls"])
        ));
    }
    out
}

/// One row of the `Callers` table: dialect counts, calls, last seen (RFC 3339) and methods.
fn caller_row(t: &Value) -> Vec<String> {
    let dialects = t["dialects"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let methods = t["methods"]
        .as_object()
        .map(|m| m.keys().cloned().collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    let last = t["last_seen_ms"]
        .as_u64()
        .map(|ms| {
            humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms),
            )
            .to_string()
        })
        .unwrap_or_default();
    vec![
        text(&t["caller"]),
        dialects,
        text(&t["calls"]),
        last,
        methods,
    ]
}

fn row(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|c| (*c).to_owned()).collect()
}

/// A value as table text: strings without quotes, null as `-`.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

fn list(v: &Value) -> String {
    v.as_array()
        .map(|a| a.iter().map(text).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn short(s: &str) -> String {
    match s.chars().count() > 40 {
        true => format!("{}…", super::compare::cut(s, 39)),
        false => s.to_owned(),
    }
}

/// Left-aligned columns, two spaces apart.
fn grid(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::from("  ");
        for (c, cell) in r.iter().enumerate() {
            line.push_str(cell);
            if c + 1 < r.len() {
                line.push_str(&" ".repeat(widths[c] - cell.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_every_table() {
        let report = json!({
            "routes": [{
                "name": "plans", "methods": ["plan.*"], "sticky": "auth",
                "sides": [
                    {"upstream": "legacy", "primary": true, "weight": 90, "effective_weight": 90, "calls": 12, "rolled_back": false},
                    {"upstream": "modern", "primary": false, "weight": 10, "effective_weight": 0, "calls": 3, "rolled_back": true}
                ],
                "rollback": {"state": "rolled_back", "reason": "modern: error rate 1.000 (3 of 3 calls in 60000 ms) exceeds max_error_rate 0.05"},
                "shadow": {"upstream": "modern", "sample": 1.0, "match": 4, "diff": 1, "noise": 0, "shadow_error": 2, "dropped": 0,
                    "last_diffs": [{"method": "plan.get", "request_id": "r-1", "at": "2026-11-30T12:00:00Z",
                        "pointers": [{"pointer": "/result/state", "primary": "\"running\"", "shadow": "\"done\""}]}]}
            }],
            "callers": {"rule": "auth", "tracked": [
                {"caller": "auth:0123456789ab", "dialects": {"legacy": 5}, "methods": {"plan.get": 5}, "more_methods": 0,
                 "calls": 5, "first_seen_ms": 0, "last_seen_ms": 1_700_000_000_000u64}
            ], "others": {"callers": 2, "calls": 7}}
        });
        let t = tables(&report);
        for needle in [
            "ROUTE",
            "plans",
            "0 (was 10)",
            "rolled back",
            "error rate 1.000",
            "SHADOW_ERROR",
            "/result/state",
            "\"done\"",
            "auth:0123456789ab",
            "legacy 5",
            "2023-11-14T22:13:20Z",
            "and 2 other callers (7 calls)",
        ] {
            assert!(t.contains(needle), "{needle:?} missing from:\n{t}");
        }
        // Columns line up: every row of the routes table starts its UPSTREAM cell at one offset.
        let lines: Vec<&str> = t.lines().skip(1).take(3).collect();
        let at: Vec<usize> = lines
            .iter()
            .map(|l| {
                l.find("legacy")
                    .or(l.find("modern"))
                    .or(l.find("UPSTREAM"))
                    .unwrap()
            })
            .collect();
        assert!(at.windows(2).all(|w| w[0] == w[1]), "{lines:#?}");
    }
}
