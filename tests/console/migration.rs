//! The Migration view in Chromium, against a gateway with a split route, a shadowed route and a
//! split that rolls back, over a legacy and a JSON-RPC upstream (as `tests/migration.rs` sets
//! them up), after calls this test makes.

use axum::http::StatusCode;
use serde_json::{json, Value};
use wiregate::config::{Rollback, Route};

use super::page::{assert_no_console_errors, shots};
use super::support::migration::{jsonrpc, old_and_new, route, shadows_done, split};
use super::support::upstream;
use super::webdriver::{wait_for, Browser};
use super::{ONE_BROWSER, WAIT};

/// The legacy server: an order `open` (with its own `updated_at`), anything else echoed.
fn legacy_server() -> super::support::UpstreamBuilder {
    upstream(|req| {
        let rid = req["request_id"].clone();
        let op = req["operation"].as_str().unwrap_or_default();
        let data = match op.starts_with("order.") {
            true => json!({"order": "O-1", "state": "open", "total": 1250,
                           "updated_at": "2026-01-01T00:00:00Z"}),
            false => json!({"op": op, "via": "legacy"}),
        };
        let body = json!({"a2a_version": "1.0", "request_id": rid, "status": "success",
                          "data": data});
        (StatusCode::OK, body.to_string())
    })
}

/// Its JSON-RPC rewrite: `order.get` says `closed` (a real difference), other `order.*` agree;
/// both with another `updated_at` (ignored); `risky.*` fails with an internal error (to be rolled back); anything else echoed.
fn jsonrpc_server() -> super::support::UpstreamBuilder {
    upstream(|req| {
        let id = req["id"].clone();
        let method = req["method"].as_str().unwrap_or_default();
        let body = if method.starts_with("risky.") {
            json!({"jsonrpc": "2.0", "id": id,
                   "error": {"code": -32603, "message": "the new build is broken"}})
        } else if method.starts_with("order.") {
            let state = if method == "order.get" {
                "closed"
            } else {
                "open"
            };
            json!({"jsonrpc": "2.0", "id": id,
                   "result": {"order": "O-1", "state": state, "total": 1250,
                              "updated_at": "2026-06-30T12:00:00Z"}})
        } else {
            json!({"jsonrpc": "2.0", "id": id, "result": {"method": method, "via": "jsonrpc"}})
        };
        (StatusCode::OK, body.to_string())
    })
}

/// A 50/50 split of `methods` over `old` and `new`, rolled back by `rollback`.
fn split_50_50(name: &str, methods: &[&str], rollback: Rollback) -> Route {
    Route {
        rollback: Some(rollback),
        ..split(name, methods, &[("old", 50), ("new", 50)])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_migration_view_shows_splits_shadow_differences_rollbacks_and_legacy_callers() {
    let _one = ONE_BROWSER.lock().await;
    let old = legacy_server().run().await;
    let new = jsonrpc_server().run().await;
    let gw = old_and_new(&old, &new)
        .with(|c| {
            c.routes.push(split_50_50(
                "plans",
                &["plan.*"],
                Rollback {
                    min_calls: 1000,
                    ..Rollback::default()
                },
            ));
            c.routes.push(split_50_50(
                "risky",
                &["risky.*"],
                Rollback {
                    min_calls: 3,
                    ..Rollback::default()
                },
            ));
            c.routes.push(Route {
                name: "orders".into(),
                shadow: "new".into(),
                shadow_ignore: vec!["/result/updated_at".into()],
                ..Route::to(&["order.*"], "old")
            });
        })
        .start()
        .await;

    // Twenty JSON-RPC callers on the split, each with its token; one legacy caller.
    for i in 0..20 {
        let a = gw
            .rpc_with(
                &jsonrpc("plan.get", json!({})),
                &[("authorization", &format!("Bearer modern-caller-{i}"))],
            )
            .await;
        assert_eq!(a.status, 200, "{}", a.text);
    }
    for op in ["plan.get", "plan.get", "order.list"] {
        let a = gw
            .rpc(
                &json!({"a2a_version": "1.0", "request_id": "r", "operation": op,
                         "params": {}, "auth": {"scheme": "bearer", "token": "legacy-team-token"}}),
            )
            .await;
        assert_eq!(a.json()["status"], "success", "{}", a.text);
    }
    // A shadowed call whose answers differ at /result/state (and at the ignored updated_at).
    let a = gw
        .rpc_with(
            &jsonrpc("order.get", json!({})),
            &[
                ("x-request-id", "order-diff-1"),
                ("authorization", "Bearer modern-caller-0"),
            ],
        )
        .await;
    assert_eq!(
        a.json()["result"]["state"],
        "open",
        "the caller gets the primary's"
    );
    // Thirty callers on the risky split: its new side fails and is rolled back.
    for i in 0..30 {
        gw.rpc_with(
            &jsonrpc("risky.get", json!({})),
            &[("authorization", &format!("Bearer risky-caller-{i}"))],
        )
        .await;
    }
    // The shadows run after the callers' answers: wait for both comparisons.
    let r = shadows_done(&gw, "orders", 2).await;
    let plans = route(&r, "plans");
    let calls: Vec<u64> = (0..2)
        .map(|i| plans["sides"][i]["calls"].as_u64().unwrap())
        .collect();
    assert_eq!(calls.iter().sum::<u64>(), 22, "{plans}");
    assert!(
        calls.iter().all(|&n| n > 0),
        "both sides served callers: {calls:?}"
    );
    assert_eq!(route(&r, "risky")["rollback"]["state"], "rolled_back");
    let legacy_callers: Vec<&Value> = r["callers"]["tracked"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["dialects"]["legacy"].as_u64().is_some())
        .collect();
    assert_eq!(legacy_callers.len(), 1, "{}", r["callers"]);
    let legacy_id = legacy_callers[0]["caller"].as_str().unwrap().to_owned();

    let b = Browser::start(1280, 900).await;
    b.goto(&format!("{}/console#migration", gw.base())).await;
    wait_for("the Migration view's routes", WAIT, || async {
        b.find("#migration-body[data-state=\"shown\"] [data-route=\"plans\"]")
            .await
    })
    .await;

    // The split: weights, sticky rule, and the calls per side the gateway counted.
    for (i, side) in ["old", "new"].into_iter().enumerate() {
        let cell = format!("[data-route=\"plans\"] tr[data-upstream=\"{side}\"] td.calls");
        assert_eq!(
            b.attr(&cell, "data-calls").await,
            Some(calls[i].to_string()),
            "{side}'s calls"
        );
    }
    let plans_card = b.text("[data-route=\"plans\"]").await.unwrap();
    assert!(plans_card.contains("50 (50 %)"), "{plans_card}");
    assert_eq!(
        b.text("[data-route=\"plans\"] .sticky").await.as_deref(),
        Some("auth")
    );
    assert_eq!(
        b.attr("[data-route=\"plans\"] p.rollback", "data-state")
            .await
            .as_deref(),
        Some("armed")
    );

    // The rollback: the side, its state and the reason.
    assert_eq!(
        b.attr(
            "[data-route=\"risky\"] tr[data-upstream=\"new\"]",
            "data-rolled-back"
        )
        .await
        .as_deref(),
        Some("true")
    );
    let reason = b
        .text("[data-route=\"risky\"] p.rollback[data-state=\"rolled_back\"] .reason")
        .await
        .unwrap();
    assert!(
        reason.starts_with("new: error rate 1.000") && reason.contains("max_error_rate 0.05"),
        "{reason}"
    );

    // The shadow: its counts, and the difference with its pointer and both values marked.
    assert_eq!(
        b.text("[data-route=\"orders\"] .counts li[data-outcome=\"diff\"] strong")
            .await
            .as_deref(),
        Some("1")
    );
    assert_eq!(
        b.text("[data-route=\"orders\"] .counts li[data-outcome=\"match\"] strong")
            .await
            .as_deref(),
        Some("1")
    );
    let diff = "[data-route=\"orders\"] table.diff[data-request-id=\"order-diff-1\"]";
    let rows = b
        .eval(
            "return [...document.querySelectorAll(arguments[0] + ' tbody tr')].map(r => r.dataset.pointer)",
            json!([diff]),
        )
        .await;
    assert_eq!(
        rows,
        json!(["/result/state"]),
        "only the real difference: updated_at is ignored"
    );
    let row = format!("{diff} tr[data-pointer=\"/result/state\"]");
    assert_eq!(
        b.text(&format!("{row} mark.ptr")).await.as_deref(),
        Some("state")
    );
    assert_eq!(
        b.text(&format!("{row} td.primary")).await.as_deref(),
        Some("\"open\"")
    );
    assert_eq!(
        b.text(&format!("{row} td.shadow")).await.as_deref(),
        Some("\"closed\"")
    );
    assert_eq!(
        b.text(&format!("{row} td.primary mark.was"))
            .await
            .as_deref(),
        Some("open")
    );
    assert_eq!(
        b.text(&format!("{row} td.shadow mark.now"))
            .await
            .as_deref(),
        Some("closed")
    );
    let marked = b
        .eval(
            "const m = document.querySelector(arguments[0]); return getComputedStyle(m).backgroundColor",
            json!([format!("{row} mark.ptr")]),
        )
        .await;
    assert_ne!(
        marked,
        json!("rgba(0, 0, 0, 0)"),
        "the pointer is highlighted"
    );

    // Who still speaks legacy: the one legacy caller, none of the JSON-RPC ones.
    let callers = b
        .eval(
            "return [...document.querySelectorAll('#legacy-callers tbody tr')].map(r => r.dataset.caller)",
            json!([]),
        )
        .await;
    assert_eq!(callers, json!([legacy_id]));
    assert_eq!(
        b.text(&format!(
            "#legacy-callers tr[data-caller=\"{legacy_id}\"] .legacy-calls"
        ))
        .await
        .as_deref(),
        Some("3")
    );

    // The legacy share over time: both lines rise for this test's calls (legacy calls were
    // made and a legacy upstream served routed calls in the last seconds).
    for series in ["legacy callers", "served by legacy upstreams"] {
        let path = format!("#legacy-chart path[data-series=\"{series}\"]");
        let max = wait_for(&format!("the {series} line"), WAIT, || async {
            let m: f64 = b.attr(&path, "data-max").await?.parse().ok()?;
            (m > 0.0).then_some(m)
        })
        .await;
        assert!(max <= 100.0, "{series}: a share, {max}");
    }
    let served = b.text("#share-served").await.unwrap();
    assert!(served.ends_with('%'), "{served}");

    // Nothing secret on the page: no token of any caller.
    let html = b
        .eval("return document.documentElement.outerHTML", json!([]))
        .await;
    let html = html.as_str().unwrap();
    for secret in ["legacy-team-token", "modern-caller-", "risky-caller-"] {
        assert!(!html.contains(secret), "{secret} written to the page");
    }
    b.screenshot(&shots().join("migration.png")).await;
    b.eval(
        "document.querySelector('[data-route=\"orders\"]').scrollIntoView()",
        json!([]),
    )
    .await;
    b.screenshot(&shots().join("migration-shadow.png")).await;
    assert_no_console_errors(&b, "the Migration view").await;

    // Keyboard: the view is reached with Enter on its tab, the focus on its heading; every
    // field labelled.
    b.click("#tab-overview").await;
    b.type_into("#tab-migration", "\u{E007}").await;
    wait_for("the Migration view from the keyboard", WAIT, || async {
        b.find("#view-migration:not([hidden]) [data-route=\"orders\"]")
            .await
    })
    .await;
    assert_eq!(
        b.eval("return document.activeElement.id", json!([])).await,
        "h-migration"
    );

    // A phone's width: nothing wider than the screen.
    b.resize(390, 844).await;
    let fits = wait_for("the Migration view at 390 px", WAIT, || async {
        let v: Value = b
            .eval(
                "return [document.documentElement.scrollWidth, window.innerWidth]",
                json!([]),
            )
            .await;
        let (scroll, width) = (v[0].as_u64()?, v[1].as_u64()?);
        (width <= 420).then_some(scroll <= width)
    })
    .await;
    assert!(fits, "the Migration view is wider than a 390 px screen");
    b.screenshot(&shots().join("migration-390.png")).await;

    // Dark, by the system setting; the marks stay visible.
    b.resize(1280, 900).await;
    b.cdp(
        "Emulation.setEmulatedMedia",
        json!({"features": [{"name": "prefers-color-scheme", "value": "dark"}]}),
    )
    .await;
    wait_for("the dark colours", WAIT, || async {
        let bg = b
            .eval(
                "return getComputedStyle(document.body).backgroundColor",
                json!([]),
            )
            .await;
        (bg == "rgb(18, 18, 21)").then_some(())
    })
    .await;
    let dark_mark = b
        .eval(
            "return getComputedStyle(document.querySelector(arguments[0])).backgroundColor",
            json!([format!("{row} mark.ptr")]),
        )
        .await;
    assert_ne!(dark_mark, marked, "the highlight follows the scheme");
    b.screenshot(&shots().join("migration-dark.png")).await;
    assert_no_console_errors(&b, "the Migration view, narrow and dark").await;
}
