//! What the fake sid writes: each line numbered and sent to stdout or the socket client, and the
//! results and events its answers and turns are made of.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::listen::Conn;
use super::Sid;

/// Where output goes: stdout, or the current socket client (plus the replay history).
pub(super) enum Sink {
    Stdout(std::io::Stdout),
    Listen {
        client: Arc<Mutex<Option<Box<dyn Conn>>>>,
        history: Arc<Mutex<Vec<String>>>,
    },
}

impl Sid {
    /// Writes `v` as the next protocol 5 line: its `protocol_version` and `sequence` set.
    pub(super) fn emit(&mut self, mut v: Value) {
        self.seq += 1;
        v["protocol_version"] = json!(5);
        v["sequence"] = json!(self.seq);
        self.write_line(&v.to_string());
    }

    pub(super) fn write_line(&mut self, line: &str) {
        self.write_bytes(line.as_bytes());
    }

    /// Writes one line as given, valid UTF-8 or not (the `garble` script's noise).
    pub(super) fn write_bytes(&mut self, line: &[u8]) {
        match &mut self.sink {
            Sink::Stdout(out) => {
                let mut out = out.lock();
                let _ = out.write_all(line);
                let _ = out.write_all(b"\n");
                let _ = out.flush();
            }
            Sink::Listen { client, history } => {
                // History and the live client change together, so a new client sees each line once.
                let mut history = history.lock().unwrap();
                history.push(String::from_utf8_lossy(line).into_owned());
                let mut client = client.lock().unwrap();
                if let Some(c) = client.as_mut() {
                    if c.write_all(&[line, b"\n"].concat())
                        .and_then(|_| c.flush())
                        .is_err()
                    {
                        *client = None;
                    }
                }
            }
        }
    }

    /// The `result` line that answers request `rid`.
    pub(super) fn result(
        &mut self,
        rid: &str,
        ok: bool,
        data: Option<Value>,
        error: Option<Value>,
    ) {
        let mut v = json!({"type": "result", "request_id": rid, "ok": ok});
        if let Some(d) = data {
            v["data"] = d;
        }
        if let Some(e) = error {
            v["error"] = e;
        }
        self.emit(v);
    }

    /// A failed result, its error with a `code` or (as sid's own errors have) without one.
    pub(super) fn fail(&mut self, rid: &str, code: Option<&str>, message: &str) {
        let error = match code {
            Some(c) => json!({"code": c, "message": message}),
            None => json!({"message": message}),
        };
        self.result(rid, false, None, Some(error));
    }

    /// An `event` line of request `rid`'s turn, `extra`'s members added.
    pub(super) fn event(
        &mut self,
        rid: &str,
        event: &str,
        label: Option<&str>,
        depth: u64,
        extra: Value,
    ) {
        let mut v = json!({"type": "event", "request_id": rid, "event": event, "label": label, "depth": depth});
        if let Value::Object(m) = extra {
            for (k, x) in m {
                v[k] = x;
            }
        }
        self.emit(v);
    }

    /// The `data` of a turn's result.
    pub(super) fn turn_data(&self) -> Value {
        json!({"session_id": self.session_id, "session_dir": format!("/home/dev/.sid/sessions/{}", self.session_id),
               "current_agent": "build", "model": "claude-sonnet-4-5"})
    }

    /// One `assistant_text_delta` of the model's answer.
    pub(super) fn delta(&mut self, rid: &str, text: &str) {
        self.event(
            rid,
            "assistant_text_delta",
            Some("build"),
            0,
            json!({"text": text}),
        );
    }

    /// Ends a turn with the usage of a one-response turn.
    pub(super) fn finish(&mut self, rid: &str, stop: &str) {
        self.finish_with(
            rid,
            stop,
            "[tokens: input=12 cache_creation=0 cached_input=0 output=5 turn=$0.0001 total=$0.0001]",
            (12, 5),
        );
    }

    /// Ends a turn as sid does: the model's two usage lines (as recorded), then agent_finish and
    /// the result.
    pub(super) fn finish_with(&mut self, rid: &str, stop: &str, tokens: &str, usage: (u64, u64)) {
        self.event(rid, "response_finish", Some("build"), 0, json!({}));
        self.event(rid, "info", None, 0, json!({ "message": tokens }));
        self.usage(rid, usage);
        self.event(
            rid,
            "agent_finish",
            Some("build"),
            0,
            json!({"stop_reason": stop}),
        );
        let data = self.turn_data();
        self.result(rid, true, Some(data), None);
    }

    /// The model's usage line, as sid prints it.
    pub(super) fn usage(&mut self, rid: &str, (input, output): (u64, u64)) {
        let message = format!("[usage: Usage {{ cache_creation_input_tokens: None, cache_read_input_tokens: None, input_tokens: {input}, output_tokens: {output}, output_tokens_details: None, server_tool_use: None }}]");
        self.event(rid, "info", None, 0, json!({ "message": message }));
    }
}
