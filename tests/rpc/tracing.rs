//! W3C trace context on the RPC path: `traceparent` reaches the upstream with a new span id per
//! hop (or starts a trace), and `tracestate` goes only with a valid parent.

use serde_json::json;
use wiregate::config::Dialect;

use crate::support::{gateway, jsonrpc_echo};

#[tokio::test]
async fn traceparent_reaches_the_upstream_with_a_new_span_or_starts_a_trace() {
    let up = jsonrpc_echo().run().await;
    let gw = gateway()
        .upstream("modern", &up.url(), Dialect::Jsonrpc, 2000)
        .route(&["*"], "modern")
        .start()
        .await;
    let client = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    gw.rpc_with(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "m"}),
        &[("traceparent", client)],
    )
    .await;
    gw.rpc(&json!({"jsonrpc": "2.0", "id": 2, "method": "m"}))
        .await;
    let seen = up.seen();
    let continued = seen[0].headers["traceparent"].to_str().unwrap();
    assert!(continued.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
    assert!(continued.ends_with("-01"));
    assert_ne!(&continued[36..52], "00f067aa0ba902b7", "a new span per hop");
    let started = seen[1].headers["traceparent"].to_str().unwrap();
    assert_eq!(started.len(), 55);
    assert!(!started.contains("4bf92f3577b34da6a3ce929d0e0e4736"));
}

/// The client's `tracestate` goes on with a valid `traceparent` only, from a JSON-RPC and a
/// legacy client, on the pooled and the pipelined upstream connection, with the HTTP/1
/// loop reading the head's bytes (no access log) and a header map (access log on).
#[tokio::test]
async fn tracestate_reaches_the_upstream_only_with_a_valid_traceparent() {
    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const STATE: &str = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7";
    /// A client's body, its headers, and the `tracestate` the upstream is to see.
    type Call<'a> = (
        &'a serde_json::Value,
        &'a [(&'a str, &'a str)],
        Option<&'a str>,
    );
    let jsonrpc = json!({"jsonrpc": "2.0", "id": 1, "method": "m"});
    let legacy = json!({"a2a_version": "1.0", "request_id": "r1", "operation": "m", "params": {}});
    for (pipeline, access) in [(0, false), (4, false), (0, true), (4, true)] {
        let up = jsonrpc_echo().run().await;
        let gw = gateway()
            .upstream("modern", &up.url(), Dialect::Jsonrpc, 2000)
            .route(&["*"], "modern")
            .with(move |c| {
                c.upstreams[0].pipeline = pipeline;
                c.log.access = access;
            })
            .start()
            .await;
        let case = format!("pipeline {pipeline}, access log {access}");
        let calls: [Call; 6] = [
            (
                &jsonrpc,
                &[("traceparent", PARENT), ("tracestate", STATE)],
                Some(STATE),
            ),
            (
                &legacy,
                &[("traceparent", PARENT), ("tracestate", STATE)],
                Some(STATE),
            ),
            (&jsonrpc, &[("tracestate", STATE)], None),
            (&legacy, &[("tracestate", STATE)], None),
            (
                &jsonrpc,
                &[
                    (
                        "traceparent",
                        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                    ),
                    ("tracestate", STATE),
                ],
                None,
            ),
            // Several lines are not joined: none goes on.
            (
                &jsonrpc,
                &[
                    ("traceparent", PARENT),
                    ("tracestate", "a=1"),
                    ("tracestate", "b=2"),
                ],
                None,
            ),
        ];
        for (body, headers, _) in &calls {
            let a = gw.rpc_with(body, headers).await;
            assert_eq!(a.status, 200, "{case}: {}", a.text);
        }
        let seen = up.seen();
        assert_eq!(seen.len(), calls.len(), "{case}");
        for (i, ((_, headers, want), seen)) in calls.iter().zip(&seen).enumerate() {
            let got: Vec<_> = seen
                .headers
                .get_all("tracestate")
                .iter()
                .map(|v| v.to_str().unwrap())
                .collect();
            assert_eq!(
                got,
                want.iter().copied().collect::<Vec<_>>(),
                "{case}, call {i}: {headers:?}"
            );
            assert_eq!(
                seen.headers.get_all("traceparent").iter().count(),
                1,
                "{case}, call {i}"
            );
        }
    }
}
