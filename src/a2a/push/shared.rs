//! Webhook configurations kept in Redis too (with `[cluster]`), so that the replica taking over
//! a lost replica's context can tell the webhooks of the tasks it fails how they ended.
//!
//! A task's configurations are the hash `wiregate:push:{task}` (one field per configuration id,
//! its JSON a [`Stored`]), kept as long as the task's snapshot. The credentials a webhook is
//! called with are in it: the Redis the replicas share holds what any of them needs to act for
//! the others, as it holds their sessions and logs.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::{deliver, Auth, Config, Push, QUEUE};
use crate::cluster::{keys, log::TASK_TTL_SECS, Link};
use crate::model::a2a::Version;
use crate::sid::Bridge;

/// One configuration as Redis holds it.
#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    id: String,
    url: String,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    scheme: Option<String>,
    #[serde(default)]
    credentials: Option<String>,
    /// Made in A2A 0.3 (else 1.0).
    #[serde(default)]
    v0_3: bool,
}

fn key(task: &str) -> String {
    format!("{}push:{task}", keys::PREFIX)
}

/// Records `c` for the other replicas (best effort: a Redis that does not answer refuses the
/// sid calls that would make the task anyway).
pub(super) async fn store(link: &Link, c: &Config) {
    let stored = Stored {
        id: c.id.clone(),
        url: c.url.clone(),
        token: c.token.clone(),
        scheme: c.auth.as_ref().map(|a| a.scheme.clone()),
        credentials: c.auth.as_ref().map(|a| a.credentials.clone()),
        v0_3: c.version == Version::V0_3,
    };
    let Ok(json) = serde_json::to_string(&stored) else {
        return;
    };
    let Ok(mut conn) = link.conn() else { return };
    let k = key(&c.task_id);
    let done: redis::RedisResult<()> = redis::pipe()
        .hset(&k, &c.id, json)
        .ignore()
        .expire(&k, TASK_TTL_SECS as i64)
        .ignore()
        .query_async(&mut conn)
        .await;
    if let Err(e) = done {
        link.failed(&e);
    }
}

/// Forgets one configuration of `task` in Redis.
pub(super) fn forget(link: &Arc<Link>, task: &str, id: &str) {
    let (link, k, id) = (link.clone(), key(task), id.to_owned());
    crate::util::background::spawn(async move {
        let Ok(mut conn) = link.conn() else { return };
        let _: redis::RedisResult<i64> = conn.hdel(&k, &id).await;
    });
}

impl Push {
    /// Takes on the webhooks another replica configured for `tasks`, which this one now runs
    /// (it failed them taking their context over): each gets the task as it ended, once.
    pub(super) async fn restore(self: &Arc<Self>, bridge: &Arc<Bridge>, tasks: Vec<String>) {
        let Some(link) = self.link.clone() else {
            return;
        };
        for task in tasks {
            let Ok(mut conn) = link.conn() else { return };
            let found: redis::RedisResult<std::collections::HashMap<String, String>> =
                conn.hgetall(key(&task)).await;
            let Ok(found) = found else { continue };
            let mut any = false;
            for s in found
                .values()
                .filter_map(|j| serde_json::from_str::<Stored>(j).ok())
            {
                let (tx, rx) = mpsc::channel(QUEUE);
                let config = Config {
                    id: s.id,
                    task_id: task.clone(),
                    url: s.url,
                    token: s.token,
                    auth: s.scheme.map(|scheme| Auth {
                        scheme,
                        credentials: s.credentials.unwrap_or_default(),
                    }),
                    version: if s.v0_3 { Version::V0_3 } else { Version::V1_0 },
                    tx: Some(tx),
                    live: Arc::new(AtomicBool::new(true)),
                };
                crate::util::background::spawn(deliver(
                    self.guard.clone(),
                    config.without_queue(),
                    rx,
                    None,
                ));
                let mut t = self.lock();
                let list = t.by_task.entry(task.clone()).or_default();
                list.retain(|c| c.id != config.id);
                list.push(config);
                any = true;
            }
            if any {
                if let Err(e) = self.watch(bridge, &task) {
                    tracing::warn!(task = %task, error = %e, "cannot notify a lost task's webhooks");
                }
            }
        }
    }
}
