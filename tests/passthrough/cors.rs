//! Browsers on other origins: `[server.cors]` answers preflights and adds CORS headers on calls,
//! streams and the pass-through, owns the policy over a pass-through upstream's own headers, and
//! leaves a plain `OPTIONS` to the pass-through.

use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use wiregate::config::Dialect;

use crate::support::{domain_record, feed_server, gateway, jsonrpc_echo, FeedMode};

const APP: &str = "https://app.example";

async fn with_cors(origins: &[&str]) -> crate::support::TestGateway {
    let up = jsonrpc_echo().run().await;
    let records = vec![domain_record(1, "plan.created", "plan-1", json!({"n": 1}))];
    let feed = feed_server(records, FeedMode::Ndjson, None, true).await;
    let origins: Vec<String> = origins.iter().map(|o| o.to_string()).collect();
    gateway()
        .upstream("modern", &up.url(), Dialect::Jsonrpc, 2000)
        .route(&["*"], "modern")
        .with(move |c| {
            c.server.cors.allow_origins = origins;
            c.events.source = feed.url();
        })
        .start()
        .await
}

#[tokio::test]
async fn an_allowed_origin_gets_preflight_and_cors_headers_on_calls_and_streams() {
    let gw = with_cors(&[APP]).await;
    let pre = gw
        .http
        .request(reqwest::Method::OPTIONS, format!("{}/rpc", gw.base()))
        .header("origin", APP)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "content-type, authorization",
        )
        .send()
        .await
        .unwrap();
    assert!(pre.status().is_success(), "{}", pre.status());
    assert_eq!(pre.headers()["access-control-allow-origin"], APP);
    let allowed = pre.headers()["access-control-allow-methods"]
        .to_str()
        .unwrap();
    assert!(allowed.contains("POST"), "{allowed}");
    let headers = pre.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap();
    assert!(headers.contains("authorization"), "{headers}");

    let call = gw
        .http
        .post(format!("{}/rpc", gw.base()))
        .header("origin", APP)
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "m"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(call.headers()["access-control-allow-origin"], APP);
    assert!(call.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .contains("x-request-id"));
    let body: serde_json::Value = call.json().await.unwrap();
    assert_eq!(body["result"]["via"], "jsonrpc");

    // An EventSource-style GET of a stream (served off hyper on HTTP/1).
    let stream = gw
        .http
        .get(format!("{}/events", gw.base()))
        .header("origin", APP)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    assert_eq!(stream.headers()["access-control-allow-origin"], APP);
    let mut events = eventsource_stream::EventStream::new(stream.bytes_stream());
    let first = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.id, "1");
}

#[tokio::test]
async fn a_refused_origin_gets_no_cors_headers() {
    let gw = with_cors(&[APP]).await;
    for path in ["/rpc", "/events"] {
        let pre = gw
            .http
            .request(reqwest::Method::OPTIONS, format!("{}{path}", gw.base()))
            .header("origin", "https://evil.example")
            .header("access-control-request-method", "POST")
            .send()
            .await
            .unwrap();
        assert!(pre.headers().get("access-control-allow-origin").is_none());
    }
    let stream = gw
        .http
        .get(format!("{}/events", gw.base()))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert!(stream
        .headers()
        .get("access-control-allow-origin")
        .is_none());
    // Without [server.cors], no CORS headers at all.
    let plain = with_cors(&[]).await;
    let call = plain
        .http
        .post(format!("{}/rpc", plain.base()))
        .header("origin", APP)
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "m"}).to_string())
        .send()
        .await
        .unwrap();
    assert!(call.headers().get("access-control-allow-origin").is_none());
    // "*" allows any origin.
    let any = with_cors(&["*"]).await;
    let r = any
        .http
        .get(format!("{}/healthz", any.base()))
        .header("origin", "https://anyone.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["access-control-allow-origin"], "*");
}

/// A legacy site behind the pass-through that answers with CORS headers of its own (any
/// origin, with credentials), which the gateway's rule must replace, not add to. It answers
/// `OPTIONS` with its `Allow`, and records the method and path of every request it gets.
struct Site {
    url: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Site {
    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

async fn site_with_its_own_cors() -> Site {
    use axum::extract::{Path, Request};
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let app = axum::Router::new()
        .route(
            "/files/{name}",
            axum::routing::put(|Path(name): Path<String>, req: Request| async move {
                let custom = req.headers().get("x-custom").cloned();
                let body = axum::body::to_bytes(req.into_body(), 1 << 16)
                    .await
                    .unwrap();
                (
                    [
                        ("access-control-allow-origin", "*"),
                        ("access-control-allow-credentials", "true"),
                        ("access-control-expose-headers", "x-site-secret"),
                    ],
                    axum::Json(json!({
                        "name": name,
                        "x-custom": custom.map(|v| v.to_str().unwrap().to_owned()),
                        "body": String::from_utf8(body.to_vec()).unwrap(),
                    })),
                )
            })
            .options(|| async {
                (
                    [
                        ("allow", "OPTIONS, GET, PUT, PROPFIND"),
                        ("dav", "1"),
                        ("access-control-allow-origin", "*"),
                    ],
                    "site options",
                )
            }),
        )
        .layer(axum::middleware::map_request(move |req: Request| {
            let record = record.clone();
            async move {
                let line = format!("{} {}", req.method(), req.uri().path());
                record.lock().unwrap().push(line);
                req
            }
        }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Site {
        url: format!("http://{addr}/"),
        seen,
    }
}

async fn passing_files_through() -> (crate::support::TestGateway, Site) {
    let site = site_with_its_own_cors().await;
    let gw = gateway()
        .upstream("site", &site.url, Dialect::Legacy, 2000)
        .passthrough(&[("/files", "site")])
        .with(|c| c.server.cors.allow_origins = vec![APP.into()])
        .start()
        .await;
    (gw, site)
}

/// Every value of `name` in `headers`, one per line that carried it.
fn all(headers: &reqwest::header::HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_page_may_put_through_the_passthrough_with_a_custom_header() {
    let (gw, _site) = passing_files_through().await;
    let url = format!("{}/files/a.txt", gw.base());
    let pre = gw
        .http
        .request(reqwest::Method::OPTIONS, &url)
        .header("origin", APP)
        .header("access-control-request-method", "PUT")
        .header("access-control-request-headers", "x-custom, authorization")
        .send()
        .await
        .unwrap();
    assert!(pre.status().is_success(), "{}", pre.status());
    assert_eq!(all(pre.headers(), "access-control-allow-origin"), [APP]);
    let methods = pre.headers()["access-control-allow-methods"]
        .to_str()
        .unwrap();
    for m in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
        assert!(methods.split(',').any(|x| x.trim() == m), "{m}: {methods}");
    }
    assert_eq!(
        pre.headers()["access-control-allow-headers"],
        "x-custom, authorization"
    );

    let put = gw
        .http
        .put(&url)
        .header("origin", APP)
        .header("x-custom", "yes")
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    // The gateway's rule, once; the site's own grants are gone.
    let h = put.headers().clone();
    assert_eq!(all(&h, "access-control-allow-origin"), [APP]);
    assert!(h.get("access-control-allow-credentials").is_none(), "{h:?}");
    let exposed = all(&h, "access-control-expose-headers").join(",");
    assert!(exposed.contains("x-request-id"), "{exposed}");
    assert!(!exposed.contains("x-site-secret"), "{exposed}");
    let seen: serde_json::Value = put.json().await.unwrap();
    assert_eq!(
        seen,
        json!({"name": "a.txt", "x-custom": "yes", "body": "hello"})
    );
}

#[tokio::test]
async fn a_plain_options_reaches_the_passthrough_and_a_preflight_does_not() {
    let (gw, site) = passing_files_through().await;
    let url = format!("{}/files/x", gw.base());
    // No `Origin` and `Access-Control-Request-Method`: not a preflight, the site answers.
    let plain = gw
        .http
        .request(reqwest::Method::OPTIONS, &url)
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 200);
    assert_eq!(plain.headers()["allow"], "OPTIONS, GET, PUT, PROPFIND");
    assert_eq!(plain.headers()["dav"], "1");
    assert!(plain.headers().get("access-control-allow-origin").is_none());
    assert_eq!(plain.text().await.unwrap(), "site options");
    assert_eq!(site.seen(), ["OPTIONS /files/x"]);

    // A page's own OPTIONS (after its preflight) carries `Origin` alone: it reaches the
    // site too, and its answer gets the gateway's rule (the site's `*` replaced).
    let from_page = gw
        .http
        .request(reqwest::Method::OPTIONS, &url)
        .header("origin", APP)
        .send()
        .await
        .unwrap();
    assert_eq!(from_page.status(), 200);
    assert_eq!(from_page.headers()["allow"], "OPTIONS, GET, PUT, PROPFIND");
    assert_eq!(
        all(from_page.headers(), "access-control-allow-origin"),
        [APP]
    );
    assert!(from_page
        .headers()
        .get("access-control-allow-methods")
        .is_none());
    assert_eq!(site.seen(), ["OPTIONS /files/x", "OPTIONS /files/x"]);

    // A real preflight is the gateway's to answer; the site never sees it.
    let pre = gw
        .http
        .request(reqwest::Method::OPTIONS, &url)
        .header("origin", APP)
        .header("access-control-request-method", "PUT")
        .send()
        .await
        .unwrap();
    assert!(pre.status().is_success(), "{}", pre.status());
    assert_eq!(all(pre.headers(), "access-control-allow-origin"), [APP]);
    assert!(pre.headers().get("access-control-allow-methods").is_some());
    assert!(pre.headers().get("allow").is_none());
    assert_eq!(site.seen(), ["OPTIONS /files/x", "OPTIONS /files/x"]);

    // Off the pass-through, a plain OPTIONS gets what the route answers: 405 on /healthz.
    let own = gw
        .http
        .request(reqwest::Method::OPTIONS, format!("{}/healthz", gw.base()))
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), 405);
}

#[tokio::test]
async fn a_refused_origin_gets_no_cors_headers_from_the_passthrough_either() {
    let (gw, _site) = passing_files_through().await;
    let url = format!("{}/files/a.txt", gw.base());
    let pre = gw
        .http
        .request(reqwest::Method::OPTIONS, &url)
        .header("origin", "https://evil.example")
        .header("access-control-request-method", "PUT")
        .send()
        .await
        .unwrap();
    assert!(pre.headers().get("access-control-allow-origin").is_none());
    // The PUT itself reaches the site (CORS is the browser's to enforce), but its answer
    // grants nothing: the site's `*` and credentials are not passed on (tower-http's
    // expose list, which grants nothing without an allowed origin, is all that is left).
    let put = gw
        .http
        .put(&url)
        .header("origin", "https://evil.example")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    let h = put.headers();
    assert!(h.get("access-control-allow-origin").is_none(), "{h:?}");
    assert!(h.get("access-control-allow-credentials").is_none(), "{h:?}");
    let exposed = all(h, "access-control-expose-headers").join(",");
    assert!(!exposed.contains("x-site-secret"), "{exposed}");
}
