//! A read-only list of the bridge's contexts and their tasks, for the console's Agents view
//! (nothing on the JSON-RPC surface lists contexts).

use serde::Serialize;

use super::reach::Transport;
use super::Bridge;

/// Most contexts listed, and most tasks listed per context (open tasks first).
pub(crate) const MAX_LISTED: usize = 200;

/// One context as the console lists it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextView {
    /// The context id.
    pub id: String,
    /// `child` (one `sid --raw`) or `socket` (the attached `sid --listen`).
    pub transport: &'static str,
    /// sid is running (or the socket connected).
    pub running: bool,
    /// The task running now.
    pub active_task: Option<String>,
    /// Milliseconds since its last request or line.
    pub idle_ms: u64,
    /// Why sid last stopped.
    pub exit_reason: Option<String>,
    /// Its known tasks: open ones first, then by id.
    pub tasks: Vec<TaskView>,
}

/// One task: its id and state.
#[derive(Debug, Serialize)]
pub struct TaskView {
    /// The task id.
    pub id: String,
    /// `submitted`, `working`, `input-required`, `completed`, `failed`, `canceled`.
    pub state: &'static str,
}

impl Bridge {
    /// The contexts (by id) and their tasks, each list bounded by [`MAX_LISTED`].
    pub fn list_contexts(&self) -> Vec<ContextView> {
        let mut contexts: Vec<_> = self.contexts().values().cloned().collect();
        contexts.sort_by(|a, b| a.id.cmp(&b.id));
        contexts.truncate(MAX_LISTED);
        let index: Vec<(String, String)> = self
            .task_index()
            .iter()
            .map(|(t, c)| (t.clone(), c.clone()))
            .collect();
        contexts
            .iter()
            .map(|ctx| {
                let mut tasks: Vec<TaskView> = index
                    .iter()
                    .filter(|(_, c)| *c == ctx.id)
                    .filter_map(|(t, _)| {
                        ctx.task_state(t).map(|s| TaskView {
                            id: t.clone(),
                            state: s.as_str(),
                        })
                    })
                    .collect();
                tasks.sort_by(|a, b| {
                    let done = |t: &TaskView| {
                        crate::model::task::TaskState::parse(t.state)
                            .is_some_and(|s| s.is_terminal())
                    };
                    done(a).cmp(&done(b)).then_with(|| a.id.cmp(&b.id))
                });
                tasks.truncate(MAX_LISTED);
                ContextView {
                    id: ctx.id.clone(),
                    transport: match ctx.transport {
                        Transport::Stdio(_) => "child",
                        Transport::Socket(_) => "socket",
                    },
                    running: ctx.is_running(),
                    active_task: ctx.active_turn(),
                    idle_ms: ctx.idle_for().as_millis() as u64,
                    exit_reason: ctx.exit_reason(),
                    tasks,
                }
            })
            .collect()
    }
}
