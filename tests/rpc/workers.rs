//! Per-core workers (`server.runtime = "per_core"`), over real sockets: calls on many
//! connections are served by every worker thread and translated as on the shared runtime; a
//! sid turn started from a worker streams, and outlives nothing at shutdown (its child stopped,
//! its streams ended); a stop lets the call in flight finish and then closes every worker's
//! socket; a port in use is the start's error.

use crate::support;

use std::time::Duration;

use futures::future::join_all;
use serde_json::json;
use support::{gateway, legacy_echo, text_message, GatewayBuilder};
use wiregate::config::{Dialect, Runtime};

const T: Duration = Duration::from_secs(10);

/// `builder` on two per-core workers.
fn per_core(builder: GatewayBuilder) -> GatewayBuilder {
    builder.with(|c| {
        c.server.runtime = Runtime::PerCore;
        c.server.worker_threads = 2;
    })
}

/// The time on a CPU of each worker thread of the gateway on `port` (named `wg-wN:PORT`), in
/// ns (`/proc/self/task/*/schedstat`), by name.
fn worker_cpu_ns(port: u16) -> std::collections::BTreeMap<String, u64> {
    let suffix = format!(":{port}");
    let mut out = std::collections::BTreeMap::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let name = comm.trim();
        if !(name.starts_with("wg-w") && name.ends_with(&suffix)) {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        let ns = stat.split_whitespace().next().and_then(|v| v.parse().ok());
        *out.entry(name.to_owned()).or_default() += ns.unwrap_or(0);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_on_many_connections_are_served_by_every_worker_and_translated() {
    let up = legacy_echo().run().await;
    let gw = per_core(
        gateway()
            .upstream("up", &up.url(), Dialect::Legacy, 5_000)
            .route(&["*"], "up"),
    )
    .start()
    .await;
    let port = gw.addr.port();
    let before = worker_cpu_ns(port);
    assert_eq!(
        before.keys().cloned().collect::<Vec<_>>(),
        [format!("wg-w0:{port}"), format!("wg-w1:{port}")],
        "two worker threads"
    );
    // 32 clients, each its own connection (the kernel spreads them over the two sockets).
    let url = format!("{}/rpc", gw.base());
    let calls = (0..32u64).map(|c| {
        let url = url.clone();
        async move {
            let http = reqwest::Client::new();
            for n in 0..4u64 {
                let id = c * 10 + n;
                let body =
                    json!({"jsonrpc": "2.0", "id": id, "method": "echo", "params": {"n": id}});
                let answer = support::spawn_post(&http, url.clone(), body).await.unwrap();
                assert_eq!(
                    answer,
                    json!({"jsonrpc": "2.0", "id": id,
                           "result": {"op": "echo", "params": {"n": id}, "via": "legacy"}})
                );
            }
        }
    });
    join_all(calls).await;
    assert_eq!(up.seen().len(), 128, "every call reached the upstream once");
    let after = worker_cpu_ns(port);
    for (name, ns) in &after {
        assert!(
            *ns > before[name],
            "{name} served none of 32 connections: {before:?} -> {after:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_finishes_the_call_in_flight_then_closes_every_socket() {
    let slow = legacy_echo().delay(Duration::from_millis(500)).run().await;
    let mut gw = per_core(
        gateway()
            .upstream("up", &slow.url(), Dialect::Legacy, 5_000)
            .route(&["*"], "up"),
    )
    .start()
    .await;
    let call = support::spawn_post(
        &gw.http,
        format!("{}/rpc", gw.base()),
        json!({"jsonrpc": "2.0", "id": "slow", "method": "slow"}),
    );
    support::until_true("the call reaches the upstream", T, async || {
        !slow.seen().is_empty()
    })
    .await;
    let running = gw.running.take().unwrap();
    let addr = running.addr;
    running.shutdown(T).await;
    assert_eq!(
        call.await.unwrap(),
        json!({"jsonrpc": "2.0", "id": "slow",
               "result": {"op": "slow", "params": {}, "via": "legacy"}}),
        "the call in flight finished"
    );
    for _ in 0..8 {
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "a worker's socket still accepts after the stop"
        );
    }
    support::until_true("the worker threads end", T, async || {
        worker_cpu_ns(addr.port()).is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sid_turn_started_on_a_worker_streams_and_its_child_stops_with_the_gateway() {
    let tag = format!("per-core-{}", uuid::Uuid::new_v4());
    let mut gw = per_core(gateway().sid(&tag)).start().await;
    let done = gw.call("message/send", text_message("hello")).await;
    assert_eq!(done["result"]["status"]["state"], "completed", "{done}");
    let ctx = done["result"]["contextId"].as_str().unwrap().to_owned();
    // The context's stream, read on another connection (perhaps another worker).
    let mut events = gw.sse_get(&format!("/contexts/{ctx}/events"), None).await;
    events.until_final(T).await;
    let mut hung = gw.stream_message(text_message("hang")).await;
    hung.next(T).await.expect("the hung turn started");
    assert_eq!(
        support::processes_tagged(&tag).len(),
        2,
        "two contexts, two children"
    );
    gw.stop(Duration::from_secs(5)).await;
    assert!(events.next(T).await.is_none(), "the context stream ended");
    hung.collect(T).await;
    support::until_true("every child stops", T, async || {
        support::processes_tagged(&tag).is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_in_use_is_the_starts_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let start = wiregate::server::serve(
        &per_core(gateway())
            .with(move |c| c.server.listen = addr)
            .into_config(),
    )
    .await;
    assert_eq!(
        start.map(|r| r.addr).unwrap_err().kind(),
        std::io::ErrorKind::AddrInUse
    );
}
