//! Test builders over real sockets: programmable upstreams and a running gateway, all on
//! 127.0.0.1 ephemeral ports.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::Value;
use wiregate::config::{Config, Dialect, Legacy, Route, Upstream};
use wiregate::server::{self, Running};

/// What a programmable upstream does with one request body.
pub type Handler = Arc<dyn Fn(&Value) -> (StatusCode, String) + Send + Sync>;

/// One request an upstream received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Request headers.
    pub headers: HeaderMap,
    /// Request body as JSON.
    pub body: Value,
}

/// A running test upstream.
#[derive(Clone, Debug)]
pub struct Listening {
    /// Bound address.
    pub addr: SocketAddr,
    /// Every request received, in order.
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// The most requests it was ever handling at once.
    pub max_in_flight: Arc<AtomicUsize>,
}

impl Listening {
    /// The URL the gateway posts to.
    pub fn url(&self) -> String {
        format!("http://{}/rpc", self.addr)
    }

    /// The most requests it was ever handling at once.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(Ordering::SeqCst)
    }

    /// A copy of the requests received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

#[derive(Clone)]
struct UpstreamState {
    handler: Handler,
    delay: Duration,
    seen: Arc<Mutex<Vec<Seen>>>,
    in_flight: Arc<AtomicUsize>,
    max_in_flight: Arc<AtomicUsize>,
}

/// Builds an upstream that answers with `handler`, after `delay`.
pub struct UpstreamBuilder {
    handler: Handler,
    delay: Duration,
}

/// An upstream answering through `handler` (status, raw body).
pub fn upstream(
    handler: impl Fn(&Value) -> (StatusCode, String) + Send + Sync + 'static,
) -> UpstreamBuilder {
    UpstreamBuilder {
        handler: Arc::new(handler),
        delay: Duration::ZERO,
    }
}

/// A legacy upstream answering `data` = `{"op": operation, "params": params}`, or a
/// `NOT_FOUND` error for the operation `missing`, echoing `request_id` and `timing_ms: 7`.
pub fn legacy_echo() -> UpstreamBuilder {
    upstream(|req| {
        let rid = req["request_id"].clone();
        let op = req["operation"].as_str().unwrap_or_default();
        let body = if op == "missing" {
            serde_json::json!({"a2a_version": "1.0", "request_id": rid, "status": "error",
                "error": {"code": "NOT_FOUND", "message": "no such thing", "details": {"what": "x"}},
                "timing_ms": 7})
        } else {
            serde_json::json!({"a2a_version": "1.0", "request_id": rid, "status": "success",
                "data": {"op": op, "params": req["params"], "via": "legacy"}, "timing_ms": 7})
        };
        (StatusCode::OK, body.to_string())
    })
}

/// A JSON-RPC upstream answering `result` = `{"method": .., "params": .., "via": "jsonrpc"}`, or
/// -32001 for the method `missing`; notifications get 204.
pub fn jsonrpc_echo() -> UpstreamBuilder {
    upstream(|req| {
        if req.get("id").is_none() {
            return (StatusCode::NO_CONTENT, String::new());
        }
        let id = req["id"].clone();
        let method = req["method"].as_str().unwrap_or_default();
        let body = if method == "missing" {
            serde_json::json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32001, "message": "no such thing", "data": {"what": "x"}}})
        } else {
            serde_json::json!({"jsonrpc": "2.0", "id": id,
                "result": {"method": method, "params": req["params"], "via": "jsonrpc"}})
        };
        (StatusCode::OK, body.to_string())
    })
}

impl UpstreamBuilder {
    /// Waits this long before answering.
    pub fn delay(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }

    /// Starts it on 127.0.0.1:0.
    pub async fn run(self) -> Listening {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let max_in_flight = Arc::new(AtomicUsize::new(0));
        let state = UpstreamState {
            handler: self.handler,
            delay: self.delay,
            seen: seen.clone(),
            in_flight: Arc::new(AtomicUsize::new(0)),
            max_in_flight: max_in_flight.clone(),
        };
        let app = axum::Router::new()
            .route("/rpc", post(answer))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Listening {
            addr,
            seen,
            max_in_flight,
        }
    }
}

async fn answer(
    State(s): State<UpstreamState>,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    let body: Value = serde_json::from_slice(&body).expect("the gateway sends JSON");
    s.seen.lock().unwrap().push(Seen {
        headers,
        body: body.clone(),
    });
    let now = s.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    s.max_in_flight.fetch_max(now, Ordering::SeqCst);
    // `params.delay_ms` lets one request of a batch be slower than the others.
    let delay = body["params"]["delay_ms"]
        .as_u64()
        .map_or(s.delay, Duration::from_millis);
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    s.in_flight.fetch_sub(1, Ordering::SeqCst);
    let (status, text) = (s.handler)(&body);
    (status, [("content-type", "application/json")], text)
}

/// A URL on which nothing listens (connection refused).
pub async fn dead_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    format!("http://{addr}/rpc")
}

/// Builds a gateway configuration and runs it.
#[derive(Default)]
pub struct GatewayBuilder {
    config: Config,
}

/// A gateway on 127.0.0.1:0 with no upstreams yet.
pub fn gateway() -> GatewayBuilder {
    let mut config = Config::default();
    config.server.listen = "127.0.0.1:0".parse().unwrap();
    GatewayBuilder { config }
}

impl GatewayBuilder {
    /// Adds an upstream.
    pub fn upstream(mut self, name: &str, url: &str, dialect: Dialect, timeout_ms: u64) -> Self {
        self.config.upstreams.push(Upstream {
            name: name.into(),
            url: url.into(),
            dialect,
            timeout_ms,
        });
        self
    }

    /// Routes method globs to an upstream.
    pub fn route(mut self, methods: &[&str], upstream: &str) -> Self {
        self.config.routes.push(Route {
            methods: methods.iter().map(|m| m.to_string()).collect(),
            upstream: upstream.into(),
        });
        self
    }

    /// Sets the `[legacy]` section.
    pub fn legacy(mut self, legacy: Legacy) -> Self {
        self.config.legacy = legacy;
        self
    }

    /// Changes the configuration directly.
    pub fn with(mut self, f: impl FnOnce(&mut Config)) -> Self {
        f(&mut self.config);
        self
    }

    /// Validates and starts it.
    pub async fn start(self) -> TestGateway {
        self.config.validate().expect("a valid test configuration");
        let running = server::serve(&self.config).await.unwrap();
        TestGateway {
            addr: running.addr,
            running: Some(running),
            http: reqwest::Client::new(),
        }
    }
}

/// A running gateway and an HTTP client for it.
#[derive(Debug)]
pub struct TestGateway {
    /// Bound address.
    pub addr: SocketAddr,
    /// The server handle, for shutdown tests.
    pub running: Option<Running>,
    /// A plain HTTP/1.1 client.
    pub http: reqwest::Client,
}

/// An HTTP answer, read whole.
#[derive(Debug)]
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// Headers.
    pub headers: reqwest::header::HeaderMap,
    /// Body text.
    pub text: String,
}

impl Answer {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    }
}

impl TestGateway {
    /// `http://addr`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// POSTs a JSON value to `/rpc`.
    pub async fn rpc(&self, body: &Value) -> Answer {
        self.post("application/json", body.to_string().into_bytes(), &[])
            .await
    }

    /// POSTs a JSON value with extra headers.
    pub async fn rpc_with(&self, body: &Value, headers: &[(&str, &str)]) -> Answer {
        self.post("application/json", body.to_string().into_bytes(), headers)
            .await
    }

    /// POSTs raw bytes with a content type.
    pub async fn post(
        &self,
        content_type: &str,
        body: Vec<u8>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let mut req = self
            .http
            .post(format!("{}/rpc", self.base()))
            .header("content-type", content_type)
            .body(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        read(req.send().await.expect("the gateway answers")).await
    }

    /// GETs a path.
    pub async fn get(&self, path: &str) -> Answer {
        read(
            self.http
                .get(format!("{}{path}", self.base()))
                .send()
                .await
                .unwrap(),
        )
        .await
    }
}

async fn read(resp: reqwest::Response) -> Answer {
    Answer {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        text: resp.text().await.unwrap(),
    }
}
