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
//! (exit 3 mid-turn), `hang` (never finish), `garble` (a line that is not UTF-8 and one of protocol 4 before a plain answer), `overlong` (a 12 MiB line before a plain answer), `flood N [PER_SECOND [BYTES]]` (N deltas, pre-formatted, optionally paced and sized), anything else a
//! plain answer; `tool` with `external` also prints `tool_output` under sid's own request id;
//! `hold` or `cancel` answers, then holds the turn at an input prompt (the task stays live, for
//! clients and conformance suites that continue or cancel a task): each answer continues it and
//! holds again, `done` completes it, an `interrupt` (read while it waits, over stdio too) cancels
//! it. With `FAKE_SID_HOLD=1` in its environment every plain turn holds so (what the A2A
//! conformance suite expects of an agent, see docs/a2a.md). Like sid, it does not read stdin during a stdio turn except to answer a prompt,
//! answers `busy` meanwhile, and exits 0 on EOF.

mod listen;
mod ops;
mod output;
mod request;
mod scripts;
mod tool;

use std::io::BufReader;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};

use serde_json::json;

use listen::{listen, spawn_reader};
use output::Sink;

/// The fake sid: where it writes, what it reads, and the counters its ids and stats come from.
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

/// What is next after a request: the next request, or the fake sid's exit.
enum Turn {
    Done,
    Exit,
}

impl Sid {
    /// Says hello, then answers each request until EOF or `shutdown`.
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
