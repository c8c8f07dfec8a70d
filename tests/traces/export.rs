//! The exporter: OTLP/gRPC as well as HTTP, the export headers, sampling at 0 (nothing exported,
//! the context still propagated), a collector that is down, slow or refusing under load (no call
//! failed or slowed; spans beyond the queue dropped and counted), and a reload that changes the
//! endpoint and the ratio; a stopping gateway sends what waits; export errors logged once a
//! minute, and the access line naming the exported trace (the binary, its log read); a TLS
//! collector over HTTP and gRPC, verified against `ca_file`, and one that cannot be verified.

use std::time::{Duration, Instant};

use serde_json::json;
use wiregate::config::Dialect;

use crate::support::otlp::{Collector, Mode};
use crate::support::pki::Pki;
use serde_json::Value;

use crate::support::{dead_url, jsonrpc_echo, routing_all_to, until, GatewayProcess};
use crate::{one, traced, CLIENT, SERVER};

#[tokio::test]
async fn spans_go_over_grpc_with_the_configured_headers() {
    let collector = Collector::start(Mode::Accept).await;
    let up = jsonrpc_echo().run().await;
    let endpoint = collector.grpc();
    let gw = routing_all_to(&up.url(), Dialect::Jsonrpc)
        .with(move |c| {
            c.tracing.otlp_endpoint = endpoint;
            c.tracing.export_interval_ms = 50;
            c.tracing.headers = [("x-collector-token".to_owned(), "tok-1".to_owned())].into();
        })
        .start()
        .await;
    let a = gw
        .rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "m"}))
        .await;
    assert_eq!(a.status, 200);
    let spans = collector.until("two spans", |s| s.len() >= 2).await;
    let server = one(&spans, SERVER, "POST /rpc");
    assert_eq!(server.parent(), "", "a trace started here is a root");
    let client = one(&spans, CLIENT, "POST");
    assert_eq!(client.trace(), server.trace());
    assert_eq!(server.headers["x-collector-token"], "tok-1");
    assert_eq!(server.headers["content-type"], "application/grpc");
}

#[tokio::test]
async fn sampling_at_zero_exports_nothing_and_still_propagates_the_context() {
    let collector = Collector::start(Mode::Accept).await;
    let up = jsonrpc_echo().run().await;
    let gw = traced(routing_all_to(&up.url(), Dialect::Jsonrpc), &collector)
        .with(|c| c.tracing.sample_ratio = 0.0)
        .start()
        .await;
    for id in 0..20 {
        gw.rpc(&json!({"jsonrpc": "2.0", "id": id, "method": "m"}))
            .await;
    }
    // A client's sampled trace is followed whatever the ratio.
    let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    gw.rpc_with(
        &json!({"jsonrpc": "2.0", "id": "sampled", "method": "m"}),
        &[("traceparent", parent)],
    )
    .await;
    let spans = collector.trace("0af7651916cd43dd8448eb211c80319c", 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        collector.spans().len(),
        spans.len(),
        "only the client's sampled trace: {:#?}",
        crate::support::otlp::summary(&collector.spans())
    );
    let seen = up.seen();
    assert_eq!(seen.len(), 21);
    for s in &seen[..20] {
        let tp = s.headers["traceparent"].to_str().unwrap();
        assert_eq!(tp.len(), 55);
        assert!(tp.ends_with("-00"), "propagated, marked not sampled: {tp}");
    }
}

#[tokio::test]
async fn a_collector_down_slow_or_refusing_costs_no_call_and_full_queues_are_counted() {
    let up = jsonrpc_echo().run().await;
    let refusing = Collector::start(Mode::Refuse).await;
    let slow = Collector::start(Mode::Accept).await;
    slow.slow(Duration::from_secs(5));
    let dead = dead_url().await;
    for (what, endpoint) in [
        ("down", dead),
        ("refusing", refusing.http()),
        ("slow", slow.http()),
    ] {
        let gw = routing_all_to(&up.url(), Dialect::Jsonrpc)
            .with(move |c| {
                c.tracing.otlp_endpoint = endpoint;
                c.tracing.export_interval_ms = 20;
                c.tracing.queue_max = 64;
            })
            .start()
            .await;
        let started = Instant::now();
        let calls: Vec<_> = (0..8)
            .map(|w| {
                let (http, url) = (gw.http.clone(), format!("{}/rpc", gw.base()));
                tokio::spawn(async move {
                    let mut worst = Duration::ZERO;
                    for i in 0..50 {
                        let t = Instant::now();
                        let r = http
                            .post(&url)
                            .header("content-type", "application/json")
                            .body(
                                json!({"jsonrpc": "2.0", "id": w * 100 + i, "method": "m"})
                                    .to_string(),
                            )
                            .send()
                            .await
                            .expect("answered");
                        assert_eq!(r.status(), 200);
                        let v: serde_json::Value = r.json().await.unwrap();
                        assert_eq!(v["result"]["method"], "m", "{v}");
                        worst = worst.max(t.elapsed());
                    }
                    worst
                })
            })
            .collect();
        let mut worst = Duration::ZERO;
        for c in calls {
            worst = worst.max(c.await.unwrap());
        }
        // 400 calls; none waits on the exporter (whose tries take up to 5 s against the slow
        // collector, and time out at 10 s).
        assert!(
            worst < Duration::from_secs(2),
            "{what}: the slowest call took {worst:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(20), "{what}");
        if what == "slow" {
            // 800 spans into a queue of 64 while the one export in flight waits.
            let dropped = gw.counter("wiregate_trace_spans_dropped_total").await;
            assert!(
                dropped > 0,
                "{what}: spans beyond queue_max are dropped and counted"
            );
        } else {
            crate::support::until(
                "an export failure counted",
                Duration::from_secs(10),
                async || {
                    (gw.counter("wiregate_trace_export_failures_total").await > 0).then_some(())
                },
            )
            .await;
        }
    }
}

#[tokio::test]
async fn a_reload_changes_the_endpoint_and_the_ratio() {
    let first = Collector::start(Mode::Accept).await;
    let second = Collector::start(Mode::Accept).await;
    let up = jsonrpc_echo().run().await;
    let gw = traced(routing_all_to(&up.url(), Dialect::Jsonrpc), &first)
        .start()
        .await;
    gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "m"}))
        .await;
    first
        .until("the first call's spans", |s| s.len() >= 2)
        .await;
    let running = gw.running.as_ref().unwrap();
    let mut next = traced(routing_all_to(&up.url(), Dialect::Jsonrpc), &second).into_config();
    assert!(running.reload(&next).reloaded);
    gw.rpc(&json!({"jsonrpc": "2.0", "id": 2, "method": "m"}))
        .await;
    second
        .until("the second call's spans", |s| s.len() >= 2)
        .await;
    next.tracing.sample_ratio = 0.0;
    assert!(running.reload(&next).reloaded);
    let before = second.spans().len();
    gw.rpc(&json!({"jsonrpc": "2.0", "id": 3, "method": "m"}))
        .await;
    next.tracing.otlp_endpoint = String::new();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(second.spans().len(), before, "ratio 0 after the reload");
    assert_eq!(first.spans().len(), 2, "nothing more to the old endpoint");
}

#[tokio::test]
async fn a_stopping_gateway_sends_the_spans_still_waiting() {
    let collector = Collector::start(Mode::Accept).await;
    let up = jsonrpc_echo().run().await;
    let endpoint = collector.http();
    let mut gw = routing_all_to(&up.url(), Dialect::Jsonrpc)
        .with(move |c| {
            c.tracing.otlp_endpoint = endpoint;
            c.tracing.export_interval_ms = 60_000;
        })
        .start()
        .await;
    gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "m"}))
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        collector.spans().is_empty(),
        "nothing sent before the interval"
    );
    gw.stop(Duration::from_secs(2)).await;
    let spans = collector.spans();
    assert_eq!(
        spans.len(),
        2,
        "{:#?}",
        crate::support::otlp::summary(&spans)
    );
}

/// The gateway binary with `sections` (and a listener on a free port), its log in JSON, and
/// the address it listens on once it says so.
async fn gateway_process(sections: &str) -> (GatewayProcess, String, tempfile::TempDir) {
    let toml = format!("{sections}\n[log]\nformat = \"json\"\naccess = true\n");
    GatewayProcess::with_config(&toml).await
}

/// One JSON-RPC call to the gateway at `addr`, answered 200.
async fn one_call(http: &reqwest::Client, addr: &str) {
    let r = http
        .post(format!("http://{addr}/rpc"))
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "m"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

fn upstream_section(url: &str) -> String {
    format!(
        "[[upstreams]]\nname = \"up\"\nurl = \"{url}\"\ndialect = \"jsonrpc\"\n\
         [[routes]]\nmethods = [\"*\"]\nupstream = \"up\"\n"
    )
}

#[tokio::test]
async fn export_errors_are_logged_once_a_minute_without_the_headers() {
    let up = jsonrpc_echo().run().await;
    let dead = dead_url().await;
    let (gw, addr, _dir) = gateway_process(&format!(
        "{}[tracing]\notlp_endpoint = \"{dead}\"\nexport_interval_ms = 20\n\
         headers = {{ authorization = \"Bearer log-secret\" }}\n",
        upstream_section(&up.url())
    ))
    .await;
    let http = reqwest::Client::new();
    let failures = async || {
        let text = http
            .get(format!("http://{addr}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| {
                l.strip_prefix("wiregate_trace_export_failures_total ")?
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .unwrap_or(0)
    };
    until("five failed exports", Duration::from_secs(20), async || {
        one_call(&http, &addr).await;
        tokio::time::sleep(Duration::from_millis(30)).await;
        (failures().await >= 5).then_some(())
    })
    .await;
    let log = gw.log.lock().unwrap().clone();
    let logged: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("span export failed"))
        .collect();
    assert_eq!(logged.len(), 1, "one line for five failures: {logged:#?}");
    assert!(log.iter().all(|l| !l.contains("log-secret")), "{log:#?}");
}

#[tokio::test]
async fn the_access_line_names_the_exported_trace() {
    let collector = Collector::start(Mode::Accept).await;
    let up = jsonrpc_echo().run().await;
    let (gw, addr, _dir) = gateway_process(&format!(
        "{}[tracing]\notlp_endpoint = \"{}\"\nexport_interval_ms = 20\n",
        upstream_section(&up.url()),
        collector.http()
    ))
    .await;
    one_call(&reqwest::Client::new(), &addr).await;
    let spans = collector.until("the call's spans", |s| s.len() >= 2).await;
    let server = one(&spans, SERVER, "POST /rpc");
    let log = gw.log.clone();
    let line = until("the access line", Duration::from_secs(10), async || {
        log.lock()
            .unwrap()
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v.to_string().contains("\"access\"") && v.to_string().contains("/rpc"))
    })
    .await;
    let trace_id = line["trace_id"]
        .as_str()
        .or_else(|| line["fields"]["trace_id"].as_str())
        .unwrap_or_else(|| panic!("no trace_id in {line}"));
    assert_eq!(trace_id, server.trace());
}

#[tokio::test]
async fn spans_reach_a_tls_collector_over_http_and_grpc_verified_against_ca_file() {
    let pki = Pki::new("collector CA");
    let issued = pki.issue("collector", &["localhost"]);
    let up = jsonrpc_echo().run().await;
    // OTLP/HTTP offers `http/1.1`, as every outbound HTTP/1.1 connection does; gRPC over TLS
    // offers `h2` alone.
    for (scheme, content_type, alpn) in [
        (
            "https",
            "application/x-protobuf",
            Some(b"http/1.1".to_vec()),
        ),
        ("grpcs", "application/grpc", Some(b"h2".to_vec())),
    ] {
        let collector = Collector::start_tls(Mode::Accept, &issued).await;
        let endpoint = format!("{scheme}://localhost:{}", collector.addr.port());
        let ca = pki.ca_file();
        let gw = routing_all_to(&up.url(), Dialect::Jsonrpc)
            .with(move |c| {
                c.tracing.otlp_endpoint = endpoint;
                c.tracing.ca_file = ca;
                c.tracing.export_interval_ms = 20;
                c.tracing.headers = [("x-api-key".to_owned(), "collector-key".to_owned())].into();
            })
            .start()
            .await;
        let a = gw
            .rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "m"}))
            .await;
        assert_eq!(a.status, 200);
        let spans = collector.until("two spans", |s| s.len() >= 2).await;
        let server = one(&spans, SERVER, "POST /rpc");
        assert_eq!(server.headers["content-type"], content_type, "{scheme}");
        assert_eq!(server.headers["x-api-key"], "collector-key", "{scheme}");
        assert_eq!(
            collector.alpn(),
            vec![alpn],
            "{scheme}: one TLS connection, its ALPN"
        );
    }
}

#[tokio::test]
async fn an_untrusted_collector_gets_no_spans_and_the_error_is_logged_without_credentials() {
    let theirs = Pki::new("a CA the gateway does not trust");
    let issued = theirs.issue("collector", &["localhost"]);
    let ours = Pki::new("the CA the gateway trusts");
    let up = jsonrpc_echo().run().await;
    for scheme in ["https", "grpcs"] {
        let collector = Collector::start_tls(Mode::Accept, &issued).await;
        let (gw, addr, _dir) = gateway_process(&format!(
            "{}[tracing]\notlp_endpoint = \"{scheme}://otlp:S3CR3T-MARKER@localhost:{}\"\n\
             ca_file = \"{}\"\nexport_interval_ms = 20\n\
             headers = {{ authorization = \"Bearer S3CR3T-MARKER\" }}\n",
            upstream_section(&up.url()),
            collector.addr.port(),
            ours.ca_file()
        ))
        .await;
        let http = reqwest::Client::new();
        let log = gw.log.clone();
        let line = until("the export error", Duration::from_secs(20), async || {
            one_call(&http, &addr).await;
            tokio::time::sleep(Duration::from_millis(30)).await;
            log.lock()
                .unwrap()
                .iter()
                .find(|l| l.contains("span export failed"))
                .cloned()
        })
        .await;
        assert!(
            line.contains(&format!("{scheme}://localhost:{}", collector.addr.port())),
            "the endpoint is named: {line}"
        );
        assert!(
            line.to_lowercase().contains("certificate"),
            "the reason: {line}"
        );
        assert!(
            collector.spans().is_empty(),
            "{scheme}: no span got through"
        );
        assert_eq!(collector.requests(), 0, "{scheme}: not one request");
        let log = gw.log.lock().unwrap().clone();
        assert!(log.iter().all(|l| !l.contains("S3CR3T-MARKER")), "{log:#?}");
    }
}
