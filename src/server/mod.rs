//! HTTP routes and the listening socket; wiring only — the work is done by [`Gateway`].

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use arc_swap::ArcSwap;
use tower_http::cors::CorsLayer;

use crate::config::Config;
use crate::events::frames as sse_stream;
use crate::gateway::{Binding, Gateway};
use crate::http::headers::{Headers, RawHead};
use crate::http::reply::Reply;
use crate::http::scope;
use crate::http::trace::TraceContext;
use crate::model::error::GatewayError;
use crate::passthrough::Passthrough;
use crate::telemetry;
use crate::telemetry::activity::Activity;

pub(crate) mod access;
mod calls;
mod conn;
mod cors;
mod h1;
pub(crate) mod listener;
pub(crate) mod reload;

mod streams;

use self::calls::{a2a_rpc, into_response, not_configured, rpc, rpc_call, rpc_reply};

use conn::accept_loop;
use streams::{context_events, domain_events, task_events};

// Header names looked up on every call, made once rather than parsed from a string each time.
const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
const A2A_VERSION: HeaderName = HeaderName::from_static(crate::model::a2a::VERSION_HEADER);

/// Shared state of the routes: what one configuration builds. A reload builds a new one;
/// requests in flight keep the one they started with.
#[derive(Clone, Debug)]
pub struct AppState {
    gateway: Arc<Gateway>,
    /// When the gateway started: the agent card's `Last-Modified` (it comes from the
    /// configuration, read at start).
    started: HeaderValue,
    metrics: PrometheusHandle,
    max_body: usize,
    body_timeout: Duration,
    events_timing: sse_stream::Timing,
    passthrough: Passthrough,
    admin_tokens: Arc<[String]>,
    reload: reload::Requests,
}

impl axum::extract::FromRef<AppState> for Arc<Gateway> {
    fn from_ref(state: &AppState) -> Self {
        state.gateway.clone()
    }
}

impl axum::extract::FromRef<AppState> for crate::console::AdminTokens {
    fn from_ref(state: &AppState) -> Self {
        crate::console::AdminTokens(state.admin_tokens.clone())
    }
}

impl AppState {
    fn new(gateway: Arc<Gateway>, config: &Config, reload: reload::Requests) -> Self {
        AppState {
            gateway,
            started: HeaderValue::from_str(&httpdate::fmt_http_date(std::time::SystemTime::now()))
                .expect("an HTTP date is a header value"),
            metrics: telemetry::install(),
            max_body: config.server.max_body_bytes,
            body_timeout: Duration::from_millis(config.server.body_read_timeout_ms),
            events_timing: sse_stream::Timing {
                keepalive: Duration::from_millis(config.events.keepalive_ms),
                retry_ms: config.events.reconnect_ms.max(1000),
            },
            passthrough: Passthrough::new(config),
            admin_tokens: config.server.admin_tokens.clone().into(),
            reload,
        }
    }
}

/// The paths of `server.rpc_paths`, each matched with or without one trailing slash (A2A
/// clients build `/rpc/` from a card's URL); and A2A's JSON-RPC binding (`a2a.jsonrpc_path`,
/// when served), which the router answers, not the fast path.
#[derive(Clone, Debug)]
struct RpcPaths(Arc<[Box<str>]>, Option<Box<str>>);

impl RpcPaths {
    fn new(paths: &[String], a2a: Option<&str>) -> Self {
        RpcPaths(
            paths
                .iter()
                .map(|p| p.trim_end_matches('/').into())
                .collect(),
            a2a.map(Into::into),
        )
    }

    fn matches(&self, path: &str) -> bool {
        let path = path.strip_suffix('/').unwrap_or(path);
        self.0.iter().any(|p| **p == *path)
    }

    /// Whether `path` is an RPC path or lies below one, or is A2A's binding.
    fn covers(&self, path: &str) -> bool {
        let a2a = self
            .1
            .as_deref()
            .is_some_and(|a| path == a || (a != "/" && path.strip_prefix(a) == Some("/")));
        a2a || self.0.iter().any(|p| {
            path.strip_prefix(&**p)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
    }
}

/// Whether the gateway may answer `path` itself: an RPC path, or one of its own routes
/// ([`OWN_ROUTES`](crate::http::routes::OWN_ROUTES)). A path it never answers, under a
/// pass-through prefix, goes straight there (the router, its handler adapters and the request's
/// extensions skipped); [`routes`] checks each route it registers against this (in debug
/// builds, so every test run).
fn is_own_path(rpc_paths: &RpcPaths, path: &str) -> bool {
    rpc_paths.covers(path) || crate::http::routes::is_own_route(path)
}

/// Every route of the HTTP contract. (`POST` to an RPC path is answered before routing when no
/// CORS applies, see [`Front`]; their entries here serve it otherwise, and pass other methods
/// to the pass-through or answer 405.) What no route takes goes to the pass-through, else 404.
fn routes(rpc_paths: &RpcPaths, state: &AppState) -> axum::Router<AppState> {
    let mut router = axum::Router::new();
    // Every path registered here must be one `is_own_path` knows, or the pass-through's fast
    // lane would take its requests.
    let mut route = |path: &str, handler: axum::routing::MethodRouter<AppState>| {
        debug_assert!(is_own_path(rpc_paths, path), "{path} is not in OWN_ROUTES");
        router = std::mem::take(&mut router).route(path, handler);
    };
    for p in rpc_paths.0.iter() {
        let rpc_route = || post(rpc).fallback(not_rpc_method);
        route(p, rpc_route());
        route(&format!("{p}/"), rpc_route());
    }
    // A2A's JSON-RPC binding, with its own rules (see `Binding`).
    if let Some(p) = rpc_paths.1.as_deref() {
        let a2a_route = || post(a2a_rpc).fallback(not_rpc_method);
        route(p, a2a_route());
        if p != "/" {
            route(&format!("{p}/"), a2a_route());
        }
    }
    route("/tasks/{task_id}/events", get(task_events));
    route("/contexts/{context_id}/events", get(context_events));
    route("/events", get(domain_events));
    route(crate::a2a::card::PATH, get(agent_card));
    route(crate::a2a::card::LEGACY_PATH, get(agent_card_0_3));
    route("/healthz", get(healthz));
    route("/readyz", get(readyz));
    route("/metrics", get(metrics));
    route("/migration", get(migration));
    route(crate::http::routes::ADMIN_RELOAD, post(reload::handler));
    route(crate::http::routes::CONSOLE, get(crate::console::page));
    route("/console/assets/{file}", get(crate::console::asset));
    debug_assert!(is_own_path(rpc_paths, "/console/api"));
    router
        .nest("/console/api", console_api(state))
        .fallback(pass_through)
}

/// The console's data: its own routes, and the RPC and event-stream handlers served again
/// behind the admin rule (the page reads nothing else).
fn console_api(state: &AppState) -> axum::Router<AppState> {
    crate::console::api()
        .route("/rpc", post(rpc))
        .route("/tasks/{task_id}/events", get(task_events))
        .route("/contexts/{context_id}/events", get(context_events))
        .route("/events", get(domain_events))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::console::admin_only,
        ))
}

/// What one configuration serves: its routes and state, and the CORS rule around them.
struct Live {
    state: AppState,
    router: axum::Router,
    rpc_paths: RpcPaths,
    cors: Option<CorsLayer>,
    access: bool,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live").finish_non_exhaustive()
    }
}

impl Live {
    fn new(gateway: Arc<Gateway>, config: &Config, reload: reload::Requests) -> Self {
        let state = AppState::new(gateway, config, reload);
        let a2a_path = config
            .a2a
            .jsonrpc_path()
            .filter(|_| config.sid.enabled && config.a2a.enabled);
        let rpc_paths = RpcPaths::new(&config.server.rpc_paths, a2a_path);
        let cors = cors::layer(&config.server.cors);
        let mut router = routes(&rpc_paths, &state)
            .nest_service(
                crate::http::routes::A2A_REST,
                crate::a2a::rest::router(
                    state.gateway.a2a_shared(),
                    state.gateway.bridge().cloned(),
                ),
            )
            .with_state(state.clone());
        if let Some(c) = &cors {
            router = cors::around(router, c);
        }
        Live {
            router,
            rpc_paths,
            state,
            cors,
            access: config.log.access,
        }
    }
}

/// The service a connection is served by: `POST /rpc`, nearly every request a gateway sees, goes
/// straight to its handler; everything else through the router. Routing, the handler's service
/// adapters and their boxing cost about as much per call as the upstream exchange itself
/// (measured with callgrind: about 4k of 42k instructions per proxied call).
#[derive(Clone)]
struct Front {
    /// The configuration being served; a reload swaps it.
    live: Arc<ArcSwap<Live>>,
    /// On an HTTP/2 connection, its calls in flight (HTTP/1's idle time is hyper's to time).
    activity: Option<Arc<Activity>>,
    /// The connection's client, put on each of its requests for the routes that ask.
    peer: Option<crate::auth::admin::Peer>,
    /// Whether the connection is TLS.
    tls: bool,
}

impl Front {
    fn new(live: Arc<ArcSwap<Live>>) -> Self {
        Front {
            live,
            activity: None,
            peer: None,
            tls: false,
        }
    }

    /// The same service for one connection: its client, whether it is TLS, and its calls
    /// counted into `activity`.
    fn tracking(
        &self,
        activity: Option<Arc<Activity>>,
        peer: Option<crate::auth::admin::Peer>,
        tls: bool,
    ) -> Self {
        Front {
            activity,
            peer,
            tls,
            live: self.live.clone(),
        }
    }
}

/// Whether a request arrived over TLS (a request extension, for the forwarding headers).
#[derive(Clone, Copy, Debug)]
pub struct OverTls;

type FrontFuture = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

impl hyper::service::Service<hyper::Request<hyper::body::Incoming>> for Front {
    type Response = Response;
    type Error = Infallible;
    type Future = FrontFuture;

    fn call(&self, req: hyper::Request<hyper::body::Incoming>) -> FrontFuture {
        let live = self.live.load_full();
        let req = req.map(Body::new);
        let lane = live.lane(req.method(), req.uri().path());
        self.respond(live, req, lane, None)
    }
}

/// Which way a request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lane {
    /// `POST` to an RPC path, no CORS configured: straight to [`rpc_call`].
    Rpc,
    /// A path the gateway never answers itself, under a pass-through prefix, no CORS configured:
    /// straight to the pass-through.
    Passthrough,
    /// Everything else: the router.
    Router,
}

impl Live {
    /// The lane of a request with `method` to `path` under this configuration.
    fn lane(&self, method: &axum::http::Method, path: &str) -> Lane {
        if self.cors.is_some() {
            Lane::Router
        } else if method == axum::http::Method::POST && self.rpc_paths.matches(path) {
            Lane::Rpc
        } else if !is_own_path(&self.rpc_paths, path) && self.state.passthrough.takes(path) {
            Lane::Passthrough
        } else {
            Lane::Router
        }
    }
}

impl Front {
    /// Answers `req` by its `lane` under `live`, the configuration it was read under: its trace
    /// context and scope, its access line, its call counted on an HTTP/2 connection. hyper's
    /// connections call it through [`Service`](hyper::service::Service), the HTTP/1 loop of
    /// [`h1`] directly.
    /// `read` is the body when the caller has already read it (or failed to, within the
    /// limit and the body read timeout); the request's own body is then empty and unused.
    fn respond(
        &self,
        live: Arc<Live>,
        mut req: axum::extract::Request,
        lane: Lane,
        read: Option<Result<bytes::Bytes, GatewayError>>,
    ) -> FrontFuture {
        let (trace, state) = TraceContext::for_call_with_state(req.headers());
        let fast = lane == Lane::Rpc;
        let passed = lane == Lane::Passthrough;
        // What the routes may ask of the connection (the admin rule, the forwarding headers);
        // `POST /rpc` asks nothing, and skips building the extensions map.
        if !fast && !passed {
            if let Some(peer) = self.peer {
                req.extensions_mut().insert(peer);
            }
            if self.tls {
                req.extensions_mut().insert(OverTls);
            }
        }
        let access = live.access.then(|| {
            (
                req.method().clone(),
                req.uri().path().to_owned(),
                Instant::now(),
            )
        });
        // The call counts as in flight until its answer's body is done or dropped.
        let call = self
            .activity
            .as_ref()
            .map(|a| crate::telemetry::activity::Call::begin(a.clone()));
        // Boxed on its own before it is wrapped: the handlers' futures are large, and every
        // wrapper that held one by value would copy it (measured with callgrind: tens of
        // thousands of instructions of memcpy per call).
        let handled: Pin<Box<dyn Future<Output = Response> + Send>> = if fast {
            Box::pin(rpc_call(
                live.state.clone(),
                req,
                read,
                self.peer,
                Binding::Gateway,
            ))
        } else if passed {
            let passthrough = live.state.passthrough.clone();
            let origin = crate::passthrough::Origin {
                peer: self.peer.map(|p| p.0),
                tls: self.tls,
            };
            Box::pin(async move {
                match passthrough.forward(req, origin).await {
                    Ok(resp) => resp,
                    Err(_) => StatusCode::NOT_FOUND.into_response(),
                }
            })
        } else {
            let router = live.router.clone();
            Box::pin(async move {
                match tower::ServiceExt::oneshot(router, req).await {
                    Ok(mut resp) => {
                        // axum writes `content-length: 0` on every empty answer, a 204 too,
                        // which RFC 9110 forbids; hyper's HTTP/1 drops it, its HTTP/2 sends
                        // it. Dropped here, so every writer's 204 is the same.
                        if resp.status() == StatusCode::NO_CONTENT {
                            resp.headers_mut().remove(header::CONTENT_LENGTH);
                        }
                        resp
                    }
                    Err(never) => match never {},
                }
            })
        };
        Box::pin(async move {
            let (mut resp, note) = scope::run(trace, state, access.is_some(), handled).await;
            if let Some((method, path, started)) = access {
                let line = crate::server::access::Line {
                    method,
                    path,
                    status: resp.status(),
                    started,
                    trace_id: trace.trace_id_hex(),
                    note,
                };
                resp = resp.map(|b| Body::new(crate::server::access::Counted::new(b, line)));
            }
            if let Some(call) = call {
                resp = resp.map(|b| Body::new(call.guard_body(b)));
            }
            Ok(resp)
        })
    }
}

/// What the HTTP/1 loop awaits for a call it answers itself: the reply and its request id.
type ReplyFuture = Pin<Box<dyn Future<Output = (Reply, calls::RequestId)> + Send>>;

impl Front {
    /// A `POST` to an RPC path that the HTTP/1 loop answers itself, its body read: the call
    /// (boxed on its own, as [`Front::respond`] boxes it: a wrapper holding it by value would
    /// copy it) and the trace context and `tracestate` to run it in (the loop runs it in [`scope::run`] on its
    /// own stack). It is answered with the [`Reply`] for the loop to write: no response object,
    /// no answer header map. Only without the access log, whose line [`Front::respond`] ties to
    /// the answer's body; the loop never counts calls in flight (that is HTTP/2's idle rule).
    fn rpc_reply(
        &self,
        live: Arc<Live>,
        head: RawHead,
        read: Result<bytes::Bytes, GatewayError>,
    ) -> (TraceContext, Option<HeaderValue>, ReplyFuture) {
        debug_assert!(!live.access && self.activity.is_none());
        let (trace, state) = TraceContext::for_call_with_state(&head);
        let peer = self.peer;
        let call = Box::pin(async move {
            rpc_reply(
                &live.state,
                Headers::Head(&head),
                read,
                peer,
                Binding::Gateway,
            )
            .await
        });
        (trace, state, call)
    }
}

/// A running gateway: its address, the means to reload and to stop it.
#[derive(Debug)]
pub struct Running {
    /// The bound address (port 0 resolved).
    pub addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: JoinHandle<std::io::Result<()>>,
    /// What requests are served with now: read afresh by every accessor, so a reload is seen.
    live: Arc<ArcSwap<Live>>,
    reloader: Arc<reload::Reloader>,
}

impl Running {
    /// Stops accepting, lets in-flight calls finish, stops every sid child (which ends the
    /// event streams), all side by side and within `grace`: sid children still running then are
    /// killed, and calls still running are left to end with the process. What it can take
    /// beyond `grace` is the wait for a killed child to be reaped.
    pub async fn shutdown(self, grace: Duration) {
        let _ = self.stop.send(true);
        let gateway = self.gateway();
        if let Some(f) = gateway.feed() {
            f.close();
        }
        let bridge = async {
            if let Some(b) = gateway.bridge() {
                b.shutdown(grace).await;
            }
        };
        let mut task = self.task;
        let calls = async {
            if tokio::time::timeout(grace, &mut task).await.is_err() {
                task.abort();
            }
        };
        tokio::join!(bridge, calls);
    }

    /// The gateway being served now: the last configuration applied (its upstreams, routes
    /// and migration figures). Its sid bridge and event feed are the first one's, shared by
    /// every reloaded gateway.
    pub fn gateway(&self) -> Arc<Gateway> {
        self.live.load().state.gateway.clone()
    }

    /// Serves `config` from now on (see [`reload::Reloader::apply`]).
    pub fn reload(&self, config: &Config) -> reload::Applied {
        self.reloader.apply(config)
    }

    /// The reloader, for a loop that re-reads the configuration on a signal or request.
    pub fn reloader(&self) -> &Arc<reload::Reloader> {
        &self.reloader
    }
}

/// Binds `config.server.listen` and serves until stopped.
pub async fn serve(config: &Config) -> std::io::Result<Running> {
    let listener = TcpListener::bind(config.server.listen).await?;
    let addr = listener.local_addr()?;
    let tls = match config.server.tls.enabled() {
        true => Some(Arc::new(ArcSwap::new(
            crate::config::tls::server_config(&config.server.tls).map_err(|e| {
                std::io::Error::other(format!("server.tls.{}: {}", e.key, e.message))
            })?,
        ))),
        false => None,
    };
    let gateway = Arc::new(Gateway::new(config));
    let requests = reload::Requests::default();
    let live = Arc::new(ArcSwap::from_pointee(Live::new(
        gateway,
        config,
        requests.clone(),
    )));
    let front = Front::new(live.clone());
    let (stop, stopped) = watch::channel(false);
    let listener = crate::server::listener::Bounded::new(listener, config.server.max_connections);
    let header_read_timeout = Duration::from_millis(config.server.header_read_timeout_ms);
    let task = tokio::spawn(accept_loop(
        listener,
        front,
        tls.clone(),
        header_read_timeout,
        stopped,
    ));
    Ok(Running {
        addr,
        stop,
        task,
        reloader: Arc::new(reload::Reloader::new(
            live.clone(),
            tls,
            config.clone(),
            requests,
        )),
        live,
    })
}

/// The A2A agent card: the 1.0 card, with the 0.3 card's fields for `A2A-Version: 0.3`.
async fn agent_card(state: State<AppState>, headers: HeaderMap) -> Response {
    let old = header_str(&headers, &A2A_VERSION)
        .and_then(crate::model::a2a::Version::parse)
        .is_some_and(|v| v == crate::model::a2a::Version::V0_3);
    card_response(state, headers, old)
}

/// The card at the older well-known path, read by 0.3-only clients.
async fn agent_card_0_3(state: State<AppState>, headers: HeaderMap) -> Response {
    card_response(state, headers, true)
}

fn card_response(State(state): State<AppState>, headers: HeaderMap, with_0_3: bool) -> Response {
    let Some(a2a) = state.gateway.a2a() else {
        return not_configured("no agent card: A2A needs sid.enabled and a2a.enabled");
    };
    match a2a.card(header_str(&headers, &header::HOST), with_0_3) {
        Some(card) => {
            let bytes = serde_json::to_vec(&card).expect("a card always serialises");
            let etag = crate::a2a::card::etag(&bytes);
            let mut resp = (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                bytes,
            )
                .into_response();
            let h = resp.headers_mut();
            if let Ok(v) = HeaderValue::from_str(&etag) {
                h.insert(header::ETAG, v);
            }
            h.insert(header::LAST_MODIFIED, state.started.clone());
            h.insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=300"),
            );
            h.insert(header::VARY, HeaderValue::from_static("host, a2a-version"));
            resp
        }
        None => (
            StatusCode::BAD_REQUEST,
            axum::Json(
                json!({"error": "the Host header is not a valid authority; set a2a.public_url"}),
            ),
        )
            .into_response(),
    }
}

/// A method other than `POST` on an RPC path: the pass-through's when one takes the path,
/// else 405.
async fn not_rpc_method(State(state): State<AppState>, req: axum::extract::Request) -> Response {
    match forward(&state, req).await {
        Ok(resp) => resp,
        Err(_) => (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, HeaderValue::from_static("POST"))],
        )
            .into_response(),
    }
}

/// What no route takes: the pass-through's when a prefix takes the path, else 404.
async fn pass_through(State(state): State<AppState>, req: axum::extract::Request) -> Response {
    match forward(&state, req).await {
        Ok(resp) => resp,
        Err(_) => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn forward(
    state: &AppState,
    req: axum::extract::Request,
) -> Result<Response, axum::extract::Request> {
    let origin = crate::passthrough::Origin {
        peer: req
            .extensions()
            .get::<crate::auth::admin::Peer>()
            .map(|p| p.0),
        tls: req.extensions().get::<OverTls>().is_some(),
    };
    state.passthrough.forward(req, origin).await
}

async fn healthz() -> Response {
    axum::Json(json!({"status": "ok"})).into_response()
}

async fn readyz(State(state): State<AppState>) -> Response {
    let ups = state.gateway.upstreams();
    let checks = futures_util::future::join_all(ups.iter().map(|u| u.reachable())).await;
    let report: serde_json::Map<String, serde_json::Value> = ups
        .iter()
        .zip(&checks)
        .map(|(u, ok)| {
            (
                u.name().to_owned(),
                json!(if *ok { "reachable" } else { "unreachable" }),
            )
        })
        .collect();
    let sid_ok = state.gateway.bridge().is_none_or(|b| b.healthy());
    let cluster = state.gateway.cluster();
    let ready = checks.iter().all(|ok| *ok) && sid_ok && cluster.is_none_or(|c| c.is_up());
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut body = json!({"ready": ready, "upstreams": report});
    if let Some(c) = cluster {
        body["cluster"] = c.readiness();
    }
    (status, axum::Json(body)).into_response()
}

/// `GET /migration`: splits, shadows, rollbacks and callers (admin callers only).
async fn migration(State(state): State<AppState>, req: axum::extract::Request) -> Response {
    let peer = req.extensions().get::<crate::auth::admin::Peer>().copied();
    if let Err(e) = crate::auth::admin::authorize(peer, req.headers(), &state.admin_tokens) {
        return e.route_response();
    }
    axum::Json(state.gateway.migration().report()).into_response()
}

async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}

fn header_str<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}
