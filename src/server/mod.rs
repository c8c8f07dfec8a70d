//! HTTP routes and the listening socket; wiring only — the work is done by [`Gateway`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::routing::{any, get, post};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use arc_swap::ArcSwap;
use tower_http::cors::CorsLayer;

use crate::config::Config;
use crate::events::frames as sse_stream;
use crate::gateway::Gateway;
use crate::passthrough::Passthrough;
use crate::telemetry;

pub(crate) mod access;
mod calls;
mod card;
pub mod config_watch;
mod conn;
mod conn_service;
mod cors;
mod fallback;
mod h1;
pub(crate) mod listener;
pub(crate) mod reload;
pub mod service;
mod status;
mod streams;
mod workers;

use self::calls::{a2a_rpc, not_configured, rpc};

use card::{agent_card, agent_card_0_3};
use conn::accept_loop;
use conn_service::{ConnService, ConnServiceFuture, Lane};
use fallback::{not_rpc_method, pass_through};
use status::{healthz, metrics, migration, readyz};
use streams::{context_events, domain_events, task_events};

// Header names looked up on every call, made once rather than parsed from a string each time.
use crate::http::headers::X_REQUEST_ID;
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
    /// Whose word on the client's protocol and host the agent card takes
    /// (`server.trusted_proxies`, `server.forwarded_header`).
    proxies: crate::http::client_ip::Proxies,
    reload: reload::Requests,
    draining: status::Draining,
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
    fn new(
        gateway: Arc<Gateway>,
        config: &Config,
        reload: reload::Requests,
        draining: status::Draining,
    ) -> Self {
        AppState {
            passthrough: Passthrough::new(config, gateway.upstreams()),
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
            admin_tokens: config.server.admin_tokens.clone().into(),
            proxies: config.server.proxies(),
            reload,
            draining,
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

/// Every route of the HTTP contract. (`POST` to an RPC path is answered before routing, see
/// [`ConnService`]; their entries here take the other methods: the pass-through's, else 405.) What no
/// route takes goes to the pass-through, else 404.
fn routes(rpc_paths: &RpcPaths, state: &AppState) -> axum::Router<AppState> {
    let mut router = axum::Router::new();
    // Every path registered here must be one `is_own_path` knows, or the pass-through's fast
    // lane would take its requests.
    let mut route = |path: &str, handler: axum::routing::MethodRouter<AppState>| {
        debug_assert!(is_own_path(rpc_paths, path), "{path} is not in OWN_ROUTES");
        router = std::mem::take(&mut router).route(path, handler);
    };
    for p in rpc_paths.0.iter() {
        route(p, any(not_rpc_method));
        route(&format!("{p}/"), any(not_rpc_method));
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
    route(crate::http::routes::AGENT_CARD, get(agent_card));
    route(crate::http::routes::AGENT_CARD_0_2, get(agent_card_0_3));
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
    fn new(
        gateway: Arc<Gateway>,
        config: &Config,
        reload: reload::Requests,
        draining: status::Draining,
    ) -> Self {
        let state = AppState::new(gateway, config, reload, draining);
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
                    state.gateway.gate().clone(),
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

pub use crate::http::client_ip::OverTls;

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
    draining: status::Draining,
}

impl Running {
    /// The first step of shutdown: `/readyz` answers 503 from now on (and systemd hears the
    /// service is stopping), and everything else is served as before for `period`
    /// (`server.drain_ms`), so that load balancers and Kubernetes' endpoints see the readiness
    /// fail and stop sending new clients before the listener closes.
    pub async fn drain(&self, period: Duration) {
        self.draining.start();
        service::stopping();
        if !period.is_zero() {
            tracing::info!(
                drain_ms = period.as_millis() as u64,
                "draining: /readyz answers 503; still serving"
            );
            tokio::time::sleep(period).await;
        }
    }

    /// Stops accepting, lets in-flight calls finish, stops every sid child (which ends the
    /// event streams), all side by side and within `grace`: sid children still running then are
    /// killed, and calls still running are left to end with the process. What it can take
    /// beyond `grace` is the wait for a killed child to be reaped. Last, the spans waiting are
    /// sent (within `grace`, at most 2 s).
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
        // The spans of the last calls, sent before the process ends.
        gateway
            .tracer()
            .flush(grace.min(Duration::from_secs(2)))
            .await;
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

/// Binds `config.server.listen` and serves until stopped: on the current runtime, or with
/// `server.runtime = "per_core"` on worker threads of their own (this runtime running what
/// outlives a call). The address is bound first: a port in use fails the start before sid,
/// feeds or checks are started.
pub async fn serve(config: &Config) -> std::io::Result<Running> {
    let bound = match config.server.runtime {
        crate::config::Runtime::PerCore => Bound::PerCore(workers::bind(
            config.server.listen,
            config.server.worker_threads,
        )?),
        crate::config::Runtime::WorkStealing => {
            Bound::Shared(TcpListener::bind(config.server.listen).await?)
        }
    };
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
    let draining = status::Draining::default();
    let live = Arc::new(ArcSwap::from_pointee(Live::new(
        gateway,
        config,
        requests.clone(),
        draining.clone(),
    )));
    let front = ConnService::new(live.clone());
    let (stop, stopped) = watch::channel(false);
    let header_read_timeout = Duration::from_millis(config.server.header_read_timeout_ms);
    let max = config.server.max_connections;
    let (addr, task) = match bound {
        Bound::PerCore(sockets) => {
            let serving = workers::Serving {
                front,
                tls: tls.clone(),
                header_read_timeout,
                stopped,
                max_connections: max,
            };
            workers::start(sockets, serving).await?
        }
        Bound::Shared(listener) => {
            let addr = listener.local_addr()?;
            let listener = listener::Bounded::new(listener, max);
            let task = tokio::spawn(accept_loop(
                listener,
                front,
                tls.clone(),
                header_read_timeout,
                stopped,
            ));
            (addr, task)
        }
    };
    Ok(Running {
        addr,
        stop,
        task,
        reloader: Arc::new(reload::Reloader::new(
            live.clone(),
            tls,
            config.clone(),
            requests,
            draining.clone(),
        )),
        live,
        draining,
    })
}

/// The listening sockets of `server.runtime`, bound before anything else starts.
enum Bound {
    /// One socket per worker on the same address.
    PerCore(Vec<std::net::TcpListener>),
    /// One socket for the work-stealing runtime.
    Shared(TcpListener),
}

fn header_str<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}
