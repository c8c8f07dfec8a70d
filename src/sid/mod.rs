//! The sid bridge: JSON-RPC calls in, task updates out.
//!
//! The bridge owns the contexts (one sid child each, or the one attached `--listen` socket) and
//! the index from task ids to contexts. The task model lives in each context's
//! [`Tracker`](crate::model::task::Tracker), so a task started in one dialect can be read in
//! another.

mod calls;
mod carry;
pub(crate) mod context;
mod errors;
mod lines;
pub(crate) mod listing;
mod observe;
mod reach;
mod registry;
mod rpc_params;
mod sending;
mod shared;
mod streams;
mod tenancy;
mod transport;
mod turn_queue;
mod turn_spans;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::config::Sid as SidConfig;
use crate::events::frames::Timing;
use crate::model::error::GatewayError;
use context::Context;
use reach::Transport;

pub(crate) use rpc_params::IdParams;
use rpc_params::{params, SendParams};
pub(crate) use sending::Turn;
pub(crate) use streams::Opened;

/// `message/send`.
pub(crate) const SEND: &str = "message/send";
/// `message/stream`.
pub(crate) const STREAM: &str = "message/stream";
/// `tasks/get`.
pub(crate) const GET: &str = "tasks/get";
/// `tasks/cancel`.
pub(crate) const CANCEL: &str = "tasks/cancel";
/// `tasks/resubscribe`.
pub(crate) const RESUBSCRIBE: &str = "tasks/resubscribe";
/// Prefix of raw ops.
pub(crate) const RAW_PREFIX: &str = "_sid/";

/// How long a stopping sid gets between EOF on stdin and a kill.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// What [`Bridge::on_lost_tasks`] calls, with the ids of the tasks failed.
pub(crate) type LostHook = Box<dyn Fn(Vec<String>) + Send + Sync>;

/// A [`LostHook`], kept.
struct Hook(LostHook);

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LostHook")
    }
}

/// See the module docs.
#[derive(Debug)]
pub struct Bridge {
    cfg: SidConfig,
    contexts: Mutex<HashMap<String, Arc<Context>>>,
    tasks: Mutex<HashMap<String, String>>,
    attached: Option<Arc<Context>>,
    /// With `[cluster]`: Redis, and the local copies of other replicas' context logs.
    cluster: Option<shared::Shared>,
    /// Told the tasks this replica fails taking over a lost replica's context (see
    /// [`on_lost_tasks`](Self::on_lost_tasks)).
    lost_hook: std::sync::OnceLock<Hook>,
    /// Whether contexts and tasks belong to their callers ([`tenancy`]).
    tenancy: std::sync::atomic::AtomicBool,
}

impl Bridge {
    /// Starts the bridge (attaching to `sid.connect` when set) and its idle reaper; with a
    /// cluster link, contexts' events and tasks are shared with the other replicas.
    pub(crate) fn start(cfg: SidConfig, link: Option<Arc<crate::cluster::Link>>) -> Arc<Self> {
        let cluster = link.map(|l| shared::Shared::new(l, &cfg));
        let attached = (!cfg.connect.is_empty()).then(|| {
            let ctx = Context::new(
                uuid::Uuid::new_v4().to_string(),
                Transport::Socket(cfg.connect.clone()),
                cfg.replay_events,
                cfg.max_subscribers,
                cfg.max_queued_requests,
                Duration::from_millis(cfg.lag_grace_ms),
                cfg.max_line_bytes,
            );
            ctx.spawn_socket(
                cfg.connect.clone(),
                Duration::from_millis(cfg.reconnect_grace_ms),
            );
            ctx
        });
        let bridge = Arc::new(Bridge {
            contexts: Mutex::new(attached.iter().map(|c| (c.id.clone(), c.clone())).collect()),
            tasks: Mutex::new(HashMap::new()),
            attached,
            cluster,
            lost_hook: std::sync::OnceLock::new(),
            tenancy: Default::default(),
            cfg,
        });
        if let Some(a) = &bridge.attached {
            if let Err(e) = bridge.export(a) {
                tracing::error!(error = %e, "cannot share the attached context's events");
            }
        }
        if let Some(sh) = &bridge.cluster {
            let (weak, every) = (Arc::downgrade(&bridge), shared::sweep_every(&sh.link));
            crate::util::background::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let Some(b) = weak.upgrade() else { return };
                    if let Err(e) = b.sweep().await {
                        tracing::debug!(error = %e, "the sweep for lost replicas' contexts failed");
                    }
                }
            });
        }
        let weak = Arc::downgrade(&bridge);
        let period = Duration::from_millis((bridge.cfg.idle_timeout_ms / 4).clamp(50, 5_000));
        crate::util::background::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                let Some(b) = weak.upgrade() else { return };
                b.reap_idle().await;
            }
        });
        bridge
    }

    /// Has `hook` called with the ids of the tasks this replica fails when it takes over a
    /// context whose replica was lost, once their `failed` update is published: the layer
    /// above keeps what the bridge does not (the tasks' push webhooks). The first hook stays.
    pub fn on_lost_tasks(&self, hook: LostHook) {
        let _ = self.lost_hook.set(Hook(hook));
    }

    /// The cluster link, with `[cluster]`.
    pub(crate) fn cluster_link(&self) -> Option<&Arc<crate::cluster::Link>> {
        self.cluster.as_ref().map(|sh| &sh.link)
    }

    #[inline]
    fn contexts(&self) -> MutexGuard<'_, HashMap<String, Arc<Context>>> {
        self.contexts.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[inline]
    fn task_index(&self) -> MutexGuard<'_, HashMap<String, String>> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// SSE timing for this bridge's streams.
    pub fn timing(&self) -> Timing {
        Timing {
            keepalive: Duration::from_millis(self.cfg.keepalive_ms),
            retry_ms: 2000,
        }
    }

    /// Checks `Authorization: Bearer` against `sid.bearer_tokens` (when any are configured).
    pub fn authorize(&self, authorization: Option<&str>) -> Result<(), GatewayError> {
        if self.cfg.bearer_tokens.is_empty() {
            return Ok(());
        }
        let given = authorization
            .and_then(|a| crate::wire::authorization::token_of(a.as_bytes(), "bearer"))
            .unwrap_or_default();
        let ok = self
            .cfg
            .bearer_tokens
            .iter()
            .any(|t| crate::util::secret::same(t.as_bytes(), given));
        ok.then_some(()).ok_or(GatewayError::Unauthorized)
    }

    /// Stops every sid and closes every stream, giving each sid at most `grace` (and never more
    /// than its usual stop grace) to exit before it is killed.
    pub async fn shutdown(&self, grace: Duration) {
        let grace = STOP_GRACE.min(grace);
        let all: Vec<Arc<Context>> = self.contexts().values().cloned().collect();
        futures_util::future::join_all(all.iter().map(|c| async move {
            c.close();
            c.stop(grace).await;
        }))
        .await;
    }

    /// Whether every context is healthy (running, or stopped on purpose).
    pub fn healthy(&self) -> bool {
        self.attached.as_ref().is_none_or(|a| a.is_running())
    }
}
