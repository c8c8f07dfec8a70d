//! What each line sid prints does to its context: the sequence check that drops a replay's
//! repeats, the task model's update, a request's answer handed to its caller, and the updates
//! published.

use std::time::{Instant, SystemTime};

use super::context::{Context, Inner};
use super::reach::Transport;
use crate::model::task::Update;
use crate::wire::raw::{DeltaLine, ServerLine, ServerMessage};

impl Inner {
    /// Counts a line sid printed as activity and tells whether it is news: sid numbers its
    /// lines from 1 per process (0 is a line outside the numbering), and a replay after a
    /// reconnect repeats lines already seen, which are dropped. The one check of a line's
    /// sequence, for messages ([`Context::observe`]) and text deltas ([`Context::on_delta`]).
    fn take_line(&mut self, seq: u64) -> bool {
        self.last_activity = Instant::now();
        if seq != 0 {
            if seq <= self.last_seq {
                return false;
            }
            self.last_seq = seq;
        }
        true
    }
}

impl Context {
    /// Handles one raw line (with its line break); a line that is not UTF-8 is counted and
    /// skipped like any other line that is not protocol 5.
    pub(crate) fn on_bytes(&self, raw: &[u8]) -> bool {
        match std::str::from_utf8(raw) {
            Ok(line) => self.on_line(line.trim_end_matches(['\n', '\r'])),
            Err(e) => {
                metrics::counter!("wiregate_sid_bad_lines_total").increment(1);
                tracing::warn!(context = %self.id, error = %e, "sid printed a line that is not UTF-8");
                false
            }
        }
    }

    /// Handles one line sid printed; `true` when it was the `replay_complete` marker.
    fn on_line(&self, line: &str) -> bool {
        if line.trim().is_empty() {
            return false;
        }
        let msg = match ServerLine::parse(line) {
            Ok(ServerLine::Delta(d)) => {
                self.on_delta(&d);
                return false;
            }
            Ok(ServerLine::Message(m)) => m,
            Err(e) => {
                metrics::counter!("wiregate_sid_bad_lines_total").increment(1);
                tracing::warn!(context = %self.id, error = %e, "sid printed a line that is not protocol 5");
                return false;
            }
        };
        let updates = self.observe(&msg);
        // Published outside the lock, in the order they were made.
        self.publish(updates);
        matches!(msg, ServerMessage::ReplayComplete(_))
    }

    /// A text delta, most lines of a stream: [`observe`](Self::observe) and
    /// [`publish`](Self::publish) of its message, sharing their check of the line
    /// ([`Inner::take_line`]) and leaving out what a delta never is (a `hello` or a `result`), so
    /// without building the message, a list of updates or a map. One clock read stamps both the
    /// task's change and the event, where a message's two steps read one each (a few lines a
    /// turn, against every line of a flood here).
    fn on_delta(&self, line: &DeltaLine<'_>) {
        let now = SystemTime::now();
        let made = {
            let mut inner = self.lock();
            if !inner.take_line(line.sequence) {
                return;
            }
            inner.tracker.observe_delta(line, now)
        };
        self.publish_at(made, now);
    }

    /// Updates the task model with one message; returns the task updates it makes.
    fn observe(&self, msg: &ServerMessage) -> Vec<Update> {
        let mut updates = Vec::new();
        let mut inner = self.lock();
        if let ServerMessage::Hello(h) = msg {
            // A replay repeats the very same hello; any other hello is a new sid process, whose
            // sequence starts again at 1.
            if inner.hello.as_ref() != Some(h) {
                inner.last_seq = 0;
                if inner.hello.is_some() && self.is_socket() {
                    inner.active_turn = None;
                    inner.queued.clear();
                    updates.extend(inner.tracker.fail_open("sid restarted behind the socket"));
                }
            }
            inner.hello = Some(h.clone());
        }
        if !inner.take_line(msg.sequence()) {
            return updates;
        }
        if let ServerMessage::Result(r) = msg {
            if let Some(tx) = inner.pending.remove(&r.request_id) {
                let _ = tx.send(r.clone());
            }
            if inner.active_turn.as_deref() == Some(r.request_id.as_str()) {
                inner.active_turn = None;
                self.start_next(&mut inner);
            }
        }
        let made = inner.tracker.observe(msg);
        if let Some(u) = &made {
            inner.tracker.touch(&u.task_id, SystemTime::now());
        }
        updates.extend(made);
        updates
    }

    fn is_socket(&self) -> bool {
        matches!(self.transport, Transport::Socket(_))
    }
}
