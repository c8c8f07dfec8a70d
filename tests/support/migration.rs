//! What the migration tests share (`tests/migration.rs`, `tests/console/migration.rs`): routes
//! with a split or a shadow, JSON-RPC calls, and reading `GET /migration`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use wiregate::config::{Dialect, Route, SplitSide};

use super::{gateway, GatewayBuilder, Listening, TestGateway};

/// A gateway in front of the legacy upstream `old` and its JSON-RPC rewrite `new` (5 s
/// timeouts), the two sides of a migration.
pub fn old_and_new(old: &Listening, new: &Listening) -> GatewayBuilder {
    gateway()
        .upstream("old", &old.url(), Dialect::Legacy, 5000)
        .upstream("new", &new.url(), Dialect::Jsonrpc, 5000)
}

/// A route `name` for `methods` split over `sides` (upstream, weight), the first the primary.
pub fn split(name: &str, methods: &[&str], sides: &[(&str, u32)]) -> Route {
    Route {
        name: name.into(),
        methods: methods.iter().map(|m| (*m).to_owned()).collect(),
        split: sides
            .iter()
            .map(|(u, w)| SplitSide {
                upstream: (*u).into(),
                weight: *w,
            })
            .collect(),
        ..Route::default()
    }
}

/// A route `name` for `methods` to `primary`, shadowed to `shadow`.
pub fn shadowed(name: &str, methods: &[&str], primary: &str, shadow: &str) -> Route {
    Route {
        name: name.into(),
        shadow: shadow.into(),
        ..Route::to(methods, primary)
    }
}

/// A JSON-RPC call with id 1.
pub fn jsonrpc(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

/// `GET /migration`, answered 200.
pub async fn report(gw: &TestGateway) -> Value {
    let a = gw.get("/migration").await;
    assert_eq!(a.status, 200, "{}", a.text);
    a.json()
}

/// Route `name` in a `/migration` report.
pub fn route<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no route {name} in {report}"))
}

/// Waits (up to 30 s: the shadows run after the callers' answers, on their own thread) until
/// `name`'s shadow figures add up to `n` shadows settled, and returns the whole report.
pub async fn shadows_done(gw: &TestGateway, name: &str, n: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = report(gw).await;
        let s = &route(&r, name)["shadow"];
        let done: u64 = ["match", "diff", "noise", "shadow_error", "dropped"]
            .iter()
            .map(|k| s[k].as_u64().unwrap())
            .sum();
        if done >= n {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: the shadows did not finish: {r}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
