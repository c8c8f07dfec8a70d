//! The bridge's side of `[cluster]`: exporting the contexts this replica runs, and answering
//! for tasks and contexts other replicas run, from Redis. Without a cluster link every method
//! here is the local answer and nothing more.

use std::sync::Arc;
use std::time::Duration;

use super::context::Context;
use super::mapping::Task;
use super::{Bridge, Opened};
use crate::cluster::log::{Exporter, Mirrors};
use crate::cluster::{tasks, Link};
use crate::config::Sid as SidConfig;
use crate::error::GatewayError;
use crate::stream::Filter;

/// How long an answer waits for its task's events to reach Redis, so another replica asked
/// next already knows what this one answered. Past it the answer goes anyway (Redis is slow
/// or down, and `/readyz` says so).
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// Most tasks of other replicas ListTasks reads.
const REMOTE_LIST_MAX: usize = 1_000;

/// Redis, and the local copies of other replicas' logs.
#[derive(Debug)]
pub(super) struct Shared {
    link: Arc<Link>,
    mirrors: Arc<Mirrors>,
}

impl Shared {
    pub(super) fn new(link: Arc<Link>, cfg: &SidConfig) -> Self {
        Shared {
            mirrors: Mirrors::new(link.clone(), cfg.replay_events, cfg.max_subscribers),
            link,
        }
    }
}

impl Bridge {
    /// Starts writing a context's events and tasks to Redis (with `[cluster]`).
    pub(super) fn export(&self, ctx: &Arc<Context>) -> Result<(), GatewayError> {
        let Some(sh) = &self.cluster else {
            return Ok(());
        };
        let weak = Arc::downgrade(ctx);
        let flushed = Exporter::spawn(
            sh.link.clone(),
            ctx.id.clone(),
            &ctx.queue,
            self.cfg.replay_events,
            move |task| weak.upgrade().and_then(|c| c.task(task)),
        )?;
        let _ = ctx.flushed.set(flushed);
        sh.mirrors.forget(&ctx.id);
        Ok(())
    }

    /// Refuses sid calls while the replicas' shared store is down (with `[cluster]`).
    pub(super) fn cluster_ready(&self) -> Result<(), GatewayError> {
        match &self.cluster {
            Some(sh) if !sh.link.is_up() => Err(sh.link.unavailable()),
            _ => Ok(()),
        }
    }

    /// Waits until what `ctx` produced so far is in Redis (at most [`FLUSH_WAIT`]).
    pub(super) async fn flushed(ctx: &Context) {
        let Some(rx) = ctx.flushed.get() else {
            return;
        };
        let target = ctx.queue.last_seq();
        let mut rx = rx.clone();
        let _ = tokio::time::timeout(FLUSH_WAIT, rx.wait_for(|s| *s >= target)).await;
    }

    /// A task's model and context, whichever replica runs it.
    pub async fn find_task(&self, task_id: &str) -> Result<(Task, String), GatewayError> {
        match (self.task(task_id), &self.cluster) {
            (Err(GatewayError::TaskNotFound(_)), Some(sh)) => tasks::get(&sh.link, task_id)
                .await?
                .ok_or_else(|| GatewayError::TaskNotFound(task_id.to_owned())),
            (local, _) => local,
        }
    }

    /// Every task this replica keeps, and (with `[cluster]`) the most recently changed ones of
    /// the others.
    pub async fn all_tasks_everywhere(&self) -> Result<Vec<(Task, String)>, GatewayError> {
        let mut all = self.all_tasks();
        if let Some(sh) = &self.cluster {
            let local: std::collections::HashSet<String> =
                all.iter().map(|(t, _)| t.id.clone()).collect();
            let remote = tasks::list(&sh.link, REMOTE_LIST_MAX).await?;
            all.extend(remote.into_iter().filter(|(t, _)| !local.contains(&t.id)));
        }
        Ok(all)
    }

    /// [`task_stream`](Self::task_stream), for a task of any replica.
    pub async fn open_task_stream(
        &self,
        task_id: &str,
        last_event_id: Option<&str>,
        live_if_running: bool,
    ) -> Result<Opened, GatewayError> {
        let local = self.task_stream(task_id, last_event_id, live_if_running);
        let (Err(GatewayError::TaskNotFound(_)), Some(sh)) = (&local, &self.cluster) else {
            return local;
        };
        let (task, context_id) = tasks::get(&sh.link, task_id)
            .await?
            .ok_or_else(|| GatewayError::TaskNotFound(task_id.to_owned()))?;
        let queue = sh.mirrors.open(&context_id).await?;
        let subscription =
            if last_event_id.is_none() && live_if_running && !task.state.is_terminal() {
                queue.subscribe_live()?
            } else {
                queue.subscribe(last_event_id)?
            };
        Ok(Opened {
            subscription,
            filter: Filter {
                task: Some(task_id.to_owned()),
                until_final: true,
                until_input_required: false,
            },
            context_id,
        })
    }

    /// [`context_stream`](Self::context_stream), for a context of any replica.
    pub async fn open_context_stream(
        &self,
        context_id: &str,
        last_event_id: Option<&str>,
    ) -> Result<Opened, GatewayError> {
        let local = self.context_stream(context_id, last_event_id);
        let (Err(GatewayError::ContextNotFound(_)), Some(sh)) = (&local, &self.cluster) else {
            return local;
        };
        let queue = sh.mirrors.open(context_id).await?;
        Ok(Opened {
            subscription: queue.subscribe(last_event_id)?,
            filter: Filter::default(),
            context_id: context_id.to_owned(),
        })
    }

    /// Whether streams of tasks and contexts this replica does not run are served from Redis.
    pub fn is_clustered(&self) -> bool {
        self.cluster.is_some()
    }
}
