//! A context's turns: one at a time on sid, the ones that arrive meanwhile queued in order and
//! started as each turn ends, and a queued one canceled without sid ever hearing of it.

use std::time::SystemTime;

use super::context::{Context, Inner, SendError};
use crate::wire::raw::{ClientLine, Op};

impl Context {
    /// Starts a user turn as task `task_id`; `message_id` is the client's id of the message,
    /// `owner` the caller the task belongs to (tenancy).
    pub(crate) fn start_turn(
        &self,
        task_id: &str,
        text: String,
        message_id: Option<&str>,
        owner: Option<&str>,
    ) -> Result<(), SendError> {
        self.turn_spans.start(task_id, &self.id);
        let mut inner = self.lock();
        self.start_locked(&mut inner, task_id, text, message_id, owner)
            .inspect_err(|_| self.turn_spans.end(task_id, None, true))
    }

    fn start_locked(
        &self,
        inner: &mut Inner,
        task_id: &str,
        text: String,
        message_id: Option<&str>,
        owner: Option<&str>,
    ) -> Result<(), SendError> {
        Self::begin(inner, task_id, &text, message_id, owner);
        inner.active_turn = Some(task_id.to_owned());
        let line = ClientLine::new(task_id, Op::UserTurn { text });
        self.write(inner, &line).inspect_err(|_| {
            inner.active_turn = None;
        })
    }

    /// Starts a user turn as task `task_id`, or, while another turn of this context runs (or
    /// waits for input), queues it as a submitted task that starts when the turns before it
    /// have ended; at most `sid.max_queued_requests` wait.
    pub(crate) fn start_or_queue_turn(
        &self,
        task_id: &str,
        text: String,
        message_id: Option<&str>,
        owner: Option<&str>,
    ) -> Result<(), SendError> {
        self.turn_spans.start(task_id, &self.id);
        self.queue_turn(task_id, text, message_id, owner)
            .inspect_err(|_| self.turn_spans.end(task_id, None, true))
    }

    fn queue_turn(
        &self,
        task_id: &str,
        text: String,
        message_id: Option<&str>,
        owner: Option<&str>,
    ) -> Result<(), SendError> {
        let mut inner = self.lock();
        if inner.active_turn.is_none() && inner.queued.is_empty() {
            return self.start_locked(&mut inner, task_id, text, message_id, owner);
        }
        if inner.queued.len() >= self.max_queued {
            return Err(SendError::Busy(format!(
                "sid context {} already has {} turns queued (sid.max_queued_requests)",
                self.id, self.max_queued
            )));
        }
        if !inner.running {
            return Err(SendError::Gone(
                inner
                    .exit_reason
                    .clone()
                    .unwrap_or_else(|| "sid is not connected".into()),
            ));
        }
        Self::begin(&mut inner, task_id, &text, message_id, owner);
        inner.queued.push_back((task_id.to_owned(), text));
        Ok(())
    }

    /// Registers the task, owned from its first update on (so no replica ever reads it
    /// unowned).
    fn begin(
        inner: &mut Inner,
        task_id: &str,
        text: &str,
        message_id: Option<&str>,
        owner: Option<&str>,
    ) {
        inner
            .tracker
            .begin_turn(task_id, Some((text, message_id)), SystemTime::now());
        if let Some(o) = owner {
            inner.tracker.own(task_id, o);
        }
    }

    /// Cancels a queued task (sid never hears of it); `false` when it is not queued.
    pub(crate) fn cancel_queued(&self, task_id: &str) -> bool {
        let mut inner = self.lock();
        let Some(pos) = inner.queued.iter().position(|(t, _)| t == task_id) else {
            return false;
        };
        inner.queued.remove(pos);
        let update = inner.tracker.cancel_unsent(task_id);
        if update.is_some() {
            inner.tracker.touch(task_id, SystemTime::now());
        }
        drop(inner);
        self.publish(update);
        true
    }

    /// The turn ended: sends the next queued one, if any.
    pub(super) fn start_next(&self, inner: &mut Inner) {
        let Some((task_id, text)) = inner.queued.pop_front() else {
            return;
        };
        inner.active_turn = Some(task_id.clone());
        let line = ClientLine::new(&task_id, Op::UserTurn { text });
        if let Err(e) = self.write(inner, &line) {
            // sid is going away: the task fails with the others when it is gone.
            tracing::warn!(context = %self.id, task = %task_id, error = ?e, "a queued turn could not be sent");
        }
    }
}
