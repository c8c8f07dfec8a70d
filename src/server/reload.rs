//! Reloading the configuration without a restart: on SIGHUP, or `POST /admin/reload` (what
//! `wiregate reload` sends), the file is read again and validated whole. A configuration with
//! errors is refused, each error logged with its key path, and the running one kept. A good one
//! is swapped in for new requests: routes, upstreams, pass-through, CORS, admin tokens, the
//! legacy rules, access logging and the TLS certificate. Requests in flight finish on the
//! configuration they started with, and the sid bridge, its contexts and every SSE subscriber go
//! on untouched. What only a restart can change is logged as such.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use super::{AppState, Live};
use crate::config::{Config, ConfigError};

/// The admin route that asks for a reload.
pub const PATH: &str = "/admin/reload";

/// What a reload did.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Applied {
    /// Whether the new configuration is being served.
    pub reloaded: bool,
    /// The errors that refused it, each `key.path: why`.
    pub errors: Vec<String>,
    /// Settings that changed but take effect only after a restart.
    pub restart_needed: Vec<String>,
}

type Ask = oneshot::Sender<Applied>;

/// Reload requests from the admin route to whoever re-reads the file ([`Reloader::watch`]).
#[derive(Clone, Debug)]
pub struct Requests {
    tx: mpsc::Sender<Ask>,
    rx: Arc<Mutex<Option<mpsc::Receiver<Ask>>>>,
}

impl Default for Requests {
    fn default() -> Self {
        let (tx, rx) = mpsc::channel(4);
        Requests {
            tx,
            rx: Arc::new(Mutex::new(Some(rx))),
        }
    }
}

impl Requests {
    /// Whether a watcher took the requests (else nobody would answer).
    fn watched(&self) -> bool {
        self.rx.lock().unwrap_or_else(|e| e.into_inner()).is_none()
    }
}

/// Swaps what is served.
#[derive(Debug)]
pub struct Reloader {
    live: Arc<ArcSwap<Live>>,
    tls: Option<Arc<ArcSwap<rustls::ServerConfig>>>,
    current: Mutex<Config>,
    requests: Requests,
}

impl Reloader {
    pub(super) fn new(
        live: Arc<ArcSwap<Live>>,
        tls: Option<Arc<ArcSwap<rustls::ServerConfig>>>,
        config: Config,
        requests: Requests,
    ) -> Self {
        Reloader {
            live,
            tls,
            current: Mutex::new(config),
            requests,
        }
    }

    /// Serves the validated `config` for every request from now on.
    pub fn apply(&self, config: &Config) -> Applied {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let mut restart_needed = restart_needed(&current, config);
        if let Some(tls) = &self.tls {
            if config.server.tls.enabled() {
                match crate::tls::server_config(&config.server.tls) {
                    Ok(c) => tls.store(c),
                    Err(e) => {
                        return Applied {
                            errors: vec![format!("server.tls.{}: {}", e.key, e.message)],
                            ..Applied::default()
                        }
                    }
                }
            }
        }
        if self.tls.is_some() != config.server.tls.enabled() {
            restart_needed.push("server.tls (turning TLS on or off)".into());
        }
        let old = self.live.load();
        let gateway = Arc::new(old.state.gateway.reloaded(config));
        self.live
            .store(Arc::new(Live::new(gateway, config, self.requests.clone())));
        *current = config.clone();
        for key in &restart_needed {
            tracing::warn!(key = %key, "changed in the configuration; takes effect after a restart");
        }
        tracing::info!("configuration reloaded");
        Applied {
            reloaded: true,
            errors: Vec::new(),
            restart_needed,
        }
    }

    /// Loads with `load` and applies, or logs every error with its key path and keeps the
    /// running configuration.
    pub fn load_and_apply(&self, load: &dyn Fn() -> Result<Config, ConfigError>) -> Applied {
        match load() {
            Ok(config) => self.apply(&config),
            Err(ConfigError(issues)) => {
                for i in &issues {
                    tracing::error!(key = %i.key, error = %i.message, "reload refused; the running configuration is kept");
                }
                Applied {
                    reloaded: false,
                    errors: issues.iter().map(|i| i.to_string()).collect(),
                    restart_needed: Vec::new(),
                }
            }
        }
    }

    /// Reloads with `load` on every SIGHUP and every `POST /admin/reload`, until the process
    /// ends; `then` runs after each successful reload (the binary swaps its log format there).
    pub fn watch(
        self: &Arc<Self>,
        load: impl Fn() -> Result<Config, ConfigError> + Send + Sync + 'static,
        then: impl Fn(&Config) + Send + Sync + 'static,
    ) -> std::io::Result<()> {
        let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
        let mut asks = self
            .requests
            .rx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(|| std::io::Error::other("already watched"))?;
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                let answer = tokio::select! {
                    s = hangups.recv() => match s {
                        Some(()) => None,
                        None => break,
                    },
                    a = asks.recv() => match a {
                        Some(a) => Some(a),
                        None => break,
                    },
                };
                tracing::info!("reloading the configuration");
                let applied = me.load_and_apply(&load);
                if applied.reloaded {
                    let current = me.current.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    then(&current);
                }
                if let Some(a) = answer {
                    let _ = a.send(applied);
                }
            }
        });
        Ok(())
    }
}

/// What changed between `old` and `new` that a reload cannot apply.
fn restart_needed(old: &Config, new: &Config) -> Vec<String> {
    let mut keys = Vec::new();
    let s = (&old.server, &new.server);
    for (key, changed) in [
        ("server.listen", s.0.listen != s.1.listen),
        (
            "server.worker_threads",
            s.0.worker_threads != s.1.worker_threads,
        ),
        (
            "server.max_connections",
            s.0.max_connections != s.1.max_connections,
        ),
        (
            "server.header_read_timeout_ms",
            s.0.header_read_timeout_ms != s.1.header_read_timeout_ms,
        ),
    ] {
        if changed {
            keys.push(key.to_owned());
        }
    }
    let differ = |a: serde_json::Result<serde_json::Value>, b| a.ok() != b;
    for (key, changed) in [
        (
            "sid",
            differ(
                serde_json::to_value(&old.sid),
                serde_json::to_value(&new.sid).ok(),
            ),
        ),
        (
            "events",
            differ(
                serde_json::to_value(&old.events),
                serde_json::to_value(&new.events).ok(),
            ),
        ),
        (
            "a2a",
            differ(
                serde_json::to_value(&old.a2a),
                serde_json::to_value(&new.a2a).ok(),
            ),
        ),
    ] {
        if changed {
            keys.push(key.to_owned());
        }
    }
    keys
}

/// `POST /admin/reload`: the admin route that reloads, answering what happened.
pub(super) async fn handler(
    State(state): State<AppState>,
    req: axum::extract::Request,
) -> Response {
    let peer = req.extensions().get::<crate::admin::Peer>().copied();
    let headers: &HeaderMap = req.headers();
    if let Err(e) = crate::admin::authorize(peer, headers, &state.admin_tokens) {
        return e.route_response();
    }
    if !state.reload.watched() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(serde_json::json!({"error": "this gateway reloads nothing: it was not started from a configuration watcher"})),
        )
            .into_response();
    }
    let (tx, rx) = oneshot::channel();
    if state.reload.tx.send(tx).await.is_err() {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    match rx.await {
        Ok(applied) => {
            let status = if applied.reloaded {
                StatusCode::OK
            } else {
                StatusCode::UNPROCESSABLE_ENTITY
            };
            (status, axum::Json(applied)).into_response()
        }
        Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}
