//! The migration state without sockets: picks, rollback through `finished`, reloads.

use super::*;
use crate::config::{Dialect, Upstream};
use crate::wire::jsonrpc::{to_raw, ErrorObject};
use crate::wire::legacy::Auth;

fn config(weights: (u32, u32), rollback: Option<Rollback>) -> Config {
    let mut c = Config::default();
    for (name, dialect) in [("old", Dialect::Legacy), ("new", Dialect::Jsonrpc)] {
        c.upstreams
            .push(Upstream::new(name, "http://127.0.0.1:1/rpc", dialect, 1000));
    }
    c.routes.push(Route {
        methods: vec!["plan.*".into()],
        name: "plans".into(),
        split: vec![
            SplitSide {
                upstream: "old".into(),
                weight: weights.0,
            },
            SplitSide {
                upstream: "new".into(),
                weight: weights.1,
            },
        ],
        rollback,
        ..Route::default()
    });
    c.routes.push(Route::to(&["*"], "old"));
    c.validate().expect("valid");
    c
}

fn build(c: &Config, previous: Option<&Migration>) -> Migration {
    let ups: Vec<UpstreamClient> = c
        .upstreams
        .iter()
        .map(|u| UpstreamClient::new(u.clone(), 1 << 20))
        .collect();
    Migration::new(c, &ups, &ErrorTable::default(), previous)
}

fn who(auth: &Auth) -> Who<'_> {
    Who {
        auth: Some(auth),
        ..Who::default()
    }
}

fn failed() -> Result<Done, GatewayError> {
    Ok(Done {
        outcome: Outcome::Error(ErrorObject::new(code::INTERNAL_ERROR, "boom")),
        timing_ms: None,
    })
}

fn ok() -> Result<Done, GatewayError> {
    Ok(Done {
        outcome: Outcome::Result(to_raw(&serde_json::json!({"ok": true}))),
        timing_ms: None,
    })
}

/// Calls by distinct callers until one lands on the canary; returns its pick.
fn canary_pick(m: &Migration) -> (Auth, Pick) {
    (0..10_000)
        .map(|i| Auth::bearer(&format!("caller-{i}")))
        .find_map(|a| {
            let p = m.pick(0, &who(&a)).unwrap();
            (p.side == 1).then_some((a, p))
        })
        .expect("some caller is on the canary")
}

#[test]
fn callers_keep_their_side_and_plain_routes_have_one() {
    let m = build(&config((50, 50), None), None);
    for i in 0..200 {
        let a = Auth::bearer(&format!("c{i}"));
        let first = m.pick(0, &who(&a)).unwrap();
        for _ in 0..3 {
            assert_eq!(m.pick(0, &who(&a)).unwrap(), first);
        }
    }
    assert_eq!(
        m.pick(1, &Who::default()),
        Some(Pick {
            upstream: 0,
            side: 0
        })
    );
    assert_eq!(m.pick(7, &Who::default()), None, "no such route");
}

#[test]
fn an_erroring_canary_is_rolled_back_and_stays_out_until_its_route_changes() {
    let rule = Rollback {
        max_error_rate: 0.05,
        min_calls: 5,
        window_ms: 60_000,
        max_p99_ms: None,
    };
    let c = config((50, 50), Some(rule.clone()));
    let m = build(&c, None);
    let (auth, pick) = canary_pick(&m);
    for _ in 0..4 {
        m.finished(0, pick, &failed(), Duration::from_millis(1), None, None);
    }
    assert_eq!(
        m.pick(0, &who(&auth)).unwrap().side,
        1,
        "4 calls are not judged"
    );
    // Healthy primary calls do not count for the canary.
    m.finished(
        0,
        Pick {
            upstream: 0,
            side: 0,
        },
        &failed(),
        Duration::ZERO,
        None,
        None,
    );
    m.finished(0, pick, &failed(), Duration::from_millis(1), None, None);
    assert_eq!(
        m.pick(0, &who(&auth)).unwrap().side,
        0,
        "rolled back: everyone on the primary"
    );
    let report = m.report();
    let route = &report["routes"][0];
    assert_eq!(route["rollback"]["state"], "rolled_back");
    assert!(
        route["rollback"]["reason"]
            .as_str()
            .unwrap()
            .contains("5 of 5 calls"),
        "{route}"
    );
    assert_eq!(route["sides"][1]["effective_weight"], 0);

    // A reload that leaves the route as it was keeps the rollback (and the counts)...
    let kept = build(&c, Some(&m));
    assert_eq!(kept.pick(0, &who(&auth)).unwrap().side, 0);
    assert_eq!(
        kept.report()["routes"][0]["rollback"]["state"],
        "rolled_back"
    );
    let calls = |m: &Migration, side: usize| {
        m.report()["routes"][0]["sides"][side]["calls"]
            .as_u64()
            .unwrap()
    };
    assert!(calls(&kept, 0) >= 2);
    // ...one that changes its split brings the side back, with an empty window.
    let canary_calls = calls(&kept, 1);
    assert!(canary_calls >= 2);
    let changed = build(&config((40, 60), Some(rule)), Some(&kept));
    assert_eq!(changed.report()["routes"][0]["rollback"]["state"], "armed");
    assert_eq!(changed.pick(0, &who(&auth)).unwrap().side, 1);
    assert_eq!(
        calls(&changed, 1),
        canary_calls + 1,
        "its calls are kept across reloads"
    );
}

#[test]
fn a_healthy_canary_stays() {
    let rule = Rollback {
        min_calls: 5,
        ..Rollback::default()
    };
    let m = build(&config((50, 50), Some(rule)), None);
    let (auth, pick) = canary_pick(&m);
    for _ in 0..50 {
        m.finished(0, pick, &ok(), Duration::from_millis(1), None, None);
    }
    assert_eq!(m.pick(0, &who(&auth)).unwrap().side, 1);
    assert_eq!(m.report()["routes"][0]["rollback"]["state"], "armed");
}

#[test]
fn the_caller_report_survives_a_reload_and_hides_tokens() {
    let c = config((90, 10), None);
    let m = build(&c, None);
    let a = Auth::bearer("very-secret-token");
    m.saw(&who(&a), "legacy", "plan.get");
    let m2 = build(&c, Some(&m));
    m2.saw(&who(&a), "jsonrpc", "plan.get");
    let r = m2.report();
    let row = &r["callers"]["tracked"][0];
    assert_eq!(row["calls"], 2);
    assert_eq!(row["dialects"]["legacy"], 1);
    assert!(!r.to_string().contains("very-secret-token"));
}
