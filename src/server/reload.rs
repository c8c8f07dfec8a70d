//! Reloading the configuration without a restart: on SIGHUP, or `POST /admin/reload` (what
//! `wiregate reload` sends), the file is read again and validated whole. A configuration with
//! errors is refused, each error logged with its key path, and the running one kept. A good one
//! is swapped in for new requests: routes, upstreams, pass-through, CORS, admin tokens, the
//! legacy rules, access logging and the TLS certificate. Requests in flight finish on the
//! configuration they started with, and the sid bridge, its contexts and every SSE subscriber go
//! on untouched. What only a restart can change is logged as such, on every reload, for as long
//! as the file differs from what the process started with.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use super::status::Draining;
use super::{AppState, Live};
use crate::config::{Config, ConfigError};

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
pub(crate) struct Requests {
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
    /// What the process started with: the settings only a restart changes are still these.
    started: Config,
    current: Mutex<Config>,
    requests: Requests,
    /// The process's one drain flag, handed to every state a reload builds.
    draining: Draining,
}

impl Reloader {
    pub(super) fn new(
        live: Arc<ArcSwap<Live>>,
        tls: Option<Arc<ArcSwap<rustls::ServerConfig>>>,
        config: Config,
        requests: Requests,
        draining: Draining,
    ) -> Self {
        Reloader {
            live,
            tls,
            started: config.clone(),
            current: Mutex::new(config),
            requests,
            draining,
        }
    }

    /// Serves the validated `config` for every request from now on.
    pub fn apply(&self, config: &Config) -> Applied {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let mut restart_needed = restart_needed(&self.started, config);
        if let Some(tls) = &self.tls {
            if config.server.tls.enabled() {
                match crate::config::tls::server_config(&config.server.tls) {
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
        self.live.store(Arc::new(Live::new(
            gateway,
            config,
            self.requests.clone(),
            self.draining.clone(),
        )));
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

    /// Reloads with `load` on every SIGHUP, every `POST /admin/reload` and every message of
    /// `file_changes` ([`config_watch::changes`](super::config_watch::changes), `server.watch_config`), until
    /// the process ends; `then` runs after each successful reload (the binary swaps its log
    /// format there). The service manager hears of each ([`service`](super::service)).
    pub fn watch(
        self: &Arc<Self>,
        load: impl Fn() -> Result<Config, ConfigError> + Send + Sync + 'static,
        then: impl Fn(&Config) + Send + Sync + 'static,
        mut file_changes: Option<mpsc::Receiver<()>>,
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
        crate::util::background::spawn(async move {
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
                    Some(()) = changed(&mut file_changes) => None,
                };
                tracing::info!("reloading the configuration");
                super::service::reloading();
                let applied = me.load_and_apply(&load);
                super::service::ready();
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

/// The next file change, or never when no file is watched (or the watch ended).
async fn changed(changes: &mut Option<mpsc::Receiver<()>>) -> Option<()> {
    match changes {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// What differs between `old` (what the process started with) and `new` that a reload cannot
/// apply ([`RESTART_ONLY`](crate::config::restart::RESTART_ONLY): what the listener, the runtime
/// and shutdown read once at start, and the sections whose running services a reload keeps,
/// [`Gateway::reloaded`](crate::gateway::Gateway::reloaded)).
fn restart_needed(old: &Config, new: &Config) -> Vec<String> {
    let json = |c: &Config| serde_json::to_value(c).unwrap_or_default();
    crate::config::restart::changed(&json(old), &json(new))
}

/// `POST /admin/reload`: the admin route that reloads, answering what happened.
pub(super) async fn handler(
    State(state): State<AppState>,
    req: axum::extract::Request,
) -> Response {
    let peer = req.extensions().get::<crate::auth::admin::Peer>().copied();
    let headers: &HeaderMap = req.headers();
    if let Err(e) = crate::auth::admin::authorize(peer, headers, &state.admin_tokens) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_reload_cannot_apply_is_named() {
        let old = Config::default();
        assert!(restart_needed(&old, &old.clone()).is_empty());
        let mut new = old.clone();
        new.server.listen = "127.0.0.1:9".parse().unwrap();
        new.server.worker_threads = 3;
        new.server.runtime = match old.server.runtime {
            crate::config::Runtime::PerCore => crate::config::Runtime::WorkStealing,
            crate::config::Runtime::WorkStealing => crate::config::Runtime::PerCore,
        };
        new.server.max_connections = 7;
        new.server.header_read_timeout_ms = 5;
        new.server.shutdown_grace_ms = 1;
        new.server.drain_ms = 1;
        new.server.watch_config = !old.server.watch_config;
        new.sid.enabled = !old.sid.enabled;
        new.events.source = "http://127.0.0.1:9/events".into();
        new.a2a.enabled = !old.a2a.enabled;
        new.cluster.redis = "redis://127.0.0.1:9/0".into();
        // Every key of the table, each changed above.
        assert_eq!(
            restart_needed(&old, &new),
            crate::config::restart::RESTART_ONLY
        );
        let mut lease = old.clone();
        lease.cluster.lease_ms += 1;
        assert_eq!(restart_needed(&old, &lease), ["cluster"]);
    }

    #[test]
    fn what_a_reload_applies_needs_no_restart() {
        let old = Config::default();
        let mut new = old.clone();
        new.server.rpc_paths.push("/a2a".into());
        new.server.cors.allow_origins = vec!["https://app.example".into()];
        new.server.admin_tokens = vec!["a-token-of-sixteen-chars".into()];
        new.server.max_body_bytes += 1;
        new.server.body_read_timeout_ms += 1;
        new.server.trusted_proxies = vec!["10.0.0.0/8".into()];
        new.upstreams.push(crate::config::Upstream::new(
            "u",
            "http://127.0.0.1:9/rpc",
            crate::config::Dialect::Jsonrpc,
            5,
        ));
        new.routes.push(crate::config::Route::to(&["*"], "u"));
        new.passthrough.push(crate::config::Passthrough {
            prefix: "/".into(),
            upstream: "u".into(),
            auth: None,
            allow: Vec::new(),
        });
        new.log.access = !old.log.access;
        new.legacy.deprecation = !old.legacy.deprecation;
        new.events.keepalive_ms += 1;
        assert!(
            restart_needed(&old, &new).is_empty(),
            "{:?}",
            restart_needed(&old, &new)
        );
    }
}
