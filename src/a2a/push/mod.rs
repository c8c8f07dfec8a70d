//! Push notifications: a task's updates POSTed to the webhooks its client configured.
//!
//! Configurations are kept per task, bounded per task ([`MAX_CONFIGS_PER_TASK`]) and in total
//! ([`MAX_TASKS`]). The first configuration of a task starts one watcher, a subscriber of the
//! task's context like any stream, which turns each update into the 1.0 `StreamResponse` (or,
//! for a 0.3 configuration, the task) and hands it to each webhook's bounded queue without ever
//! waiting: a webhook that cannot keep up loses updates (counted), never slows the task. Each
//! webhook has one sender, POSTing through the crate's upstream HTTP client with the
//! configured `Authorization`, retrying with backoff.
//!
//! Server-side request forgery: a webhook whose host is, or resolves to, an address of the IANA
//! special-purpose registries (loopback, private, link-local, CGNAT, NAT64 of those, 6to4,
//! documentation, benchmarking, reserved, multicast: [`crate::outbound::policy`]) is refused unless
//! `a2a.push_allow_private`; the check runs when the configuration is made and again before
//! every try, and the try connects to the addresses that check resolved, never to a second
//! lookup's (`deliver.rs`). An `https://` webhook is dialled as any `https://` upstream is:
//! verified against the platform's roots, SNI and certificate name its host.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

mod deliver;
mod shared;

use self::deliver::deliver;
use super::shapes::{self, UpdateWriter};
use super::Version;
use crate::events::Read;
use crate::model::error::GatewayError;
use crate::outbound::Policy;
use crate::sid::Bridge;

/// Webhooks one task may have.
pub(crate) const MAX_CONFIGS_PER_TASK: usize = 8;
/// Tasks with webhooks at once.
pub(crate) const MAX_TASKS: usize = 1024;
/// Notifications waiting per webhook; more are dropped (and counted).
pub(crate) const QUEUE: usize = 64;
/// Tries per notification.
pub(crate) const ATTEMPTS: u32 = 3;
/// The first retry's wait; it doubles.
const BACKOFF: Duration = Duration::from_millis(200);
/// One POST's time limit (the spec recommends 10 to 30 s).
const TIMEOUT_MS: u64 = 10_000;
/// A webhook's answer is read up to this size and dropped.
const MAX_ANSWER: usize = 64 * 1024;

/// How a webhook authenticates the gateway: `Authorization: {scheme} {credentials}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Auth {
    scheme: String,
    credentials: String,
}

/// One webhook of one task.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    id: String,
    task_id: String,
    url: String,
    token: Option<String>,
    auth: Option<Auth>,
    /// The version it was made in: what it is answered, and what it is sent, in.
    version: Version,
    /// Its queue; dropped when the task's updates end (or with the configuration), which ends
    /// its sender once drained.
    tx: Option<mpsc::Sender<Bytes>>,
    /// Cleared when the client deletes it: nothing more goes out, queued or not.
    live: Arc<AtomicBool>,
}

impl Config {
    /// The configuration as `version` writes it (the credentials are not echoed back).
    fn to_json(&self, version: Version) -> Value {
        match version {
            Version::V1_0 => {
                let mut c = json!({"id": self.id, "taskId": self.task_id, "url": self.url});
                if let Some(t) = &self.token {
                    c["token"] = json!(t);
                }
                if let Some(a) = &self.auth {
                    c["authentication"] = json!({"scheme": a.scheme});
                }
                c
            }
            Version::V0_3 => {
                let mut p = json!({"id": self.id, "url": self.url});
                if let Some(t) = &self.token {
                    p["token"] = json!(t);
                }
                if let Some(a) = &self.auth {
                    p["authentication"] = json!({"schemes": [a.scheme]});
                }
                json!({"taskId": self.task_id, "pushNotificationConfig": p})
            }
        }
    }
}

/// Webhook configurations in either version's params.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigIn {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    task_id: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    authentication: Option<AuthIn>,
    /// 0.3 nests the webhook.
    #[serde(default)]
    push_notification_config: Option<Box<ConfigIn>>,
}

#[derive(Debug, Default, Deserialize)]
struct AuthIn {
    /// 1.0.
    #[serde(default)]
    scheme: Option<String>,
    /// 0.3.
    #[serde(default)]
    schemes: Vec<String>,
    #[serde(default)]
    credentials: Option<String>,
}

/// The params naming one configuration, or a task's: 1.0 `{taskId, id}`, 0.3
/// `{id: taskId, pushNotificationConfigId}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Named {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    task_id: Option<String>,
    #[serde(default)]
    push_notification_config_id: Option<String>,
}

impl Named {
    fn read(version: Version, p: Value) -> Result<(String, Option<String>), GatewayError> {
        let n: Named =
            serde_json::from_value(p).map_err(|e| GatewayError::InvalidParams(e.to_string()))?;
        let (task, config) = match version {
            Version::V1_0 => (n.task_id, n.id),
            Version::V0_3 => (n.id.or(n.task_id), n.push_notification_config_id),
        };
        let task = task.filter(|t| !t.is_empty()).ok_or_else(|| {
            GatewayError::InvalidParams("the task's id is required (taskId)".into())
        })?;
        Ok((task, config.filter(|c| !c.is_empty())))
    }
}

/// A task's configurations exist only while the gateway knows the task, and only for the
/// caller (`tenant`) it belongs to (-32001 otherwise).
fn known(bridge: &Bridge, task: &str, tenant: Option<&str>) -> Result<(), GatewayError> {
    bridge.task_as(task, tenant).map(|_| ())
}

#[derive(Debug, Default)]
struct Tasks {
    by_task: HashMap<String, Vec<Config>>,
    /// Tasks whose updates ended, oldest first: their configurations stay readable until
    /// deleted, or until room is needed for a live task's.
    done: std::collections::VecDeque<String>,
}

impl Tasks {
    /// The task's updates ended: its webhooks' queues close (once drained, their senders end).
    fn finish(&mut self, task: &str) {
        if let Some(list) = self.by_task.get_mut(task) {
            for c in list.iter_mut() {
                c.tx = None;
            }
            self.done.push_back(task.to_owned());
        }
    }

    /// Makes room for one more task by forgetting the oldest finished one.
    fn make_room(&mut self) -> bool {
        while let Some(old) = self.done.pop_front() {
            if self.by_task.remove(&old).is_some() {
                return true;
            }
        }
        false
    }
}

/// The webhook configurations and their deliveries.
#[derive(Debug)]
pub(crate) struct Push {
    tasks: Mutex<Tasks>,
    /// What a webhook may reach (`a2a.push_allow_private`), and how its host is looked up.
    guard: Policy,
    /// With `[cluster]`: where the configurations are kept for the other replicas ([`shared`]).
    link: Option<Arc<crate::cluster::Link>>,
}

impl Push {
    /// An empty store; with `bridge`'s cluster link, its configurations are shared, and the
    /// webhooks of tasks `bridge` fails taking over a lost replica's context are told.
    pub(crate) fn new(allow_private: bool, bridge: &Arc<Bridge>) -> Arc<Self> {
        let push = Arc::new(Push {
            tasks: Mutex::new(Tasks::default()),
            guard: Policy::new(allow_private),
            link: bridge.cluster_link().cloned(),
        });
        if push.link.is_some() {
            let (weak, bridge_weak) = (Arc::downgrade(&push), Arc::downgrade(bridge));
            bridge.on_lost_tasks(Box::new(move |tasks| {
                let (Some(push), Some(bridge)) = (weak.upgrade(), bridge_weak.upgrade()) else {
                    return;
                };
                crate::util::background::spawn(async move { push.restore(&bridge, tasks).await });
            }));
        }
        push
    }

    /// Whether a webhook may have `url` (`-32602` when not): the check a configuration is made
    /// with, for a send to run before its turn starts.
    pub(crate) async fn admit(&self, url: &str) -> Result<(), GatewayError> {
        self.guard.admit(url).await
    }

    fn lock(&self) -> MutexGuard<'_, Tasks> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn configs(&self, task: &str) -> Vec<Config> {
        self.lock().by_task.get(task).cloned().unwrap_or_default()
    }

    /// `CreateTaskPushNotificationConfig` / `tasks/pushNotificationConfig/set`, and a send's
    /// own configuration (`task` given); for `tenant`'s tasks only.
    pub(crate) async fn create(
        self: &Arc<Self>,
        bridge: &Arc<Bridge>,
        version: Version,
        params: Value,
        task: Option<&str>,
        tenant: Option<&str>,
    ) -> Result<Value, GatewayError> {
        let (task_id, inner) = Self::parse_config(version, params, task)?;
        let url = inner
            .url
            .filter(|u| !u.is_empty())
            .ok_or_else(|| GatewayError::InvalidParams("url is required".into()))?;
        known(bridge, &task_id, tenant)?;
        self.guard.admit(&url).await?;
        let auth = Self::parse_auth(inner.authentication)?;
        let id = inner
            .id
            .filter(|i| !i.is_empty())
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let (tx, rx) = mpsc::channel(QUEUE);
        let config = Config {
            id: id.clone(),
            task_id: task_id.clone(),
            url,
            token: inner.token,
            auth,
            version,
            tx: Some(tx),
            live: Arc::new(AtomicBool::new(true)),
        };
        let first = self.register(&config)?;
        if let Some(link) = &self.link {
            shared::store(link, &config).await;
        }
        // Its notifications are spans of the trace of the request that made it.
        let trace = crate::http::scope::parent();
        crate::util::background::spawn(deliver(
            self.guard.clone(),
            config.without_queue(),
            rx,
            trace,
        ));
        if first {
            self.watch(bridge, &task_id)?;
        }
        Ok(config.to_json(version))
    }

    /// Reads a create's parameters in `version`'s shape: the task's id (`task`, else the
    /// parameters', required) and the webhook's configuration.
    fn parse_config(
        version: Version,
        params: Value,
        task: Option<&str>,
    ) -> Result<(String, ConfigIn), GatewayError> {
        let c: ConfigIn = serde_json::from_value(params)
            .map_err(|e| GatewayError::InvalidParams(e.to_string()))?;
        let task_id = task
            .map(str::to_owned)
            .or(c.task_id.clone())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| GatewayError::InvalidParams("taskId is required".into()))?;
        let inner = match (version, c.push_notification_config) {
            (Version::V0_3, Some(p)) => *p,
            (_, Some(_)) => {
                return Err(GatewayError::InvalidParams(
                    "pushNotificationConfig is 0.3's shape; 1.0 puts url, token and \
                     authentication at the top"
                        .into(),
                ))
            }
            (_, None) => ConfigIn {
                id: c.id,
                url: c.url,
                token: c.token,
                authentication: c.authentication,
                ..ConfigIn::default()
            },
        };
        Ok((task_id, inner))
    }

    /// Checks a webhook's `authentication`: an HTTP auth scheme and visible-ASCII credentials.
    fn parse_auth(authentication: Option<AuthIn>) -> Result<Option<Auth>, GatewayError> {
        Ok(match authentication {
            None => None,
            Some(a) => {
                let scheme = a
                    .scheme
                    .or_else(|| a.schemes.into_iter().next())
                    .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric()));
                let scheme = scheme.ok_or_else(|| {
                    GatewayError::InvalidParams(
                        "authentication.scheme must be an HTTP auth scheme (Bearer, Basic, …)"
                            .into(),
                    )
                })?;
                let credentials = a.credentials.unwrap_or_default();
                if !credentials
                    .bytes()
                    .all(|b| b.is_ascii_graphic() || b == b' ')
                {
                    return Err(GatewayError::InvalidParams(
                        "authentication.credentials must be visible ASCII".into(),
                    ));
                }
                Some(Auth {
                    scheme,
                    credentials,
                })
            }
        })
    }

    /// Adds `config` to its task's webhooks, in place of one with its id, within the limits
    /// on tasks and webhooks per task: `true` when the task had no watcher yet.
    fn register(&self, config: &Config) -> Result<bool, GatewayError> {
        let (id, task_id) = (&config.id, &config.task_id);
        let mut t = self.lock();
        if !t.by_task.contains_key(task_id) && t.by_task.len() >= MAX_TASKS && !t.make_room() {
            return Err(GatewayError::InvalidParams(format!(
                "{MAX_TASKS} tasks already have webhooks; delete some first"
            )));
        }
        let list = t.by_task.entry(task_id.clone()).or_default();
        // No watcher yet, or the last one ended with the task's updates.
        let first = list.iter().all(|c| c.tx.is_none());
        list.retain(|c| {
            let keep = c.id != *id;
            if !keep {
                c.live.store(false, Ordering::Release);
            }
            keep
        });
        if list.len() >= MAX_CONFIGS_PER_TASK {
            return Err(GatewayError::InvalidParams(format!(
                "task {task_id} already has {MAX_CONFIGS_PER_TASK} webhooks"
            )));
        }
        list.push(config.clone());
        Ok(first)
    }

    /// `Get…` / `…/get`.
    pub(crate) fn get(
        &self,
        bridge: &Bridge,
        version: Version,
        params: Value,
        tenant: Option<&str>,
    ) -> Result<Value, GatewayError> {
        let (task, id) = Named::read(version, params)?;
        known(bridge, &task, tenant)?;
        let configs = self.configs(&task);
        let found = match &id {
            Some(id) => configs.iter().find(|c| c.id == *id),
            // 0.3 may name the task alone: its first webhook.
            None if version == Version::V0_3 => configs.first(),
            None => return Err(GatewayError::InvalidParams("id is required".into())),
        };
        found.map(|c| c.to_json(version)).ok_or_else(|| {
            GatewayError::InvalidParams(format!(
                "task {task} has no webhook {}",
                id.as_deref().unwrap_or("configured")
            ))
        })
    }

    /// `List…` / `…/list`.
    pub(crate) fn list(
        &self,
        bridge: &Bridge,
        version: Version,
        params: Value,
        tenant: Option<&str>,
    ) -> Result<Value, GatewayError> {
        let (task, _) = Named::read(version, params)?;
        known(bridge, &task, tenant)?;
        let all: Vec<Value> = self
            .configs(&task)
            .iter()
            .map(|c| c.to_json(version))
            .collect();
        Ok(match version {
            Version::V1_0 => json!({"configs": all, "nextPageToken": ""}),
            Version::V0_3 => Value::Array(all),
        })
    }

    /// `Delete…` / `…/delete`: idempotent, as the spec asks.
    pub(crate) fn delete(
        &self,
        bridge: &Bridge,
        version: Version,
        params: Value,
        tenant: Option<&str>,
    ) -> Result<Value, GatewayError> {
        let (task, id) = Named::read(version, params)?;
        known(bridge, &task, tenant)?;
        let id = id.ok_or_else(|| GatewayError::InvalidParams("id is required".into()))?;
        let mut t = self.lock();
        if let Some(list) = t.by_task.get_mut(&task) {
            list.retain(|c| {
                let keep = c.id != id;
                if !keep {
                    c.live.store(false, Ordering::Release);
                }
                keep
            });
            if list.is_empty() {
                t.by_task.remove(&task);
            }
        }
        if let Some(link) = &self.link {
            shared::forget(link, &task, &id);
        }
        Ok(match version {
            Version::V1_0 => json!({}),
            Version::V0_3 => Value::Null,
        })
    }

    /// Follows one task's updates and fans them out to its webhooks until the task ends or its
    /// last webhook is deleted.
    fn watch(self: &Arc<Self>, bridge: &Arc<Bridge>, task_id: &str) -> Result<(), GatewayError> {
        let (task, ctx) = bridge.task(task_id)?;
        let opened = bridge.task_stream(task_id, None, true)?;
        let push = Arc::downgrade(self);
        let bridge = bridge.clone();
        let task_id = task_id.to_owned();
        crate::util::background::spawn(async move {
            let mut writers: HashMap<Version, UpdateWriter> = HashMap::new();
            let mut cursor = opened.subscription.cursor;
            let mut buf = Vec::new();
            if task.state.is_terminal() {
                // Nothing more will happen: the task as it ended, once.
                if let Some(p) = push.upgrade() {
                    p.fan_out(&task_id, |v| snapshot_payload(v, &task, &ctx));
                    p.lock().finish(&task_id);
                }
                return;
            }
            loop {
                let Some(p) = push.upgrade() else { return };
                if !p.lock().by_task.contains_key(&task_id) {
                    return;
                }
                match cursor.read(&mut buf, 64) {
                    Read::Events(_) => {
                        for s in buf.drain(..) {
                            if s.event.plan_id.as_deref() != Some(task_id.as_str()) {
                                continue;
                            }
                            p.fan_out(&task_id, |v| {
                                let w = writers
                                    .entry(v)
                                    .or_insert_with(|| UpdateWriter::new(v, &task));
                                let r = w.result(&s.event);
                                Bytes::from(r.to_string())
                            });
                            if s.event.is_final() {
                                p.lock().finish(&task_id);
                                return;
                            }
                        }
                    }
                    Read::Empty => {
                        // A task that ended just before the watcher subscribed sends no more
                        // updates: the task as it ended, once.
                        if let Ok((now, ctx)) = bridge.task(&task_id) {
                            if now.state.is_terminal() && cursor.behind() == 0 {
                                p.fan_out(&task_id, |v| snapshot_payload(v, &now, &ctx));
                                p.lock().finish(&task_id);
                                return;
                            }
                        }
                        drop(p);
                        cursor.changed().await;
                    }
                    Read::Lagged(_) => {
                        // Updates were missed: the task as it is now, then on from here.
                        if let Ok((now, ctx)) = bridge.task(&task_id) {
                            p.fan_out(&task_id, |v| snapshot_payload(v, &now, &ctx));
                        }
                        match bridge.task_stream(&task_id, None, true) {
                            Ok(o) => cursor = o.subscription.cursor,
                            Err(_) => return,
                        }
                    }
                    Read::Closed => {
                        p.lock().finish(&task_id);
                        return;
                    }
                }
            }
        });
        Ok(())
    }

    /// Hands one update to each webhook of the task, written for its version; a full queue
    /// drops it (counted) rather than wait.
    fn fan_out(&self, task_id: &str, mut payload: impl FnMut(Version) -> Bytes) {
        let mut cache: HashMap<Version, Bytes> = HashMap::new();
        for c in self.configs(task_id) {
            let body = cache
                .entry(c.version)
                .or_insert_with(|| payload(c.version))
                .clone();
            let Some(tx) = &c.tx else { continue };
            if tx.try_send(body).is_err() {
                metrics::counter!("wiregate_a2a_push_total", "outcome" => "dropped").increment(1);
            }
        }
    }
}

/// What a webhook receives for the whole task: 1.0's `{"task": …}`, 0.3's task.
fn snapshot_payload(v: Version, t: &crate::model::task::Task, ctx: &str) -> Bytes {
    Bytes::from(shapes::stream_start(v, t, ctx).to_string())
}
