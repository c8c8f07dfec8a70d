//! What the bridge sends sid for a client: a turn (started, queued behind the running one, or
//! refused busy), the answer to a task's open prompt, and the interrupt that cancels a task.

use std::sync::Arc;
use std::time::Duration;

use super::context::Context;
use super::errors::{gone, sid_error};
use super::{Bridge, Opened};
use crate::events::frames::Filter;
use crate::model::error::GatewayError;
use crate::model::task::{Task, TaskState};
use crate::wire::raw::{Op, ResultLine};

/// How long `tasks/cancel` waits for sid to answer its interrupt.
const CANCEL_WAIT: Duration = Duration::from_secs(1);

/// One message for sid, whatever dialect it came in: a new turn, or the answer to a prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Turn {
    /// What the user says.
    pub text: String,
    /// Continue this context (a new child otherwise, or the attached socket).
    pub context_id: Option<String>,
    /// Answer this task's open prompt instead of starting a turn.
    pub task_id: Option<String>,
    /// The client's `messageId`, kept in the task's history.
    pub message_id: Option<String>,
    /// A new turn for a context that is running another: queue it as a submitted task that
    /// starts when the turns before it end (A2A, where a context holds several tasks), rather
    /// than refuse it -32060 busy (the seed dialect's contract).
    pub queue: bool,
    /// The verified caller sending it (`kind:id`, with `[auth]`): a context it starts and the
    /// task are its own ([`tenancy`](super::tenancy)).
    pub tenant: Option<std::sync::Arc<str>>,
}

/// What `tasks/cancel` did.
#[derive(Debug)]
pub struct Canceled {
    /// The task after the interrupt.
    pub task: Task,
    /// Its context.
    pub context_id: String,
    /// Why the task may still finish its turn, when it may.
    pub note: Option<&'static str>,
}

impl Bridge {
    /// Sends a turn (or a prompt answer) and, with `wait`, waits until its task settles
    /// (terminal or input-required). Returns the task and its context.
    pub async fn send_turn(&self, turn: &Turn, wait: bool) -> Result<(Task, String), GatewayError> {
        self.here_or_refuse(turn).await?;
        let (ctx, task) = self.begin_send(turn).await?;
        if wait {
            ctx.settled(&task).await;
            Self::flushed(&ctx).await;
        }
        let model = ctx.task(&task).ok_or(GatewayError::TaskNotFound(task))?;
        Ok((model, ctx.id.clone()))
    }

    /// Sends a turn and opens the stream of its task's updates, subscribed before the turn
    /// starts so not one event is missed. Returns the stream and the task.
    pub async fn stream_turn(&self, turn: &Turn) -> Result<(Opened, Task), GatewayError> {
        self.here_or_refuse(turn).await?;
        let ctx = self.context_for(turn)?;
        let subscription = ctx.queue.subscribe_live()?;
        let (ctx, task) = self.begin_send_on(ctx, turn).await?;
        let model = ctx
            .task(&task)
            .ok_or(GatewayError::TaskNotFound(task.clone()))?;
        Ok((
            Opened {
                subscription,
                filter: Filter {
                    task: Some(task),
                    until_final: true,
                    until_input_required: false,
                    stored: ctx.flushed.get().cloned(),
                },
                context_id: ctx.id.clone(),
            },
            model,
        ))
    }

    pub(super) async fn begin_send(
        &self,
        turn: &Turn,
    ) -> Result<(Arc<Context>, String), GatewayError> {
        let ctx = self.context_for(turn)?;
        self.begin_send_on(ctx, turn).await
    }

    /// Starts a turn, or answers the open prompt of `taskId`; returns the task.
    async fn begin_send_on(
        &self,
        ctx: Arc<Context>,
        turn: &Turn,
    ) -> Result<(Arc<Context>, String), GatewayError> {
        let text = turn.text.clone();
        if let Some(task) = turn.task_id.clone() {
            self.answer_prompt(&ctx, &task, text, turn.message_id.as_deref())
                .await?;
            return Ok((ctx, task));
        }
        if let Some(busy) = ctx.active_turn().filter(|_| !turn.queue) {
            return Err(GatewayError::SidBusy(format!(
                "context {} is running task {busy}; wait for it, or answer its prompt with taskId",
                ctx.id
            )));
        }
        let task = uuid::Uuid::new_v4().to_string();
        self.task_index().insert(task.clone(), ctx.id.clone());
        let message_id = turn.message_id.as_deref();
        let owner = self.owner_for(turn.tenant.as_deref());
        let started = match turn.queue {
            true => ctx.start_or_queue_turn(&task, text, message_id, owner),
            false => ctx.start_turn(&task, text, message_id, owner),
        };
        if let Err(e) = started {
            self.task_index().remove(&task);
            return Err(gone(e));
        }
        Ok((ctx, task))
    }

    async fn answer_prompt(
        &self,
        ctx: &Arc<Context>,
        task: &str,
        text: String,
        message_id: Option<&str>,
    ) -> Result<(), GatewayError> {
        let Some(prompt_id) = ctx.open_prompt(task) else {
            let state = ctx.task_state(task).map_or("unknown", TaskState::as_str);
            return Err(GatewayError::InvalidParams(format!(
                "task {task} is not waiting for input (it is {state}); send without taskId to start a new task"
            )));
        };
        // Noted before sid hears it, so the history keeps the order of the exchange.
        ctx.note_answer(task, &text, message_id);
        let (_, answered) = ctx
            .request(Op::PromptResponse {
                prompt_id: prompt_id.clone(),
                response: text,
            })
            .map_err(gone)?;
        // sid acknowledges an accepted answer with prompt_ack (no result); a refusal is a result.
        let moved_on =
            ctx.wait_until(|c| c.open_prompt(task).as_deref() != Some(prompt_id.as_str()));
        tokio::select! {
            r = answered => match r {
                Ok(ResultLine { ok: false, error, .. }) => Err(sid_error(error.as_ref())),
                _ => Ok(()),
            },
            _ = moved_on => Ok(()),
        }
    }

    /// Interrupts a task's turn; a finished task cannot be canceled.
    pub async fn cancel(&self, id: &str) -> Result<Canceled, GatewayError> {
        let ctx = self.context_of(id)?;
        let state = ctx
            .task_state(id)
            .ok_or_else(|| GatewayError::TaskNotFound(id.to_owned()))?;
        if state.is_terminal() {
            return Err(GatewayError::TaskNotCancelable {
                id: id.to_owned(),
                state: state.as_str(),
            });
        }
        // A turn still queued never reached sid: it ends here, the running turn untouched.
        if ctx.cancel_queued(id) {
            let task = ctx
                .task(id)
                .ok_or_else(|| GatewayError::TaskNotFound(id.to_owned()))?;
            return Ok(Canceled {
                task,
                context_id: ctx.id.clone(),
                note: None,
            });
        }
        let (_, answer) = ctx.request(Op::Interrupt).map_err(gone)?;
        let note = match tokio::time::timeout(CANCEL_WAIT, answer).await {
            Ok(Ok(ResultLine {
                ok: false, error, ..
            })) => return Err(sid_error(error.as_ref())),
            Ok(Ok(_)) => {
                // sid took the interrupt (over --listen, or at a prompt): wait briefly for the
                // turn to end, so the answer shows the task canceled.
                let ended = ctx.wait_until(|c| c.task_state(id).is_none_or(TaskState::is_terminal));
                let _ = tokio::time::timeout(CANCEL_WAIT, ended).await;
                None
            }
            Ok(Err(_)) => return Err(GatewayError::SidUnavailable("sid stopped".into())),
            Err(_) => Some(
                "sid over stdio reads the interrupt only when the current turn ends; the task \
                 finishes its turn first",
            ),
        };
        let task = ctx
            .task(id)
            .ok_or_else(|| GatewayError::TaskNotFound(id.to_owned()))?;
        Ok(Canceled {
            task,
            context_id: ctx.id.clone(),
            note,
        })
    }
}
