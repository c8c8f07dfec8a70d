//! Task snapshots every replica reads: `tasks/get`, GetTask and ListTasks for a task another
//! replica runs. Written by the [`Exporter`](super::log::Exporter) with the events that changed
//! the task, so a subscriber that saw an update finds the task at least that far along.

use redis::AsyncCommands;

use super::keys::{self, StoredTask};
use super::Link;
use crate::model::error::GatewayError;
use crate::model::task::Task;

/// A task some replica runs (or ran), with its context; `None` when no replica knows it.
pub(crate) async fn get(
    link: &Link,
    task_id: &str,
) -> Result<Option<(Task, String)>, GatewayError> {
    let mut conn = link.conn()?;
    let text: Option<Vec<u8>> = conn
        .get(keys::task(task_id))
        .await
        .map_err(|e| link.failed(&e))?;
    Ok(text
        .and_then(|t| serde_json::from_slice::<StoredTask>(&t).ok())
        .map(|s| (s.task, s.context)))
}

/// The most recently changed tasks of every replica, newest first, at most `limit`.
pub(crate) async fn list(link: &Link, limit: usize) -> Result<Vec<(Task, String)>, GatewayError> {
    let mut conn = link.conn()?;
    let ids: Vec<String> = conn
        .zrevrange(keys::TASK_INDEX, 0, limit.max(1) as isize - 1)
        .await
        .map_err(|e| link.failed(&e))?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let task_keys: Vec<String> = ids.iter().map(|id| keys::task(id)).collect();
    let texts: Vec<Option<Vec<u8>>> = redis::cmd("MGET")
        .arg(&task_keys)
        .query_async(&mut conn)
        .await
        .map_err(|e| link.failed(&e))?;
    Ok(texts
        .into_iter()
        .flatten()
        .filter_map(|t| serde_json::from_slice::<StoredTask>(&t).ok())
        .map(|s| (s.task, s.context))
        .collect())
}

/// The caller a context belongs to, if any replica recorded one.
pub(crate) async fn tenant(link: &Link, context_id: &str) -> Result<Option<String>, GatewayError> {
    let mut conn = link.conn()?;
    conn.get(keys::tenant(context_id))
        .await
        .map_err(|e| link.failed(&e))
}

/// Records the caller a context belongs to, before the context is named to anyone.
pub(crate) async fn set_tenant(
    link: &Link,
    context_id: &str,
    tenant: &str,
) -> Result<(), GatewayError> {
    let mut conn = link.conn()?;
    conn.set(keys::tenant(context_id), tenant)
        .await
        .map_err(|e| link.failed(&e))
}
