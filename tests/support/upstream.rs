//! Programmable HTTP upstreams: a JSON-RPC or legacy server on `/rpc` that records what it
//! was sent (over TLS too), and the two that never answer (nothing listening, a black hole).
//! With [`UpstreamBuilder::health`] it also answers `GET /health` with a status the test can
//! switch while it runs.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::Value;

use super::pki;

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
    /// `http://127.0.0.1:port`, or `https://localhost:port` for a TLS upstream.
    pub origin: String,
    /// Every request received, in order.
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// The most requests it was ever handling at once.
    pub max_in_flight: Arc<AtomicUsize>,
    /// Connections accepted (counted for TLS upstreams only).
    pub connections: Arc<AtomicUsize>,
    /// The SNI name of each TLS handshake (TLS upstreams only).
    pub sni: pki::Sni,
    /// `GET /health` requests answered (with [`UpstreamBuilder::health`] only).
    pub health_checks: Arc<AtomicUsize>,
}

impl Listening {
    /// The URL the gateway posts to.
    pub fn url(&self) -> String {
        format!("{}/rpc", self.origin)
    }

    /// The most requests it was ever handling at once.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(Ordering::SeqCst)
    }

    /// A copy of the requests received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// How many requests it received so far.
    pub fn calls(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// `GET /health` requests answered so far.
    pub fn health_checks(&self) -> usize {
        self.health_checks.load(Ordering::SeqCst)
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
    health: Option<Arc<AtomicU16>>,
}

/// An upstream answering through `handler` (status, raw body).
pub fn upstream(
    handler: impl Fn(&Value) -> (StatusCode, String) + Send + Sync + 'static,
) -> UpstreamBuilder {
    UpstreamBuilder {
        handler: Arc::new(handler),
        delay: Duration::ZERO,
        health: None,
    }
}

/// A JSON-RPC upstream answering every call with `{"via": name}`: which upstream a route
/// reached.
pub fn named(name: &'static str) -> UpstreamBuilder {
    upstream(move |req| {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": req["id"], "result": {"via": name}});
        (StatusCode::OK, body.to_string())
    })
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

    /// Also answers `GET /health` with the status `status` holds when the request comes (so a
    /// test switches it while the upstream runs), without delay.
    pub fn health(mut self, status: Arc<AtomicU16>) -> Self {
        self.health = Some(status);
        self
    }

    /// Starts it on 127.0.0.1:0.
    pub async fn run(self) -> Listening {
        self.start(None).await
    }

    /// Starts it on 127.0.0.1:0 over TLS with `config` (reached as `https://localhost`).
    pub async fn run_tls(self, config: Arc<rustls::ServerConfig>) -> Listening {
        self.start(Some(config)).await
    }

    async fn start(self, tls: Option<Arc<rustls::ServerConfig>>) -> Listening {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let max_in_flight = Arc::new(AtomicUsize::new(0));
        let state = UpstreamState {
            handler: self.handler,
            delay: self.delay,
            seen: seen.clone(),
            in_flight: Arc::new(AtomicUsize::new(0)),
            max_in_flight: max_in_flight.clone(),
        };
        let health_checks = Arc::new(AtomicUsize::new(0));
        // `/files/…` too: what a pass-through of `/files` sends it.
        let mut app = axum::Router::new()
            .route("/rpc", post(answer))
            .route("/files/{*rest}", post(answer))
            .with_state(state);
        if let Some(status) = self.health {
            let checks = health_checks.clone();
            app = app.route(
                "/health",
                get(move || {
                    let code = status.load(Ordering::SeqCst);
                    checks.fetch_add(1, Ordering::SeqCst);
                    async move {
                        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
                    }
                }),
            );
        }
        let (addr, origin, connections, sni) = match tls {
            Some(cfg) => {
                let s = pki::serve_tls(app, cfg).await;
                let origin = format!("https://localhost:{}", s.addr.port());
                (s.addr, origin, s.accepted, s.sni)
            }
            None => {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
                (
                    addr,
                    format!("http://{addr}"),
                    Arc::default(),
                    Arc::default(),
                )
            }
        };
        Listening {
            origin,
            connections,
            sni,
            addr,
            seen,
            max_in_flight,
            health_checks,
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

/// An upstream that accepts connections and never answers (a timeout's other side).
pub async fn black_hole() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
        }
    });
    format!("http://{addr}/")
}
