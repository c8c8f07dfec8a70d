//! The fake sid's turn scripts: which one a `user_turn`'s text picks, and what each writes, the
//! `hold` turn's input prompts among them (the `tool` script has its own module).

use std::str::SplitWhitespace;
use std::time::Duration;

use serde_json::json;

use super::{Sid, Turn};

/// The words that pick a script, the first one a turn's text contains winning.
const SCRIPTS: [&str; 11] = [
    "flood", "crash", "hang", "slow", "fail", "think", "tool", "garble", "hold", "cancel",
    "overlong",
];

impl Sid {
    /// Runs a `user_turn`: `agent_start`, then the script its text picks.
    pub(super) fn turn(&mut self, rid: &str, text: &str) -> Turn {
        self.event(rid, "agent_start", Some("build"), 0, json!({}));
        let mut words = text.split_whitespace();
        let script = SCRIPTS
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
            "fail" => self.fail_turn(rid),
            "think" => self.think_turn(rid),
            "slow" => self.slow_turn(rid),
            "garble" => self.garble_turn(rid),
            "overlong" => self.overlong_turn(rid),
            "crash" => self.crash_turn(rid),
            "hang" => hang_turn(),
            "flood" => self.flood_turn(rid, words),
            _ => self.plain_turn(rid),
        }
        Turn::Done
    }

    /// The `fail` script: a provider error, and still a result with `ok: true`.
    fn fail_turn(&mut self, rid: &str) {
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

    /// The `think` script: a thinking delta before the answer.
    fn think_turn(&mut self, rid: &str) {
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

    /// The `slow` script: 40 deltas 50 ms apart, which an interrupt read meanwhile stops.
    fn slow_turn(&mut self, rid: &str) {
        for i in 0..40 {
            std::thread::sleep(Duration::from_millis(50));
            if self.poll_mid_turn(rid) {
                self.finish(rid, "Interrupted");
                return;
            }
            self.delta(rid, &format!("chunk {i} "));
        }
        self.finish(rid, "EndTurn");
    }

    /// The `garble` script: noise, then the plain answer.
    fn garble_turn(&mut self, rid: &str) {
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

    /// The `overlong` script: one line of 12 MiB, longer than `sid.max_line_bytes`'s default,
    /// then the plain answer.
    fn overlong_turn(&mut self, rid: &str) {
        self.write_bytes(&vec![b'x'; 12 << 20]);
        self.plain_turn(rid);
    }

    /// The `crash` script: one delta, then exit 3 with the turn unfinished.
    fn crash_turn(&mut self, rid: &str) -> ! {
        self.delta(rid, "About to");
        eprintln!("fake_sid: crashing as asked");
        std::process::exit(3);
    }

    /// The `flood N [PER_SECOND [BYTES]]` script, `words` being the text's words after `flood`:
    /// N deltas written as pre-formatted lines.
    fn flood_turn(&mut self, rid: &str, mut words: SplitWhitespace<'_>) {
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
            out.push_str(r#"","event":"assistant_text_delta","label":"build","depth":0,"text":""#);
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

    /// A turn no script word picks: the recorded plain answer.
    fn plain_turn(&mut self, rid: &str) {
        for t in ["Hello", " from the", " mock model."] {
            self.delta(rid, t);
        }
        self.finish(rid, "EndTurn");
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

    /// Holds the turn at a new input prompt, and returns the prompt's id.
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
}

/// The `hang` script: the turn never finishes.
fn hang_turn() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
