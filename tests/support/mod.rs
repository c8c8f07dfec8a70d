//! Test builders over real sockets: programmable upstreams and a running gateway, all on
//! 127.0.0.1 ephemeral ports.
#![allow(dead_code)]

pub mod migration;
pub mod pki;
pub mod raw_h1;
pub mod redis_server;

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
use wiregate::config::{Config, Dialect, Legacy, Passthrough, Route, Upstream};
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
        let app = axum::Router::new()
            .route("/rpc", post(answer))
            .with_state(state);
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

/// A gateway routing every method to `up`, which speaks `dialect` (2 s timeout).
pub async fn fronting(up: &Listening, dialect: Dialect) -> TestGateway {
    routing_all_to(&up.url(), dialect).start().await
}

/// A gateway configuration routing every method to the upstream at `url` (2 s timeout).
pub fn routing_all_to(url: &str, dialect: Dialect) -> GatewayBuilder {
    gateway()
        .upstream("up", url, dialect, 2000)
        .route(&["*"], "up")
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
        self.config
            .upstreams
            .push(Upstream::new(name, url, dialect, timeout_ms));
        self
    }

    /// Routes method globs to an upstream.
    pub fn route(mut self, methods: &[&str], upstream: &str) -> Self {
        self.config.routes.push(Route::to(methods, upstream));
        self
    }

    /// Sets the `[legacy]` section.
    pub fn legacy(mut self, legacy: Legacy) -> Self {
        self.config.legacy = legacy;
        self
    }

    /// Passes the paths under each `(prefix, upstream)` through to that upstream
    /// (`[[passthrough]]`).
    pub fn passthrough(mut self, prefixes: &[(&str, &str)]) -> Self {
        self.config.passthrough = prefixes
            .iter()
            .map(|(prefix, upstream)| Passthrough {
                prefix: (*prefix).into(),
                upstream: (*upstream).into(),
            })
            .collect();
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

    /// POSTs a JSON value to `path`.
    pub async fn post_to(&self, path: &str, body: &Value) -> Answer {
        read(
            self.http
                .post(format!("{}{path}", self.base()))
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await
                .expect("the gateway answers"),
        )
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

/// The fake sid built from `examples/fake_sid.rs` (cargo builds examples before tests run).
pub fn fake_sid() -> String {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_wiregate"));
    let path = bin.parent().unwrap().join("examples").join("fake_sid");
    assert!(
        path.exists(),
        "{} is missing: run `cargo test`, which builds examples",
        path.display()
    );
    path.to_string_lossy().into_owned()
}

impl GatewayBuilder {
    /// Joins the replicas sharing `redis` (`[cluster]`) as `node`.
    pub fn cluster(self, redis: &str, node: &str) -> Self {
        let (redis, node) = (redis.to_owned(), node.to_owned());
        self.with(move |c| {
            c.cluster.redis = redis;
            c.cluster.node_id = node;
            c.cluster.lease_ms = 1_000;
        })
    }

    /// Enables the sid bridge over the fake sid on stdio; `tag` marks its children's command
    /// line so a test can find them.
    pub fn sid(self, tag: &str) -> Self {
        let tag = tag.to_owned();
        self.with(move |c| {
            c.sid.enabled = true;
            c.sid.command = vec![fake_sid(), "--raw".into(), "--tag".into(), tag];
            c.sid.keepalive_ms = 200;
        })
    }
}

/// One parsed SSE event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    /// `event:`.
    pub event: String,
    /// `id:`.
    pub id: String,
    /// `data:` as JSON.
    pub data: Value,
}

/// Reads an SSE response with a real SSE parser (eventsource-stream).
pub struct SseReader {
    inner: std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<eventsource_stream::Event, String>> + Send>,
    >,
    /// The response's headers.
    pub headers: reqwest::header::HeaderMap,
}

impl std::fmt::Debug for SseReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SseReader")
    }
}

impl SseReader {
    /// Wraps a streaming response.
    pub fn new(resp: reqwest::Response) -> Self {
        use eventsource_stream::Eventsource;
        use futures::StreamExt;
        let headers = resp.headers().clone();
        let inner = resp
            .bytes_stream()
            .eventsource()
            .map(|r| r.map_err(|e| e.to_string()));
        SseReader {
            inner: Box::pin(inner),
            headers,
        }
    }

    /// The next event, `None` when the stream ended; panics after `timeout` of silence.
    pub async fn next(&mut self, timeout: Duration) -> Option<SseEvent> {
        use futures::StreamExt;
        let ev = tokio::time::timeout(timeout, self.inner.next())
            .await
            .expect("an SSE event or the end of the stream in time")?
            .expect("a well-formed SSE stream");
        Some(SseEvent {
            event: ev.event,
            id: ev.id,
            data: serde_json::from_str(&ev.data).unwrap_or(Value::String(ev.data)),
        })
    }

    /// Events up to and including the next one with `params.final == true`.
    pub async fn until_final(&mut self, timeout: Duration) -> Vec<SseEvent> {
        let mut out = Vec::new();
        while let Some(e) = self.next(timeout).await {
            let last = e.data["params"]["final"] == true;
            out.push(e);
            if last {
                break;
            }
        }
        out
    }

    /// Every event until the stream ends.
    pub async fn collect(&mut self, timeout: Duration) -> Vec<SseEvent> {
        let mut out = Vec::new();
        while let Some(e) = self.next(timeout).await {
            out.push(e);
        }
        out
    }
}

impl TestGateway {
    /// Calls a JSON-RPC method and returns the whole answer.
    pub async fn call(&self, method: &str, params: Value) -> Value {
        self.rpc(
            &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
        )
        .await
        .json()
    }

    /// Opens an SSE stream with a GET.
    pub async fn sse_get(&self, path: &str, last_event_id: Option<&str>) -> SseReader {
        let mut req = self.http.get(format!("{}{path}", self.base()));
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        SseReader::new(resp)
    }

    /// Opens an SSE stream with a JSON-RPC POST (message/stream, tasks/resubscribe).
    pub async fn sse_post(&self, body: &Value, last_event_id: Option<&str>) -> SseReader {
        let mut req = self
            .http
            .post(format!("{}/rpc", self.base()))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        SseReader::new(resp)
    }
}

/// POSTs a JSON body to `url` on a task of its own, for calls that must be in flight while the
/// test does something else; the handle yields the JSON answer.
pub fn spawn_post(
    http: &reqwest::Client,
    url: String,
    body: Value,
) -> tokio::task::JoinHandle<Value> {
    let http = http.clone();
    tokio::spawn(async move {
        http.post(url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("the gateway answers")
            .json::<Value>()
            .await
            .expect("a JSON answer")
    })
}

impl TestGateway {
    /// Sends `text` to the fake sid in context `ctx` with `message/send` (a `flood ...` turn,
    /// say) and returns the call's answer when the turn is over.
    pub fn send_turn(&self, ctx: &str, text: &str) -> tokio::task::JoinHandle<Value> {
        let params = serde_json::json!({"message": {"parts": [{"text": text}]}, "contextId": ctx});
        spawn_post(
            &self.http,
            format!("{}/rpc", self.base()),
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params}),
        )
    }

    /// Starts a turn with `message/stream` and returns its SSE stream.
    pub async fn stream_message(&self, params: Value) -> SseReader {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": params});
        self.sse_post(&body, None).await
    }
}

/// `message/send` params with one text part.
pub fn text_message(text: &str) -> Value {
    serde_json::json!({"message": {"role": "user", "parts": [{"kind": "text", "text": text}]}})
}

/// Processes whose command line contains `tag`, and fake sid zombies of this process:
/// (pid, state letter from /proc/PID/stat).
pub fn processes_tagged(tag: &str) -> Vec<(u32, char)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(") ")
            .next()
            .and_then(|s| s.chars().next())
            .unwrap_or('?');
        let has_tag = String::from_utf8_lossy(&cmdline).contains(tag);
        let ppid: u32 = stat
            .rsplit(") ")
            .next()
            .and_then(|s| s.split_whitespace().nth(1))
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        let zombie_fake = state == 'Z' && stat.contains("(fake_sid)") && ppid == std::process::id();
        if has_tag || zombie_fake {
            out.push((pid, state));
        }
    }
    out
}

/// How a test event feed speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedMode {
    /// `application/x-ndjson`, one record a line.
    Ndjson,
    /// `text/event-stream`, `id:` and `data:` per record.
    Sse,
}

/// Each feed request's query string and `Last-Event-ID`.
pub type FeedRequests = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A programmable legacy event feed.
#[derive(Clone, Debug)]
pub struct FeedServer {
    /// Bound address.
    pub addr: SocketAddr,
    /// Each request's query string and `Last-Event-ID`.
    pub requests: FeedRequests,
    /// Connections accepted (counted for TLS feeds only).
    pub accepted: Arc<AtomicUsize>,
    /// The SNI name of each TLS handshake (TLS feeds only).
    pub sni: pki::Sni,
    /// Served over TLS (reached as `https://localhost`).
    tls: bool,
}

impl FeedServer {
    /// The source URL.
    pub fn url(&self) -> String {
        match self.tls {
            true => format!("https://localhost:{}/events", self.addr.port()),
            false => format!("http://{}/events", self.addr),
        }
    }
}

#[derive(Clone)]
struct FeedState {
    records: Arc<Vec<String>>,
    mode: FeedMode,
    drop_after: Option<usize>,
    honour_resume: bool,
    requests: FeedRequests,
}

/// Serves `records` (raw lines). The first connection ends after `drop_after` records when set;
/// later ones resume after the requested id (unless `honour_resume` is false) and stay open.
pub async fn feed_server(
    records: Vec<String>,
    mode: FeedMode,
    drop_after: Option<usize>,
    honour_resume: bool,
) -> FeedServer {
    serve_feed_records(records, mode, drop_after, honour_resume, None).await
}

/// Serves `records` as [`feed_server`] does, over TLS with `config`, the connection kept open.
pub async fn feed_server_tls(
    records: Vec<String>,
    mode: FeedMode,
    config: Arc<rustls::ServerConfig>,
) -> FeedServer {
    serve_feed_records(records, mode, None, true, Some(config)).await
}

async fn serve_feed_records(
    records: Vec<String>,
    mode: FeedMode,
    drop_after: Option<usize>,
    honour_resume: bool,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> FeedServer {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let state = FeedState {
        records: Arc::new(records),
        mode,
        drop_after,
        honour_resume,
        requests: requests.clone(),
    };
    let app = axum::Router::new()
        .route("/events", axum::routing::get(serve_feed))
        .with_state(state);
    let (addr, accepted, sni, tls) = match tls {
        Some(cfg) => {
            let s = pki::serve_tls(app, cfg).await;
            (s.addr, s.accepted, s.sni, true)
        }
        None => {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
            (addr, Arc::default(), Arc::default(), false)
        }
    };
    FeedServer {
        addr,
        requests,
        accepted,
        sni,
        tls,
    }
}

async fn serve_feed(
    State(s): State<FeedState>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> axum::response::Response {
    let query = uri.query().unwrap_or("").to_owned();
    let last = headers
        .get("last-event-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let first = {
        let mut r = s.requests.lock().unwrap();
        r.push((query.clone(), last.clone()));
        r.len() == 1
    };
    let after = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("after="))
        .map(str::to_owned)
        .or(last);
    let start = match (&after, s.honour_resume) {
        (Some(id), true) => s
            .records
            .iter()
            .position(|r| {
                serde_json::from_str::<Value>(r)
                    .ok()
                    .is_some_and(|v| v["event_id"].to_string().trim_matches('"') == id)
            })
            .map_or(0, |i| i + 1),
        _ => 0,
    };
    let end = match (first, s.drop_after) {
        (true, Some(k)) => k.min(s.records.len()),
        _ => s.records.len(),
    };
    let lines: Vec<String> = s.records[start.min(end)..end]
        .iter()
        .map(|r| match s.mode {
            FeedMode::Ndjson => format!("{r}\n"),
            FeedMode::Sse => {
                let id = serde_json::from_str::<Value>(r)
                    .ok()
                    .map(|v| v["event_id"].to_string().trim_matches('"').to_owned())
                    .unwrap_or_default();
                format!("id: {id}\ndata: {r}\n\n")
            }
        })
        .collect();
    let stay_open = !(first && s.drop_after.is_some());
    let body = async_stream::stream! {
        for l in lines {
            yield Ok::<_, std::convert::Infallible>(l);
        }
        if stay_open {
            std::future::pending::<()>().await;
        }
    };
    let ct = match s.mode {
        FeedMode::Ndjson => "application/x-ndjson",
        FeedMode::Sse => "text/event-stream",
    };
    ([("content-type", ct)], axum::body::Body::from_stream(body)).into_response()
}

impl SseReader {
    /// The next `n` events.
    pub async fn take(&mut self, n: usize, timeout: Duration) -> Vec<SseEvent> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            out.push(self.next(timeout).await.expect("the stream stays open"));
        }
        out
    }
}

/// One domain-event record as the legacy server writes it.
pub fn domain_record(id: u64, event_type: &str, plan: &str, data: Value) -> String {
    serde_json::json!({"event_id": id, "event_type": event_type, "plan_id": plan, "data": data,
                       "timestamp": "2026-11-29T20:00:00Z"})
    .to_string()
}

impl TestGateway {
    /// Opens a spec A2A stream: a JSON-RPC POST with `A2A-Version` when given.
    pub async fn a2a_stream(&self, body: &Value, version: Option<&str>) -> SseReader {
        let mut req = self
            .http
            .post(format!("{}/rpc", self.base()))
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .body(body.to_string());
        if let Some(v) = version {
            req = req.header("a2a-version", v);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        SseReader::new(resp)
    }

    /// Calls a method with `A2A-Version` when given; the whole answer and its HTTP status.
    pub async fn a2a_call(
        &self,
        method: &str,
        params: Value,
        version: Option<&str>,
    ) -> (u16, Value) {
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": "a-1", "method": method, "params": params});
        let headers: Vec<(&str, &str)> = version.map(|v| ("a2a-version", v)).into_iter().collect();
        let a = self.rpc_with(&body, &headers).await;
        (a.status, a.json())
    }
}
