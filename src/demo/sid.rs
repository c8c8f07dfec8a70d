//! A stand-in for `sid --raw` (protocol 5) that behaves as the recordings in
//! `tests/data/sid-raw-v5/` show, for tests, the demo and benchmarks. It runs as its own process
//! (`examples/fake_sid.rs`, or `wiregate demo-sid` for `--demo`), blocking std I/O on purpose:
//! it is sid's stand-in, not part of the gateway.
//!
//! ```sh
//! fake_sid --raw                          # stdio
//! fake_sid --listen unix:///tmp/sid.sock  # one client at a time, history replayed on connect
//! ```
//!
//! A `user_turn`'s text picks the script by the first of these words it contains: `tool` (a MANUAL bash call behind a prompt), `fail` (a
//! provider error that still ends `ok: true`), `think`, `slow` (deltas 50 ms apart), `crash`
//! (exit 3 mid-turn), `hang` (never finish), `garble` (a line that is not UTF-8 and one of protocol 4 before a plain answer), `flood N [PER_SECOND [BYTES]]` (N deltas, pre-formatted, optionally paced and sized), anything else a
//! plain answer; `tool` with `external` also prints `tool_output` under sid's own request id;
//! `hold` or `cancel` answers, then holds the turn at an input prompt (the task stays live, for
//! clients and conformance suites that continue or cancel a task): each answer continues it and
//! holds again, `done` completes it, an `interrupt` (read while it waits, over stdio too) cancels
//! it. With `FAKE_SID_HOLD=1` in its environment every plain turn holds so (what the A2A
//! conformance suite expects of an agent, see README). Like sid, it does not read stdin during a stdio turn except to answer a prompt,
//! answers `busy` meanwhile, and exits 0 on EOF.

use std::io::{BufRead, BufReader, Write};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

/// The start of the system prompt the recordings show.
const SYSTEM_PROMPT: &str = "You are sid, a concise coding agent with access to the current workspace mounted at /.\nUse configured tools when they help accomplish the user's request.\nGround your answers in the files and tool results you can access, explain changes you make, and do not claim to have run commands or changed files unless you actually did.";
const OPS: &str = "`user_turn`, `insert_system_message`, `prompt_response`, `interrupt`, `show_agent`, `list_agents`, `switch_agent`, `compact`, `clear`, `set_spend`, `save_transcript`, `load_transcript`, `stats`, `show_config`, `shutdown`";

/// A socket client: written to, and shut down when the next client connects.
trait Conn: Write + Send {
    fn close(&self);
}

impl Conn for std::os::unix::net::UnixStream {
    fn close(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
}

impl Conn for std::net::TcpStream {
    fn close(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
}

/// Where output goes: stdout, or the current socket client (plus the replay history).
enum Sink {
    Stdout(std::io::Stdout),
    Listen {
        client: Arc<Mutex<Option<Box<dyn Conn>>>>,
        history: Arc<Mutex<Vec<String>>>,
    },
}

struct Sid {
    seq: u64,
    sink: Sink,
    input: Receiver<Option<String>>,
    listen: bool,
    session_id: String,
    prompts: u64,
    tools: u64,
    messages: u64,
}

enum Turn {
    Done,
    Exit,
}

impl Sid {
    fn emit(&mut self, mut v: Value) {
        self.seq += 1;
        v["protocol_version"] = json!(5);
        v["sequence"] = json!(self.seq);
        self.write_line(&v.to_string());
    }

    fn write_line(&mut self, line: &str) {
        self.write_bytes(line.as_bytes());
    }

    /// Writes one line as given, valid UTF-8 or not (the `garble` script's noise).
    fn write_bytes(&mut self, line: &[u8]) {
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

    fn result(&mut self, rid: &str, ok: bool, data: Option<Value>, error: Option<Value>) {
        let mut v = json!({"type": "result", "request_id": rid, "ok": ok});
        if let Some(d) = data {
            v["data"] = d;
        }
        if let Some(e) = error {
            v["error"] = e;
        }
        self.emit(v);
    }

    fn fail(&mut self, rid: &str, code: Option<&str>, message: &str) {
        let error = match code {
            Some(c) => json!({"code": c, "message": message}),
            None => json!({"message": message}),
        };
        self.result(rid, false, None, Some(error));
    }

    fn event(&mut self, rid: &str, event: &str, label: Option<&str>, depth: u64, extra: Value) {
        let mut v = json!({"type": "event", "request_id": rid, "event": event, "label": label, "depth": depth});
        if let Value::Object(m) = extra {
            for (k, x) in m {
                v[k] = x;
            }
        }
        self.emit(v);
    }

    fn turn_data(&self) -> Value {
        json!({"session_id": self.session_id, "session_dir": format!("/home/dev/.sid/sessions/{}", self.session_id),
               "current_agent": "build", "model": "claude-sonnet-4-5"})
    }

    /// What `show_config` answers, and `stats` starts from: the members sid 0.6.0 reports.
    fn config_data(&self) -> Value {
        json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "system_prompt": SYSTEM_PROMPT,
            "temperature": null, "top_p": null, "top_k": null, "stop_sequences": [],
            "thinking": "disabled", "thinking_budget": null, "thinking_adaptive": false, "effort": null,
            "caching_enabled": true,
            "transcript_path": format!("/home/dev/.sid/sessions/{}/transcript.json", self.session_id)})
    }

    /// Parses one request line as sid does, or answers its error.
    fn decode(&mut self, line: &str) -> Option<(String, Value)> {
        let v: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                self.fail(
                    "",
                    Some("invalid_request_json"),
                    &format!("failed to parse raw request JSON: {e}"),
                );
                return None;
            }
        };
        let rid = v["request_id"].as_str().unwrap_or("").to_owned();
        let missing = |f: &str| format!("failed to decode raw request: missing field `{f}`");
        let Some(version) = v.get("protocol_version") else {
            self.fail(&rid, Some("invalid_request"), &missing("protocol_version"));
            return None;
        };
        if v.get("request_id").is_none() {
            self.fail("", Some("invalid_request"), &missing("request_id"));
            return None;
        }
        let Some(op) = v["op"].as_str().map(str::to_owned) else {
            self.fail(&rid, Some("invalid_request"), &missing("op"));
            return None;
        };
        if !OPS.contains(&format!("`{op}`")) {
            let msg = format!(
                "failed to decode raw request: unknown variant `{op}`, expected one of {OPS}"
            );
            self.fail(&rid, Some("invalid_request"), &msg);
            return None;
        }
        for (needs, field) in [
            ("user_turn", "text"),
            ("insert_system_message", "text"),
            ("prompt_response", "prompt_id"),
            ("prompt_response", "response"),
            ("switch_agent", "agent"),
            ("save_transcript", "path"),
            ("load_transcript", "path"),
        ] {
            if op == needs && v.get(field).is_none() {
                self.fail(&rid, Some("invalid_request"), &missing(field));
                return None;
            }
        }
        if version != &json!(5) {
            self.fail(
                &rid,
                Some("unsupported_protocol_version"),
                &format!("unsupported raw protocol version {version}"),
            );
            return None;
        }
        Some((rid, v))
    }

    fn next_line(&mut self) -> Option<String> {
        loop {
            match self.input.recv() {
                Ok(Some(l)) if l.trim().is_empty() => continue,
                Ok(Some(l)) => return Some(l),
                Ok(None) if self.listen => continue,
                Ok(None) | Err(_) => return None,
            }
        }
    }

    fn run(&mut self, resumed: bool) {
        let hello = json!({"type": "hello", "session_id": self.session_id,
            "session_dir": format!("/home/dev/.sid/sessions/{}", self.session_id),
            "workspace_root": "/home/dev/project", "current_agent": "build", "model": "claude-sonnet-4-5",
            "resumed": resumed, "startup_confirmation_required": false, "sandbox_available": false});
        self.emit(hello);
        while let Some(line) = self.next_line() {
            let Some((rid, req)) = self.decode(&line) else {
                continue;
            };
            if let Turn::Exit = self.handle(&rid, &req) {
                return;
            }
        }
    }

    fn handle(&mut self, rid: &str, req: &Value) -> Turn {
        let op = req["op"].as_str().unwrap_or_default();
        match op {
            "user_turn" => {
                self.emit(json!({"type": "request", "request_id": rid, "op": "user_turn", "text": req["text"]}));
                self.messages += 2;
                return self.turn(rid, req["text"].as_str().unwrap_or_default());
            }
            "insert_system_message" => {
                self.emit(json!({"type": "request", "request_id": rid, "op": "insert_system_message", "text": req["text"]}));
                self.messages += 1;
                self.result(rid, true, None, None);
            }
            "stats" => {
                let turns = self.messages / 2;
                let last = |n: u64| (turns > 0).then_some(n);
                let mut data = self.config_data();
                data["message_count"] = json!(self.messages);
                data["session_spend_micro_cents"] = Value::Null;
                data["spend_used_micro_cents"] = json!(0);
                data["total_input_tokens"] = json!(12 * turns);
                data["total_output_tokens"] = json!(5 * turns);
                data["total_requests"] = json!(turns);
                data["last_turn_input_tokens"] = json!(last(12));
                data["last_turn_output_tokens"] = json!(last(5));
                data["total_cache_creation_tokens"] = json!(0);
                data["total_cache_read_tokens"] = json!(0);
                self.result(rid, true, Some(data), None);
            }
            "show_config" => {
                let data = self.config_data();
                self.result(rid, true, Some(data), None);
            }
            "list_agents" => {
                let data = json!({"agents": [{"id": "build", "display_name": null, "description": null, "enabled": "YES", "current": true}]});
                self.result(rid, true, Some(data), None);
            }
            "show_agent" => {
                let data = json!({"id": "build", "display_name": null, "description": null, "enabled": "YES", "current": true, "model": "claude-sonnet-4-5"});
                self.result(rid, true, Some(data), None);
            }
            "switch_agent" => {
                let agent = req["agent"].as_str().unwrap_or_default();
                if agent == "build" {
                    self.result(rid, true, Some(json!({"current_agent": "build"})), None);
                } else {
                    let msg = format!("(error (phase sid-agent) (code unknown_agent) (message \"requested agent is not defined\") (agent \"{agent}\"))");
                    self.fail(rid, None, &msg);
                }
            }
            "load_transcript" | "save_transcript" => {
                let msg = format!("(error (phase sid-cli) (code transcript_load_failed) (message \"transcript operation failed\") (path \"{}\") (cause \"I/O error: failed to open transcript file\"))", req["path"].as_str().unwrap_or_default());
                self.fail(rid, None, &msg);
            }
            "prompt_response" => {
                self.fail(rid, None, "(error (phase sid-cli) (code unexpected_prompt_response) (message \"prompt_response is only valid while the server is waiting on a prompt\"))");
            }
            "interrupt" | "compact" | "clear" | "set_spend" => self.result(rid, true, None, None),
            "shutdown" => {
                let data = json!({"session_id": self.session_id});
                self.result(rid, true, Some(data), None);
                return Turn::Exit;
            }
            _ => unreachable!("decode admits known ops only"),
        }
        Turn::Done
    }

    fn delta(&mut self, rid: &str, text: &str) {
        self.event(
            rid,
            "assistant_text_delta",
            Some("build"),
            0,
            json!({"text": text}),
        );
    }

    fn finish(&mut self, rid: &str, stop: &str) {
        self.finish_with(
            rid,
            stop,
            "[tokens: input=12 cache_creation=0 cached_input=0 output=5 turn=$0.0001 total=$0.0001]",
            (12, 5),
        );
    }

    /// Ends a turn as sid does: the model's two usage lines (as recorded), then agent_finish and
    /// the result.
    fn finish_with(&mut self, rid: &str, stop: &str, tokens: &str, usage: (u64, u64)) {
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

    fn usage(&mut self, rid: &str, (input, output): (u64, u64)) {
        let message = format!("[usage: Usage {{ cache_creation_input_tokens: None, cache_read_input_tokens: None, input_tokens: {input}, output_tokens: {output}, output_tokens_details: None, server_tool_use: None }}]");
        self.event(rid, "info", None, 0, json!({ "message": message }));
    }

    /// Over `--listen`, sid reads while it streams: `interrupt` stops the turn, anything else is busy.
    fn poll_mid_turn(&mut self, turn_rid: &str) -> bool {
        if !self.listen {
            return false;
        }
        let mut interrupted = false;
        while let Ok(Some(line)) = self.input.try_recv() {
            let Some((rid, req)) = self.decode(&line) else {
                continue;
            };
            if req["op"] == "interrupt" {
                self.result(&rid, true, None, None);
                self.event(turn_rid, "interrupted", Some("build"), 0, json!({}));
                interrupted = true;
            } else {
                self.fail(
                    &rid,
                    Some("busy"),
                    "server is busy streaming another request",
                );
            }
        }
        interrupted
    }

    fn turn(&mut self, rid: &str, text: &str) -> Turn {
        self.event(rid, "agent_start", Some("build"), 0, json!({}));
        let mut words = text.split_whitespace();
        let script = [
            "flood", "crash", "hang", "slow", "fail", "think", "tool", "garble", "hold", "cancel",
        ]
        .into_iter()
        .find(|k| text.contains(k))
        .unwrap_or("plain");
        if script == "flood" {
            words.find(|w| *w == "flood");
        }
        match script {
            "tool" => return self.tool_turn(rid, text.contains("external")),
            "hold" | "cancel" => return self.hold_turn(rid),
            "plain" if std::env::var("FAKE_SID_HOLD").is_ok_and(|v| v == "1") => {
                return self.hold_turn(rid)
            }
            "fail" => {
                self.event(
                    rid,
                    "error",
                    None,
                    0,
                    json!({"message": "API error (conversation preserved): 529 overloaded"}),
                );
                let data = self.turn_data();
                self.result(rid, true, Some(data), None);
            }
            "think" => {
                self.event(
                    rid,
                    "thinking_delta",
                    Some("build"),
                    0,
                    json!({"text": "Let me think."}),
                );
                self.delta(rid, "Thought it through.");
                self.finish(rid, "EndTurn");
            }
            "slow" => {
                for i in 0..40 {
                    std::thread::sleep(Duration::from_millis(50));
                    if self.poll_mid_turn(rid) {
                        self.finish(rid, "Interrupted");
                        return Turn::Done;
                    }
                    self.delta(rid, &format!("chunk {i} "));
                }
                self.finish(rid, "EndTurn");
            }
            "garble" => {
                // Two lines a gateway must count and skip: not UTF-8, and not protocol 5.
                self.write_bytes(b"\xff\xfe not UTF-8 \xc3\x28");
                let v4 = format!(
                    r#"{{"type":"event","protocol_version":4,"sequence":{},"request_id":"{rid}","event":"assistant_text_delta","label":"build","depth":0,"text":"v4"}}"#,
                    self.seq + 1
                );
                self.write_line(&v4);
                for t in ["Hello", " from the", " mock model."] {
                    self.delta(rid, t);
                }
                self.finish(rid, "EndTurn");
            }
            "crash" => {
                self.delta(rid, "About to");
                eprintln!("fake_sid: crashing as asked");
                std::process::exit(3);
            }
            "hang" => loop {
                std::thread::sleep(Duration::from_secs(3600));
            },
            "flood" => {
                let n: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(1000);
                // An optional rate (lines per second) paces the flood in bursts of about 1 ms.
                let rate: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                let burst = rate.div_ceil(1000).max(1);
                let pace = (rate > 0).then(|| Duration::from_micros(burst * 1_000_000 / rate));
                // An optional size makes each delta that many bytes of text; `ts` makes each
                // delta the microseconds since the epoch when it was written (for latency).
                let size_word = words.next().unwrap_or("1");
                let stamp = size_word == "ts";
                let chunk = "x".repeat(size_word.parse().unwrap_or(1));
                let mut out = String::with_capacity(256 * 1024);
                for _ in 0..n {
                    self.seq += 1;
                    out.clear();
                    out.push_str(r#"{"type":"event","protocol_version":5,"sequence":"#);
                    out.push_str(&self.seq.to_string());
                    out.push_str(r#","request_id":""#);
                    out.push_str(rid);
                    out.push_str(
                        r#"","event":"assistant_text_delta","label":"build","depth":0,"text":""#,
                    );
                    if stamp {
                        let now = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .unwrap_or_default();
                        out.push_str(&now.as_micros().to_string());
                    } else {
                        out.push_str(&chunk);
                    }
                    out.push_str(r#""}"#);
                    let line = out.clone();
                    self.write_line(&line);
                    if let Some(p) = pace.filter(|_| self.seq % burst == 0) {
                        std::thread::sleep(p);
                    }
                }
                self.finish(rid, "EndTurn");
            }
            _ => {
                for t in ["Hello", " from the", " mock model."] {
                    self.delta(rid, t);
                }
                self.finish(rid, "EndTurn");
            }
        }
        Turn::Done
    }

    /// Answers, then waits at an input prompt: each answer continues the turn and holds again,
    /// `done` completes it, an interrupt cancels it.
    fn hold_turn(&mut self, rid: &str) -> Turn {
        for t in ["Hello", " from the", " mock model."] {
            self.delta(rid, t);
        }
        let mut prompt_id = self.hold_prompt(rid);
        loop {
            let Some(line) = self.next_line() else {
                return Turn::Exit;
            };
            let Some((prid, req)) = self.decode(&line) else {
                continue;
            };
            if req["op"] == "interrupt" {
                self.result(&prid, true, None, None);
                self.event(rid, "interrupted", Some("build"), 0, json!({}));
                self.finish(rid, "Interrupted");
                return Turn::Done;
            }
            if req["op"] != "prompt_response" {
                self.fail(&prid, Some("busy"), "server is waiting for prompt_response");
            } else if req["prompt_id"] != json!(prompt_id) {
                self.fail(
                    &prid,
                    Some("stale_prompt"),
                    "prompt_response does not match the active prompt",
                );
            } else {
                let answer = req["response"].as_str().unwrap_or_default().to_owned();
                self.emit(
                    json!({"type": "prompt_ack", "request_id": rid, "response_request_id": prid,
                    "prompt_id": prompt_id, "response": answer}),
                );
                self.delta(rid, &format!(" Continued: {answer}"));
                if answer.trim() == "done" {
                    self.finish(rid, "EndTurn");
                    return Turn::Done;
                }
                prompt_id = self.hold_prompt(rid);
            }
        }
    }

    fn hold_prompt(&mut self, rid: &str) -> String {
        self.prompts += 1;
        let prompt_id = format!("prompt-{}", self.prompts);
        self.emit(
            json!({"type": "prompt", "request_id": rid, "prompt_id": prompt_id, "kind": "input",
            "message": "The task is held: reply to continue it (done to finish), or cancel it.",
            "choices": []}),
        );
        prompt_id
    }

    fn tool_turn(&mut self, rid: &str, external: bool) -> Turn {
        self.tools += 1;
        let tool_use_id = format!("toolu_mock_bash_{}", self.tools);
        self.delta(rid, "Let me run ");
        self.delta(rid, "a command.");
        self.event(
            rid,
            "tool_use_start",
            Some("build"),
            0,
            json!({"name": "bash", "tool_use_id": tool_use_id}),
        );
        self.event(
            rid,
            "tool_input_delta",
            Some("build"),
            0,
            json!({"partial_json": "{\"command\": "}),
        );
        self.event(
            rid,
            "tool_input_delta",
            Some("build"),
            0,
            json!({"partial_json": "\"echo hi\"}"}),
        );
        self.event(rid, "tool_use_end", Some("build"), 0, json!({}));
        self.event(rid, "response_finish", Some("build"), 0, json!({}));
        self.event(rid, "info", None, 0, json!({"message": "[tokens: input=12 cache_creation=0 cached_input=0 output=20 turn=$0.0003 total=$0.0003]"}));
        self.usage(rid, (12, 20));
        let answer = loop {
            self.prompts += 1;
            let prompt_id = format!("prompt-{}", self.prompts);
            let message = format!(
                "Tool 'bash' is MANUAL.\n{{\n  \"restart\": false,\n  \"cwd\": \"/home/dev/project\",\n  \"writable_roots\": [\n    \"/home/dev/project\",\n    \"/tmp\",\n    \"/home/dev/.sid/sessions/{}\"\n  ],\n  \"command\": \"echo hi\"\n}}\nAllow this call? [yes/no]: ",
                self.session_id
            );
            self.emit(json!({"type": "prompt", "request_id": rid, "prompt_id": prompt_id, "kind": "confirmation",
                "message": message, "choices": ["yes", "no"]}));
            let response = loop {
                let Some(line) = self.next_line() else {
                    return Turn::Exit;
                };
                let Some((prid, req)) = self.decode(&line) else {
                    continue;
                };
                if req["op"] != "prompt_response" {
                    self.fail(&prid, Some("busy"), "server is waiting for prompt_response");
                } else if req["prompt_id"] != json!(prompt_id) {
                    self.fail(
                        &prid,
                        Some("stale_prompt"),
                        "prompt_response does not match the active prompt",
                    );
                } else {
                    break (
                        prid,
                        req["response"].as_str().unwrap_or_default().to_owned(),
                    );
                }
            };
            match response.1.as_str() {
                "yes" | "no" => {
                    self.emit(json!({"type": "prompt_ack", "request_id": rid, "response_request_id": response.0,
                        "prompt_id": prompt_id, "response": response.1}));
                    break response.1;
                }
                _ => self.event(
                    rid,
                    "info",
                    None,
                    0,
                    json!({"message": "Please answer yes or no."}),
                ),
            }
        };
        let label = Some("tool:bash");
        if answer == "yes" && external {
            let tool_rid = format!("sid-tool-{}", self.tools);
            // tool_output has no label or depth, and carries sid's own tool request id.
            self.emit(json!({"type": "event", "request_id": tool_rid, "event": "tool_output", "tool_name": "bash",
                "tool_use_id": tool_use_id, "stream": "stdout", "text": "hi\n"}));
            self.emit(json!({"type": "event", "request_id": tool_rid, "event": "tool_output", "tool_name": "bash",
                "tool_use_id": tool_use_id, "stream": "stderr", "data_b64": "/w=="}));
        }
        if answer == "yes" {
            self.event(
                rid,
                "tool_result_start",
                label,
                1,
                json!({"tool_use_id": tool_use_id, "is_error": false}),
            );
            self.event(
                rid,
                "tool_result_text_delta",
                label,
                1,
                json!({"text": "hi"}),
            );
            self.event(rid, "tool_result_end", label, 1, json!({}));
            self.delta(rid, "The tool ");
            self.delta(rid, "finished.");
        } else {
            self.event(
                rid,
                "tool_result_start",
                label,
                1,
                json!({"tool_use_id": tool_use_id, "is_error": true}),
            );
            self.event(
                rid,
                "tool_result_text_delta",
                label,
                1,
                json!({"text": "The user denied this tool call."}),
            );
            self.event(rid, "tool_result_end", label, 1, json!({}));
            self.delta(rid, "The tool ");
            self.delta(rid, "was denied.");
        }
        self.finish_with(
            rid,
            "EndTurn",
            "[tokens: input=24 cache_creation=0 cached_input=0 output=27 turn=$0.0001 total=$0.0004]",
            (12, 7),
        );
        Turn::Done
    }
}

fn spawn_reader<R: BufRead + Send + 'static>(reader: R, tx: Sender<Option<String>>) {
    std::thread::spawn(move || {
        for line in reader.lines() {
            match line {
                Ok(l) => {
                    if tx.send(Some(l)).is_err() {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = tx.send(None);
    });
}

fn listen(
    spec: &str,
    history: Arc<Mutex<Vec<String>>>,
    client: Arc<Mutex<Option<Box<dyn Conn>>>>,
    tx: Sender<Option<String>>,
) {
    let attach =
        move |write: Box<dyn Conn>, read: Box<dyn BufRead + Send>, tx: &Sender<Option<String>>| {
            let history = history.lock().unwrap();
            let mut write = write;
            for line in history.iter() {
                let _ = writeln!(write, "{line}");
            }
            let _ = writeln!(
                write,
                "{{\"type\":\"replay_complete\",\"protocol_version\":5,\"sequence\":0}}"
            );
            let _ = write.flush();
            // The previous client is dropped: one client at a time.
            if let Some(old) = client.lock().unwrap().replace(write) {
                old.close();
            }
            drop(history);
            spawn_reader(read, tx.clone());
        };
    if let Some(path) = spec.strip_prefix("unix://") {
        let _ = std::fs::remove_file(path);
        let l = std::os::unix::net::UnixListener::bind(path).expect("bind the unix socket");
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let r = s.try_clone().expect("clone the socket");
                attach(Box::new(s), Box::new(BufReader::new(r)), &tx);
            }
        });
    } else if let Some(addr) = spec.strip_prefix("tcp://") {
        let l = std::net::TcpListener::bind(addr).expect("bind the tcp socket");
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let r = s.try_clone().expect("clone the socket");
                attach(Box::new(s), Box::new(BufReader::new(r)), &tx);
            }
        });
    } else {
        eprintln!("fake_sid: --listen wants unix:///path or tcp://host:port");
        std::process::exit(2);
    }
}

/// Runs the fake sid with command-line `args` (without the program name) until it exits.
pub fn run(args: Vec<String>) {
    let listen_spec = args
        .iter()
        .position(|a| a == "--listen")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let resume = args
        .iter()
        .position(|a| a == "--resume")
        .and_then(|i| args.get(i + 1))
        .cloned();
    eprintln!("warning: sandboxing is not available on this host; tools run unsandboxed");
    let session_id = resume.clone().unwrap_or_else(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        format!(
            "2026-11-29T19-09-02.{:06}+0000-{}",
            nanos % 1_000_000,
            std::process::id()
        )
    });
    let (tx, rx) = mpsc::channel();
    let sink = match &listen_spec {
        None => {
            spawn_reader(BufReader::new(std::io::stdin()), tx);
            Sink::Stdout(std::io::stdout())
        }
        Some(spec) => {
            let history = Arc::new(Mutex::new(Vec::new()));
            let client = Arc::new(Mutex::new(None));
            listen(spec, history.clone(), client.clone(), tx);
            Sink::Listen { client, history }
        }
    };
    let mut sid = Sid {
        seq: 0,
        sink,
        input: rx,
        listen: listen_spec.is_some(),
        session_id,
        prompts: 0,
        tools: 0,
        messages: 0,
    };
    sid.run(resume.is_some());
}
