//! The bridge's contexts by id and its index of tasks to them: which context a call addresses,
//! children started and restarted within `sid.max_contexts`, idle ones stopped and long-stopped
//! ones forgotten.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::context::Context;
use super::reach::Transport;
use super::{Bridge, Turn, STOP_GRACE};
use crate::model::error::GatewayError;
use crate::model::task::Task;

/// A context stopped for this many idle timeouts is forgotten.
const CONTEXT_RETENTION_FACTOR: u32 = 16;

impl Bridge {
    /// Waits until a task settles (terminal or input-required); its model and context then.
    pub async fn settled_task(&self, task_id: &str) -> Result<(Task, String), GatewayError> {
        let ctx = self.context_of(task_id)?;
        ctx.settled(task_id).await;
        self.task(task_id)
    }

    /// A task's model and its context.
    pub fn task(&self, task_id: &str) -> Result<(Task, String), GatewayError> {
        let ctx = self.context_of(task_id)?;
        let model = ctx
            .task(task_id)
            .ok_or_else(|| GatewayError::TaskNotFound(task_id.to_owned()))?;
        Ok((model, ctx.id.clone()))
    }

    pub(super) fn context_of(&self, task_id: &str) -> Result<Arc<Context>, GatewayError> {
        let ctx_id = self
            .task_index()
            .get(task_id)
            .cloned()
            .ok_or_else(|| GatewayError::TaskNotFound(task_id.to_owned()))?;
        self.contexts()
            .get(&ctx_id)
            .cloned()
            .ok_or_else(|| GatewayError::TaskNotFound(task_id.to_owned()))
    }

    /// The context a `message/send` addresses: the task's, the named one (restarted when its
    /// child was stopped), the attached socket, or a new child.
    pub(super) fn context_for(&self, turn: &Turn) -> Result<Arc<Context>, GatewayError> {
        self.cluster_ready()?;
        if let Some(task) = &turn.task_id {
            return self.context_of(task);
        }
        if let Some(ctx_id) = &turn.context_id {
            let ctx = self
                .contexts()
                .get(ctx_id)
                .cloned()
                .ok_or_else(|| GatewayError::ContextNotFound(ctx_id.clone()))?;
            self.ensure_running(&ctx)?;
            return Ok(ctx);
        }
        if let Some(a) = &self.attached {
            self.ensure_running(a)?;
            return Ok(a.clone());
        }
        self.new_context_with(
            uuid::Uuid::new_v4().to_string(),
            self.owner_for(turn.tenant.as_deref()),
        )
    }

    pub(super) fn running_children(contexts: &HashMap<String, Arc<Context>>) -> usize {
        contexts
            .values()
            .filter(|c| matches!(c.transport, Transport::Stdio(_)) && c.is_running())
            .count()
    }

    /// Every task the contexts keep, with its context (ListTasks reads and pages these).
    pub fn all_tasks(&self) -> Vec<(Task, String)> {
        let contexts: Vec<Arc<Context>> = self.contexts().values().cloned().collect();
        contexts
            .iter()
            .flat_map(|c| c.tasks().into_iter().map(|t| (t, c.id.clone())))
            .collect()
    }

    /// Whether a context has this id.
    pub fn has_context(&self, id: &str) -> bool {
        self.contexts().contains_key(id)
    }

    /// Starts a context under a client-chosen id (A2A lets a client name the context of its
    /// first message). Refused when the gateway attaches to one `sid --listen` socket (its one
    /// context has an id of its own), when the id is not a plain token, or at capacity. A new
    /// context is `tenant`'s.
    pub fn adopt_context(&self, id: &str, tenant: Option<&str>) -> Result<(), GatewayError> {
        if self.has_context(id) {
            return Ok(());
        }
        if self.attached.is_some() {
            return Err(GatewayError::InvalidParams(format!(
                "contextId {id:?} is not this gateway's sid session; omit it to use the attached one"
            )));
        }
        let plain = |b: u8| b.is_ascii_alphanumeric() || b"-_.:".contains(&b);
        if id.is_empty() || id.len() > 128 || !id.bytes().all(plain) {
            return Err(GatewayError::InvalidParams(
                "contextId: a new context's id must be 1 to 128 letters, digits or - _ . :".into(),
            ));
        }
        self.new_context_with(id.to_owned(), self.owner_for(tenant))
            .map(|_| ())
    }

    /// Starts a child for a new context `id`, `owner`'s when there is one.
    fn new_context_with(
        &self,
        id: String,
        owner: Option<&str>,
    ) -> Result<Arc<Context>, GatewayError> {
        let mut contexts = self.contexts();
        if let Some(c) = contexts.get(&id) {
            return Ok(c.clone());
        }
        if Self::running_children(&contexts) >= self.cfg.max_contexts {
            return Err(GatewayError::TooManyContexts(self.cfg.max_contexts));
        }
        self.within_quota(&contexts, owner)?;
        let queue = crate::events::ReplayLog::new(self.cfg.replay_events)
            .with_max_subscribers(self.cfg.max_subscribers);
        let ctx = self.stdio_context(id, queue, owner)?;
        ctx.spawn_child(&self.cfg.command, None).map_err(|e| {
            GatewayError::SidUnavailable(format!("cannot start {:?}: {e}", self.cfg.command))
        })?;
        contexts.insert(ctx.id.clone(), ctx.clone());
        metrics::gauge!("wiregate_sid_contexts").set(contexts.len() as f64);
        Ok(ctx)
    }

    /// A context `id` of a child of `sid.command`, not yet started, whose events go into
    /// `queue`: `owner`'s when there is one, and exported to the replicas with `[cluster]`.
    pub(super) fn stdio_context(
        &self,
        id: String,
        queue: crate::events::ReplayLog,
        owner: Option<&str>,
    ) -> Result<Arc<Context>, GatewayError> {
        let ctx = Context::with_queue(
            id,
            Transport::Stdio(self.cfg.command.clone()),
            queue,
            self.cfg.max_queued_requests,
            Duration::from_millis(self.cfg.lag_grace_ms),
            self.cfg.max_line_bytes,
        );
        if let Some(o) = owner {
            let _ = ctx.owner.set(o.into());
        }
        self.export(&ctx)?;
        Ok(ctx)
    }

    pub(super) fn ensure_running(&self, ctx: &Arc<Context>) -> Result<(), GatewayError> {
        if ctx.is_running() {
            return Ok(());
        }
        let Transport::Stdio(command) = &ctx.transport else {
            return Err(GatewayError::SidUnavailable(
                ctx.exit_reason()
                    .unwrap_or_else(|| "the sid socket is reconnecting".into()),
            ));
        };
        let contexts = self.contexts();
        if Self::running_children(&contexts) >= self.cfg.max_contexts {
            return Err(GatewayError::TooManyContexts(self.cfg.max_contexts));
        }
        // The child was stopped (idle, or it exited): resume the same sid session.
        ctx.spawn_child(command, ctx.session_id())
            .map_err(|e| GatewayError::SidUnavailable(format!("cannot restart sid: {e}")))
    }

    /// Stops idle children; forgets contexts stopped for long (with their replay buffers) and
    /// index entries of tasks their context no longer keeps, so the registry stays bounded.
    pub(super) async fn reap_idle(&self) {
        let idle = Duration::from_millis(self.cfg.idle_timeout_ms);
        let retention = idle * CONTEXT_RETENTION_FACTOR;
        let (stale, forgotten): (Vec<Arc<Context>>, Vec<Arc<Context>>) = {
            let contexts = self.contexts();
            let child = |c: &Arc<Context>| matches!(c.transport, Transport::Stdio(_));
            let quiet = |c: &Arc<Context>| c.active_turn().is_none();
            (
                contexts
                    .values()
                    .filter(|c| child(c) && c.is_running() && quiet(c) && c.idle_for() >= idle)
                    .cloned()
                    .collect(),
                contexts
                    .values()
                    .filter(|c| {
                        child(c) && !c.is_running() && quiet(c) && c.idle_for() >= retention
                    })
                    .cloned()
                    .collect(),
            )
        };
        for c in stale {
            tracing::info!(context = %c.id, "stopping an idle sid");
            c.stop(STOP_GRACE).await;
        }
        if !forgotten.is_empty() {
            let mut contexts = self.contexts();
            for c in &forgotten {
                tracing::info!(context = %c.id, "forgetting a long-stopped context");
                c.close();
                contexts.remove(&c.id);
            }
            metrics::gauge!("wiregate_sid_contexts").set(contexts.len() as f64);
        }
        let contexts = self.contexts().clone();
        self.task_index().retain(|task, ctx| {
            contexts
                .get(ctx)
                .is_some_and(|c| c.task_state(task).is_some())
        });
    }
}
