//! One span per sid turn: from the turn's request to sid until its final update, with its task
//! and context ids. A turn started by a request that records spans is kept here until it ends;
//! every other update costs one load of the count.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::http::span::{Kind, Parent, SpanRecord};

/// Open turns' spans kept at most (a turn that never ends must not grow this without bound).
const MAX_OPEN: usize = 4096;

/// A context's open turns' spans, by task id.
#[derive(Debug, Default)]
pub(crate) struct TurnSpans {
    open: AtomicUsize,
    spans: Mutex<HashMap<String, (Parent, SpanRecord)>>,
}

impl TurnSpans {
    /// Starts task `task_id`'s turn span in context `context_id`, when the current request
    /// records spans.
    pub(crate) fn start(&self, task_id: &str, context_id: &str) {
        let Some(parent) = crate::http::scope::parent() else {
            return;
        };
        let mut span = parent.child(Kind::Internal, "sid turn");
        span.set("wiregate.task_id", task_id);
        span.set("wiregate.context_id", context_id);
        let mut spans = self.spans.lock().unwrap_or_else(|e| e.into_inner());
        if spans.len() >= MAX_OPEN {
            return;
        }
        spans.insert(task_id.to_owned(), (parent, span));
        self.open.store(spans.len(), Ordering::Relaxed);
    }

    /// Ends task `task_id`'s turn span, if it has one: `state` is its final state, `failed`
    /// whether the turn failed.
    pub(crate) fn end(&self, task_id: &str, state: Option<&str>, failed: bool) {
        if self.open.load(Ordering::Relaxed) == 0 {
            return;
        }
        let taken = {
            let mut spans = self.spans.lock().unwrap_or_else(|e| e.into_inner());
            let taken = spans.remove(task_id);
            self.open.store(spans.len(), Ordering::Relaxed);
            taken
        };
        if let Some((parent, mut span)) = taken {
            if let Some(state) = state {
                span.set("wiregate.task_state", state);
            }
            if failed {
                span.fail("task_failed");
            }
            parent.submit(span);
        }
    }
}
