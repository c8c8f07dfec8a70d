//! sid turns, streamed (`message/stream`) through a random replica, resumed on another with
//! `Last-Event-ID` when the stream breaks; every task must end in a final state.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::faults::{Excused, Kind, Problems};
use crate::load::{post, Outcome, CALL_LIMIT};
use crate::sse::{Body, End, Order, Step};
use crate::Run;

/// Silence longer than this on a turn's stream is a stall (sid's keepalive is 5 s).
const STALL: Duration = Duration::from_secs(20);
/// A broken turn stream is resumed for at most this long.
const RESUME_FOR: Duration = Duration::from_secs(90);

#[derive(Default)]
pub struct TurnStats {
    pub turns: AtomicU64,
    pub completed: AtomicU64,
    pub failed: AtomicU64,
    pub resumed: AtomicU64,
    pub gets: AtomicU64,
    /// Every task a stream named, with its context: each must be final at the end.
    pub tasks: Mutex<Vec<(String, String)>>,
    pub excused: Excused,
    pub problems: Problems,
}

/// Which fault may explain a sid call failing with `code` (a JSON-RPC error code).
fn explains_code(code: &str) -> impl Fn(Kind) -> bool + '_ {
    move |k| match code {
        "-32064" => matches!(
            k,
            Kind::ReplicaKilled(_) | Kind::SidKilled(_) | Kind::RedisRestarted
        ),
        "-32062" => matches!(k, Kind::SidKilled(_)),
        "-32066" => k == Kind::RedisRestarted,
        _ => false,
    }
}

/// Which fault may explain a failed task (its status error's code).
fn explains_failed(code: &str) -> impl Fn(Kind) -> bool + '_ {
    move |k| match code {
        "replica_lost" => matches!(k, Kind::ReplicaKilled(_)),
        _ => matches!(k, Kind::SidKilled(_) | Kind::ReplicaKilled(_)),
    }
}

/// Creates a context on replica `r` (which then runs it) and runs `prefill` quick turns in
/// it, so that its bounded state (the tasks it keeps, its replay log) is full before the
/// warm-up ends: what grows afterwards is a leak, not a cache filling up.
pub async fn new_context(run: &Run, client: &reqwest::Client, r: usize, prefill: usize) -> String {
    let turn = |n: usize, ctx: Option<&str>| {
        let mut p =
            json!({"message": {"role": "user", "parts": [{"kind": "text", "text": "hello"}]}});
        if let Some(c) = ctx {
            p["contextId"] = json!(c);
        }
        json!({"jsonrpc": "2.0", "id": n, "method": "message/send", "params": p})
    };
    let ctx = match post(client, &run.urls[r], &turn(0, None)).await {
        Ok(v) => v["result"]["contextId"]
            .as_str()
            .unwrap_or_else(|| panic!("no context from {v}"))
            .to_owned(),
        Err(o) => panic!("the first turn failed: {o:?}"),
    };
    for n in 1..=prefill {
        match post(client, &run.urls[r], &turn(n, Some(&ctx))).await {
            Ok(v) if v["result"]["status"]["state"] == "completed" => {}
            other => panic!("prefill turn {n} in {ctx}: {other:?}"),
        }
    }
    ctx
}

struct Turn<'a> {
    run: &'a Run,
    stats: &'a TurnStats,
    client: &'a reqwest::Client,
    ctx: &'a str,
    from: f64,
    order: Order,
    task: Option<String>,
}

impl Turn<'_> {
    fn problem(&self, what: String) {
        self.stats.problems.add(format!(
            "t={:.1}s context {} task {:?}: {what}",
            self.from, self.ctx, self.task
        ));
    }

    /// Reads frames until the final update and the end of the stream; `Err` when the stream
    /// broke first (the caller resumes).
    async fn read(&mut self, mut body: Body, r: usize) -> Result<(), End> {
        loop {
            let f = body.next().await?;
            match self.order.step(&f) {
                Step::Next(_) => {}
                Step::Gap => {
                    // Updates the dead owner streamed but never stored are told as a gap.
                    self.excuse_or_report(&format!("a gap frame on r{}", r + 1), r, true);
                    continue;
                }
                s => {
                    self.problem(format!("on r{}: {s:?}", r + 1));
                    continue;
                }
            }
            let v = f.json().unwrap_or_default();
            let p = &v["params"];
            if self.task.is_none() {
                if let Some(t) = p["taskId"].as_str() {
                    self.task = Some(t.to_owned());
                    self.stats
                        .tasks
                        .lock()
                        .unwrap()
                        .push((t.to_owned(), self.ctx.to_owned()));
                }
            }
            if p["final"] == true {
                self.finished(p);
                return match body.next().await {
                    Err(End::Closed) => Ok(()),
                    other => {
                        self.problem(format!("after the final update: {other:?}"));
                        Ok(())
                    }
                };
            }
        }
    }

    fn finished(&self, p: &Value) {
        let state = p["state"].as_str().unwrap_or("");
        match state {
            "completed" => {
                self.stats.completed.fetch_add(1, Ordering::Relaxed);
            }
            "failed" => {
                self.stats.failed.fetch_add(1, Ordering::Relaxed);
                let code = p["error"]["code"].as_str().unwrap_or("none").to_owned();
                let to = self.run.timeline.now();
                match self
                    .run
                    .timeline
                    .explaining(self.from, to, explains_failed(&code))
                {
                    Some(k) => self.stats.excused.note(format!("task failed ({code})"), k),
                    None => self.problem(format!("failed with no fault to explain it: {p}")),
                }
            }
            other => self.problem(format!("final update in state {other:?}: {p}")),
        }
    }

    /// Resumes the task's stream on other replicas until its final update.
    async fn resume(&mut self, mut on: usize, why: End) {
        let Some(task) = self.task.clone() else {
            // Nothing named the task: the turn's own answer never began.
            self.excuse_or_report(
                &format!("stream broke before any update: {why:?}"),
                on,
                true,
            );
            return;
        };
        self.excuse_or_report(&format!("stream broke: {why:?}"), on, true);
        self.stats.resumed.fetch_add(1, Ordering::Relaxed);
        let give_up = tokio::time::Instant::now() + RESUME_FOR;
        while tokio::time::Instant::now() < give_up {
            on = (on + 1) % self.run.urls.len();
            let mut req = self
                .client
                .get(format!("{}/tasks/{task}/events", self.run.urls[on]))
                .header("accept", "text/event-stream");
            if let Some(l) = self.order.last {
                req = req.header("last-event-id", l.to_string());
            }
            match tokio::time::timeout(CALL_LIMIT, req.send()).await {
                Ok(Ok(resp)) if resp.status().is_success() => {
                    match self.read(Body::new(resp, STALL), on).await {
                        Ok(()) => return,
                        Err(e) => {
                            self.excuse_or_report(&format!("resumed stream broke: {e:?}"), on, true)
                        }
                    }
                }
                Ok(Ok(resp)) => {
                    let status = resp.status();
                    let text = resp.text().await.unwrap_or_default();
                    let code = serde_json::from_str::<Value>(&text)
                        .map(|v| v["error"]["code"].to_string())
                        .unwrap_or_default();
                    self.excuse_or_report(
                        &format!("resume answered HTTP {status} {code}"),
                        on,
                        false,
                    );
                }
                Ok(Err(_)) => {}
                Err(_) => self.problem(format!("resume on r{} hung", on + 1)),
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        self.problem(format!("no final update within {RESUME_FOR:?} of resuming"));
    }

    /// A broken stream or a refused resume is excused by a replica's death (the one it was
    /// on, or the owner's), a restart of Redis, or a sid child killed.
    fn excuse_or_report(&self, what: &str, _on: usize, broke: bool) {
        let to = self.run.timeline.now();
        let by = self.run.timeline.explaining(self.from, to, |k| {
            matches!(k, Kind::ReplicaKilled(_) | Kind::RedisRestarted)
                || (!broke && matches!(k, Kind::SidKilled(_)))
        });
        match by {
            Some(k) => {
                let what = what.split(':').next().unwrap_or(what).to_owned();
                self.stats.excused.note(format!("turn: {what}"), k);
            }
            None => self.problem(what.to_owned()),
        }
    }
}

/// One context's turns until the load stops.
pub async fn turns(i: usize, ctx: String, run: Arc<Run>, stats: Arc<TurnStats>) {
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let texts = ["hi there", "flood 40 20", "think about it", "hello again"];
    let mut n = 0u64;
    while !run.load_stopped() {
        n += 1;
        let r = fastrand::usize(..run.urls.len());
        let text = texts[fastrand::usize(..texts.len())];
        stats.turns.fetch_add(1, Ordering::Relaxed);
        let mut turn = Turn {
            run: &run,
            stats: &stats,
            client: &client,
            ctx: &ctx,
            from: run.timeline.now(),
            order: Order::default(),
            task: None,
        };
        let body = json!({"jsonrpc": "2.0", "id": format!("c{i}-{n}"), "method": "message/stream",
                          "params": {"contextId": ctx, "message": {"role": "user",
                                     "parts": [{"kind": "text", "text": text}]}}});
        let sent = client
            .post(format!("{}/rpc", run.urls[r]))
            .header("accept", "text/event-stream")
            .json(&body)
            .send();
        match tokio::time::timeout(CALL_LIMIT, sent).await {
            Err(_) => turn.problem(format!("message/stream on r{} hung", r + 1)),
            Ok(Err(e)) => {
                let to = run.timeline.now();
                match run
                    .timeline
                    .explaining(turn.from, to, |k| k == Kind::ReplicaKilled(r))
                {
                    Some(k) => stats.excused.note("turn: no HTTP answer".into(), k),
                    None => turn.problem(format!("message/stream on r{}: {e}", r + 1)),
                }
            }
            Ok(Ok(resp)) => {
                let sse = resp
                    .headers()
                    .get("content-type")
                    .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
                if sse {
                    if let Err(why) = turn.read(Body::new(resp, STALL), r).await {
                        turn.resume(r, why).await;
                    }
                } else {
                    let text = resp.text().await.unwrap_or_default();
                    let code = serde_json::from_str::<Value>(&text)
                        .map(|v| v["error"]["code"].to_string())
                        .unwrap_or_default();
                    let to = run.timeline.now();
                    match run.timeline.explaining(turn.from, to, explains_code(&code)) {
                        Some(k) => stats.excused.note(format!("turn: error {code}"), k),
                        None => turn.problem(format!("message/stream on r{}: {text:.300}", r + 1)),
                    }
                }
            }
        }
        if let (Some(task), true) = (turn.task.clone(), fastrand::f64() < 0.25) {
            read_back(&run, &client, &task, &stats, turn.from).await;
        }
        tokio::time::sleep(Duration::from_millis(100 + fastrand::u64(..600))).await;
    }
}

/// `tasks/get` on a random replica right after the turn: final there too.
async fn read_back(run: &Run, client: &reqwest::Client, task: &str, stats: &TurnStats, from: f64) {
    let r = fastrand::usize(..run.urls.len());
    let get = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": task}});
    let got = post(client, &run.urls[r], &get).await;
    let to = run.timeline.now();
    let state = match &got {
        Ok(v) => v["result"]["status"]["state"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
        Err(_) => String::new(),
    };
    if matches!(state.as_str(), "completed" | "failed") {
        stats.gets.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let explained = match &got {
        Err(Outcome::Transport(_)) => run
            .timeline
            .explaining(from, to, |k| k == Kind::ReplicaKilled(r)),
        Ok(v) if v.get("error").is_some() => {
            let code = v["error"]["code"].to_string();
            run.timeline.explaining(from, to, explains_code(&code))
        }
        // Still working: the stream broke and the take-over has yet to fail it.
        Ok(_) => run
            .timeline
            .explaining(from, to, |k| matches!(k, Kind::ReplicaKilled(_))),
        Err(_) => None,
    };
    match explained {
        Some(k) => stats
            .excused
            .note("tasks/get right after the turn: not final".into(), k),
        None => stats.problems.add(format!(
            "t={from:.1}s tasks/get {task} on r{}: {got:?}",
            r + 1
        )),
    }
}

/// At the end: every task any stream named is in a final state, read on replica `r`.
pub async fn all_final(run: &Run, stats: &TurnStats) -> (u64, u64) {
    let client = reqwest::Client::new();
    let tasks = stats.tasks.lock().unwrap().clone();
    let (mut ok, mut bad) = (0, 0);
    for (i, (task, ctx)) in tasks.iter().enumerate() {
        let r = i % run.urls.len();
        let get = json!({"jsonrpc": "2.0", "id": i, "method": "tasks/get", "params": {"id": task}});
        let got = post(&client, &run.urls[r], &get).await;
        let state = got
            .as_ref()
            .ok()
            .and_then(|v| v["result"]["status"]["state"].as_str())
            .unwrap_or("");
        if matches!(state, "completed" | "failed" | "canceled") {
            ok += 1;
        } else {
            bad += 1;
            stats.problems.add(format!(
                "at the end, task {task} of {ctx} on r{}: {got:?}",
                r + 1
            ));
        }
    }
    (ok, bad)
}
