//! The spans of a split (which side served: `wiregate.split_side`, `wiregate.route`) and of a
//! shadowed call (the shadow's exchange an INTERNAL span of the call's trace, with the shadow's
//! own CLIENT span, whose id the shadow upstream sees).

use serde_json::json;

use crate::support::migration::{jsonrpc, old_and_new, shadowed, split};
use crate::support::otlp::{hex, Collector, Mode};
use crate::support::{jsonrpc_echo, legacy_echo};
use crate::{of_kind, one, traced, CLIENT, INTERNAL, SERVER};

#[tokio::test]
async fn a_split_names_the_side_that_served_each_call() {
    let collector = Collector::start(Mode::Accept).await;
    let (old, new) = (legacy_echo().run().await, jsonrpc_echo().run().await);
    let gw = traced(old_and_new(&old, &new), &collector)
        .with(|c| {
            let mut r = split("plans-split", &["plan.*"], &[("old", 50), ("new", 50)]);
            r.sticky = "header:x-user".into();
            c.routes.push(r);
        })
        .start()
        .await;
    let mut traces = Vec::new();
    for user in 0..40u8 {
        let trace = hex(&[user + 1; 16]);
        let parent = format!("00-{trace}-00f067aa0ba902b7-01");
        let user = format!("user-{user}");
        let a = gw
            .rpc_with(
                &jsonrpc("plan.get", json!({})),
                &[("traceparent", &parent), ("x-user", &user)],
            )
            .await;
        assert_eq!(a.status, 200, "{}", a.text);
        traces.push(trace);
    }
    let mut sides = std::collections::HashSet::new();
    for trace in traces {
        let spans = collector.trace(&trace, 2).await;
        let server = one(&spans, SERVER, "POST /rpc");
        let client = one(&spans, CLIENT, "POST");
        assert_eq!(
            server.attr("wiregate.route").as_deref(),
            Some("plans-split")
        );
        let side = server.attr("wiregate.split_side").expect("a split side");
        let upstream = client.attr("wiregate.upstream").unwrap();
        match side.as_str() {
            "primary" => assert_eq!(upstream, "old"),
            canary => assert_eq!((canary, upstream.as_str()), ("new", "new")),
        }
        assert_eq!(
            server.attr("wiregate.upstream_dialect"),
            client.attr("wiregate.upstream_dialect")
        );
        sides.insert(side);
    }
    assert_eq!(sides.len(), 2, "both sides served: {sides:?}");
}

#[tokio::test]
async fn a_shadowed_call_exports_the_shadows_exchange_in_the_same_trace() {
    let collector = Collector::start(Mode::Accept).await;
    let (old, new) = (legacy_echo().run().await, jsonrpc_echo().run().await);
    let gw = traced(old_and_new(&old, &new), &collector)
        .with(|c| {
            c.routes
                .push(shadowed("plans-shadow", &["plan.*"], "old", "new"))
        })
        .start()
        .await;
    let parent = "00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let a = gw
        .rpc_with(&jsonrpc("plan.get", json!({})), &[("traceparent", parent)])
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    let spans = collector.trace("5bf92f3577b34da6a3ce929d0e0e4736", 4).await;
    let server = one(&spans, SERVER, "POST /rpc");
    let shadow = one(&spans, INTERNAL, "shadow plans-shadow");
    assert_eq!(shadow.parent(), server.id());
    assert_eq!(
        shadow.attr("wiregate.route").as_deref(),
        Some("plans-shadow")
    );
    assert_eq!(shadow.attr("wiregate.upstream").as_deref(), Some("new"));
    assert!(shadow.attr("wiregate.shadow.verdict").is_some());
    let clients = of_kind(&spans, CLIENT);
    assert_eq!(clients.len(), 2);
    let primary = clients.iter().find(|c| c.parent() == server.id()).unwrap();
    assert_eq!(primary.attr("wiregate.upstream").as_deref(), Some("old"));
    let to_shadow = clients.iter().find(|c| c.parent() == shadow.id()).unwrap();
    assert_eq!(to_shadow.attr("wiregate.upstream").as_deref(), Some("new"));
    let seen = new.seen();
    assert_eq!(
        seen[0].headers["traceparent"].to_str().unwrap(),
        format!("00-5bf92f3577b34da6a3ce929d0e0e4736-{}-01", to_shadow.id())
    );
}
