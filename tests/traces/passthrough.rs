//! The spans of a pass-through request: a SERVER span named by its method, with a CLIENT span
//! for the request to the site, whose id the site sees; the query string in neither.

use serde_json::json;
use wiregate::config::Dialect;

use crate::support::otlp::{Collector, Mode};
use crate::support::{gateway, jsonrpc_echo};
use crate::{one, traced, CLIENT, SERVER};

#[tokio::test]
async fn a_passed_through_post_is_a_server_and_a_client_span() {
    let collector = Collector::start(Mode::Accept).await;
    let site = jsonrpc_echo().run().await;
    let gw = traced(
        gateway()
            .upstream("site", &site.url(), Dialect::Legacy, 2000)
            .passthrough(&[("/files", "site")]),
        &collector,
    )
    .start()
    .await;
    let parent = "00-6bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let r = gw
        .http
        .post(format!("{}/files/report?token=q-secret", gw.base()))
        .header("content-type", "application/json")
        .header("traceparent", parent)
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "upload"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let spans = collector.trace("6bf92f3577b34da6a3ce929d0e0e4736", 2).await;
    let server = one(&spans, SERVER, "POST");
    assert_eq!(server.parent(), "00f067aa0ba902b7");
    assert_eq!(server.attr("url.path").as_deref(), Some("/files/report"));
    assert_eq!(
        server.attr("http.response.status_code").as_deref(),
        Some("200")
    );
    assert_eq!(server.attr("wiregate.passthrough").as_deref(), Some("true"));
    let client = one(&spans, CLIENT, "POST");
    assert_eq!(client.parent(), server.id());
    assert_eq!(client.attr("wiregate.upstream").as_deref(), Some("site"));
    assert_eq!(
        client.attr("http.response.status_code").as_deref(),
        Some("200")
    );
    let seen = site.seen();
    assert_eq!(
        seen[0].headers["traceparent"].to_str().unwrap(),
        format!("00-6bf92f3577b34da6a3ce929d0e0e4736-{}-01", client.id())
    );
    assert!(
        !format!("{spans:?}").contains("q-secret"),
        "no query string exported"
    );
}
