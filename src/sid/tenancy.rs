//! Tenancy: with callers identified (`[auth]`), a context and its tasks belong to the caller
//! that started them. Any other caller is told they do not exist (the not-found errors, with no
//! hint that they do), in every read: a task, its stream, a context's stream, a list, a cancel,
//! a push configuration. A context or task an anonymous caller started is anyone's. With no rule
//! of `[auth]` looking at credentials nothing is owned, and nothing here looks anything up.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::context::Context;
use super::Bridge;
use crate::cluster::tasks;
use crate::model::error::GatewayError;
use crate::model::task::Task;

/// Whether a caller (`tenant`: its `kind:id`; `None` when anonymous) may see what `owner` owns.
#[inline]
pub(crate) fn visible(owner: Option<&str>, tenant: Option<&str>) -> bool {
    owner.is_none_or(|o| Some(o) == tenant)
}

impl Bridge {
    /// Turns tenancy on while some rule of `[auth]` looks at credentials (set by the gateway at
    /// start and on every reload).
    pub(crate) fn set_tenancy(&self, on: bool) {
        self.tenancy.store(on, Ordering::Relaxed);
    }

    /// The owner a context or task that `tenant` starts gets: none while tenancy is off.
    #[inline]
    pub(super) fn owner_for<'a>(&self, tenant: Option<&'a str>) -> Option<&'a str> {
        tenant.filter(|_| self.tenancy.load(Ordering::Relaxed))
    }

    /// Refuses, as not found, a task `tenant` may not see, whichever replica runs it. A task
    /// no replica knows passes: the call's own lookup answers not found.
    pub(crate) async fn check_task(
        &self,
        task_id: &str,
        tenant: Option<&str>,
    ) -> Result<(), GatewayError> {
        if !self.tenancy.load(Ordering::Relaxed) {
            return Ok(());
        }
        let owner = match (self.context_of(task_id), &self.cluster) {
            (Ok(ctx), _) => ctx.task_owner(task_id),
            (Err(_), Some(sh)) => tasks::get(&sh.link, task_id)
                .await?
                .and_then(|(t, _)| t.owner),
            (Err(_), None) => None,
        };
        match visible(owner.as_deref(), tenant) {
            true => Ok(()),
            false => Err(GatewayError::TaskNotFound(task_id.to_owned())),
        }
    }

    /// Refuses, as not found, a context `tenant` may not see, whichever replica runs it.
    pub(crate) async fn check_context(
        &self,
        context_id: &str,
        tenant: Option<&str>,
    ) -> Result<(), GatewayError> {
        if !self.tenancy.load(Ordering::Relaxed) {
            return Ok(());
        }
        let local = self.contexts().get(context_id).cloned();
        let owner = match (local, &self.cluster) {
            (Some(ctx), _) => ctx.owner.get().map(|o| o.to_string()),
            (None, Some(sh)) => tasks::tenant(&sh.link, context_id).await?,
            (None, None) => None,
        };
        match visible(owner.as_deref(), tenant) {
            true => Ok(()),
            false => Err(GatewayError::ContextNotFound(context_id.to_owned())),
        }
    }

    /// A task of this replica's and its context, when `tenant` may see it.
    pub(crate) fn task_as(
        &self,
        task_id: &str,
        tenant: Option<&str>,
    ) -> Result<(Task, String), GatewayError> {
        self.shown(self.task(task_id)?, tenant)
    }

    /// [`find_task`](Self::find_task) (this replica's or any other's), when `tenant` may see
    /// it: the one lookup answers both.
    pub(crate) async fn find_task_as(
        &self,
        task_id: &str,
        tenant: Option<&str>,
    ) -> Result<(Task, String), GatewayError> {
        self.shown(self.find_task(task_id).await?, tenant)
    }

    fn shown(
        &self,
        (task, ctx): (Task, String),
        tenant: Option<&str>,
    ) -> Result<(Task, String), GatewayError> {
        match self.shows(&task, tenant) {
            true => Ok((task, ctx)),
            false => Err(GatewayError::TaskNotFound(task.id)),
        }
    }

    /// Whether `tenant` may see `task` (of a list).
    #[inline]
    pub(crate) fn shows(&self, task: &Task, tenant: Option<&str>) -> bool {
        !self.tenancy.load(Ordering::Relaxed) || visible(task.owner.as_deref(), tenant)
    }

    /// Checks both of what a message names: its task, then its context.
    pub(crate) async fn check_turn(&self, turn: &super::Turn) -> Result<(), GatewayError> {
        let tenant = turn.tenant.as_deref();
        if let Some(t) = &turn.task_id {
            self.check_task(t, tenant).await?;
        }
        if let Some(c) = &turn.context_id {
            self.check_context(c, tenant).await?;
        }
        Ok(())
    }

    /// Whether `owner` may start one more context (`sid.max_contexts_per_caller`, counted on
    /// this replica among the contexts it keeps).
    pub(super) fn within_quota(
        &self,
        contexts: &HashMap<String, Arc<Context>>,
        owner: Option<&str>,
    ) -> Result<(), GatewayError> {
        let (Some(owner), max) = (owner, self.cfg.max_contexts_per_caller) else {
            return Ok(());
        };
        if max == 0 {
            return Ok(());
        }
        let held = contexts
            .values()
            .filter(|c| c.owner.get().is_some_and(|o| &**o == owner))
            .count();
        match held < max {
            true => Ok(()),
            false => Err(GatewayError::CallerContexts(max)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::visible;

    #[test]
    fn an_owned_thing_is_its_owners_and_an_unowned_one_everyones() {
        assert!(visible(None, None));
        assert!(visible(None, Some("jwt:alice")));
        assert!(visible(Some("jwt:alice"), Some("jwt:alice")));
        assert!(!visible(Some("jwt:alice"), Some("jwt:bob")));
        assert!(!visible(Some("jwt:alice"), None));
        // The kind is part of the name: a key called "alice" is not the JWT subject "alice".
        assert!(!visible(Some("jwt:alice"), Some("api_key:alice")));
    }
}
