//! A stream a call opens ([`Opened`]), and the ones opened on this replica's contexts: one
//! task's updates or all of a context's, from a resume point or from now on.

use std::sync::Arc;

use super::Bridge;
use crate::events::frames::Filter;
use crate::events::{ReplayLog, Subscription};
use crate::model::error::GatewayError;

/// A stream a call opened: the subscription and what to keep of it.
#[derive(Debug)]
pub struct Opened {
    /// Events to send.
    pub subscription: Subscription,
    /// Which, and until when.
    pub filter: Filter,
    /// The context the events come from.
    pub context_id: String,
}

impl Opened {
    /// One task's events in its context's `queue` after `last_event_id` (all retained ones
    /// when `None`); with `live_if_running`, a task still `running` without a resume point
    /// streams from now on. The same for a local context and a replica's mirror of one.
    pub(super) fn task(
        queue: &Arc<ReplayLog>,
        task_id: &str,
        context_id: String,
        running: bool,
        last_event_id: Option<&str>,
        live_if_running: bool,
    ) -> Result<Opened, GatewayError> {
        let subscription = if last_event_id.is_none() && live_if_running && running {
            queue.subscribe_live()?
        } else {
            queue.subscribe(last_event_id)?
        };
        Ok(Opened {
            subscription,
            filter: Filter {
                task: Some(task_id.to_owned()),
                until_final: true,
                ..Filter::default()
            },
            context_id,
        })
    }
}

impl Bridge {
    /// One task's events after `last_event_id` (all retained ones when `None`); with
    /// `live_if_running`, a running task without a resume point streams from now on.
    pub fn task_stream(
        &self,
        task_id: &str,
        last_event_id: Option<&str>,
        live_if_running: bool,
    ) -> Result<Opened, GatewayError> {
        let ctx = self.context_of(task_id)?;
        let state = ctx
            .task_state(task_id)
            .ok_or_else(|| GatewayError::TaskNotFound(task_id.to_owned()))?;
        let mut opened = Opened::task(
            &ctx.queue,
            task_id,
            ctx.id.clone(),
            !state.is_terminal(),
            last_event_id,
            live_if_running,
        )?;
        opened.filter.stored = ctx.flushed.get().cloned();
        Ok(opened)
    }

    /// Every event of one context after `last_event_id`.
    pub fn context_stream(
        &self,
        context_id: &str,
        last_event_id: Option<&str>,
    ) -> Result<Opened, GatewayError> {
        let ctx = self
            .contexts()
            .get(context_id)
            .cloned()
            .ok_or_else(|| GatewayError::ContextNotFound(context_id.to_owned()))?;
        Ok(Opened {
            subscription: ctx.queue.subscribe(last_event_id)?,
            filter: Filter::default(),
            context_id: ctx.id.clone(),
        })
    }
}
