//! Soak client: drives a running release `wiregate` for a given time and checks it. Started by
//! `benches/soak.sh`, which also starts the gateway, the legacy upstream (whose event feed
//! drops every minute) and the fake sid, and reads the gateway's log afterwards.
//!
//! ```sh
//! soak_client --gateway http://127.0.0.1:19102 --pid GATEWAY_PID --secs 1800 --warmup 150 \
//!             --samples samples.csv
//! ```
//!
//! What it does, all at once, on loopback only:
//! - proxied load: `--load-conns` connections sending `--rate` calls/s in all, a mix of JSON-RPC
//!   calls, batches and legacy envelopes that the gateway translates to the legacy upstream;
//!   every answer is checked (status 2xx, ids, results echoed back);
//! - sid turns: `--contexts` sid contexts, each running turns (plain, thinking and 2-second
//!   streaming ones) with pauses of up to `--turn-pause` ms (1 500) between them, every answer
//!   checked to be a completed task, a quarter read back with `tasks/get`; before the soak each
//!   context runs `--prefill` quick turns (1 100), so its bounded state (1 024 retained tasks,
//!   the replay log) is full before the warm-up ends and what still grows afterwards is a leak,
//!   not a cache filling up;
//! - `--subscribers` SSE subscribers, half on `GET /events` (the domain-event feed), half on
//!   `GET /contexts/{id}/events`, each disconnecting after a random time (exponential, mean
//!   `--disconnect-mean` s) and resuming with `Last-Event-ID` after up to 1.5 s; every id must
//!   be the previous one + 1 across resumes (no loss, no repeat), no `gap` frame may come, and
//!   every subscriber of a stream must see the same data under the same id;
//! - every 10 s the gateway's RSS and open file descriptors (`/proc/PID/status`, `/proc/PID/fd`),
//!   which after `--warmup` s must stay within 10 % of their level at the warm-up's end (the
//!   mean of the samples of its last 30 s): RSS no more than 10 % above it, fds within ±10 %;
//! - with `--scrape-every N`, `GET /metrics` every N s, as Prometheus would.
//!
//! At the end the load and the turns stop, every subscriber must catch up with its stream, and
//! `/metrics` must show no subscriber cut off, no upstream error, no malformed feed record and
//! no bad sid line. Prints a summary; exits 1 when an assertion failed.
#![forbid(unsafe_code)]

#[path = "support/mixed_calls.rs"]
mod mixed_calls;

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mixed_calls::{call_body, check_call, Answer};
use serde_json::{json, Value};
use tokio::sync::watch;

#[derive(Clone, Debug)]
struct Opts {
    gateway: String,
    pid: u32,
    secs: u64,
    warmup: u64,
    subscribers: usize,
    contexts: usize,
    rate: u64,
    load_conns: usize,
    prefill: usize,
    disconnect_mean: f64,
    turn_pause_ms: u64,
    samples: Option<String>,
    scrape_every: u64,
}

fn opts() -> Opts {
    let mut o = Opts {
        gateway: "http://127.0.0.1:19102".into(),
        pid: 0,
        secs: 1800,
        warmup: 150,
        subscribers: 100,
        contexts: 4,
        rate: 200,
        load_conns: 8,
        prefill: 1100,
        disconnect_mean: 20.0,
        turn_pause_ms: 1500,
        samples: None,
        scrape_every: 0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        let num = || -> u64 {
            v.parse()
                .unwrap_or_else(|_| panic!("{a}: not a number: {v}"))
        };
        match a.as_str() {
            "--gateway" => o.gateway = v.clone(),
            "--pid" => o.pid = num() as u32,
            "--secs" => o.secs = num(),
            "--warmup" => o.warmup = num(),
            "--subscribers" => o.subscribers = num() as usize,
            "--contexts" => o.contexts = num().max(1) as usize,
            "--rate" => o.rate = num(),
            "--load-conns" => o.load_conns = num().max(1) as usize,
            "--prefill" => o.prefill = num() as usize,
            "--disconnect-mean" => o.disconnect_mean = v.parse().expect("seconds"),
            "--turn-pause" => o.turn_pause_ms = num(),
            "--samples" => o.samples = Some(v.clone()),
            "--scrape-every" => o.scrape_every = num(),
            _ => panic!("unknown option {a}"),
        }
    }
    assert!(
        o.gateway.starts_with("http://127.0.0.1:"),
        "loopback only: --gateway must be http://127.0.0.1:PORT"
    );
    o
}

/// xorshift64*: enough randomness for disconnect times, no dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        Rng((seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ t) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Up to this many problem descriptions are kept per kind.
const KEEP_PROBLEMS: usize = 20;

#[derive(Default)]
struct Problems {
    list: Mutex<Vec<String>>,
    count: AtomicU64,
}

impl Problems {
    fn add(&self, what: String) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut l = self.list.lock().unwrap();
        if l.len() < KEEP_PROBLEMS {
            l.push(what);
        }
    }
    fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

fn elapsed_s(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64()
}

// ---------------------------------------------------------------- load

#[derive(Default)]
struct LoadStats {
    sent: AtomicU64,
    ok: AtomicU64,
    non_2xx: AtomicU64,
    rpc_errors: AtomicU64,
    transport: AtomicU64,
    wrong: AtomicU64,
    latencies_us: Mutex<Vec<u32>>,
    problems: Problems,
}

async fn load_worker(
    w: usize,
    url: String,
    per_second: f64,
    stop: Arc<AtomicBool>,
    stats: Arc<LoadStats>,
) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    let period = Duration::from_secs_f64(1.0 / per_second.max(0.001));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut lat = Vec::new();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        n += 1;
        let kind = (n + w as u64) % 4;
        let body = call_body(kind, w, n);
        stats.sent.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let resp = client
            .post(&url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await;
        let resp = match resp {
            Ok(r) => r,
            Err(e) => {
                stats.transport.fetch_add(1, Ordering::Relaxed);
                stats.problems.add(format!("load: transport error: {e}"));
                continue;
            }
        };
        let status = resp.status();
        let text = resp.text().await;
        lat.push(started.elapsed().as_micros().min(u32::MAX as u128) as u32);
        let text = match text {
            Ok(t) => t,
            Err(e) => {
                stats.transport.fetch_add(1, Ordering::Relaxed);
                stats.problems.add(format!("load: body read error: {e}"));
                continue;
            }
        };
        if !status.is_success() {
            stats.non_2xx.fetch_add(1, Ordering::Relaxed);
            stats
                .problems
                .add(format!("load: HTTP {status} for {body}: {text}"));
            continue;
        }
        let got: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        match check_call(kind, n, &body, &got) {
            Answer::Ok => {
                stats.ok.fetch_add(1, Ordering::Relaxed);
            }
            Answer::RpcError(e) => {
                stats.rpc_errors.fetch_add(1, Ordering::Relaxed);
                stats
                    .problems
                    .add(format!("load: error answer {e} for {body}"));
            }
            Answer::Wrong(e) => {
                stats.wrong.fetch_add(1, Ordering::Relaxed);
                stats.problems.add(format!("load: {e} for {body}"));
            }
        }
    }
    stats.latencies_us.lock().unwrap().extend(lat);
}

// ---------------------------------------------------------------- sid turns

#[derive(Default)]
struct TurnStats {
    turns: AtomicU64,
    ok: AtomicU64,
    gets: AtomicU64,
    failed: AtomicU64,
    problems: Problems,
}

async fn rpc(client: &reqwest::Client, url: &str, body: &Value) -> Result<Value, String> {
    let resp = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| format!("transport: {e}"))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| format!("body: {e}"))?;
    if !status.is_success() {
        return Err(format!("HTTP {status}: {text}"));
    }
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("not JSON ({e}): {text}"))?;
    if let Some(e) = v.get("error") {
        return Err(format!("error answer {e}"));
    }
    Ok(v["result"].clone())
}

fn turn_body(n: u64, context: Option<&str>, text: &str) -> Value {
    let mut params =
        json!({"message": {"role": "user", "parts": [{"kind": "text", "text": text}]}});
    if let Some(c) = context {
        params["contextId"] = json!(c);
    }
    json!({"jsonrpc": "2.0", "id": n, "method": "message/send", "params": params})
}

/// One turn; checks the task completed in `context`.
async fn turn(
    client: &reqwest::Client,
    url: &str,
    n: u64,
    context: &str,
    text: &str,
    stats: &TurnStats,
) -> Option<String> {
    stats.turns.fetch_add(1, Ordering::Relaxed);
    match rpc(client, url, &turn_body(n, Some(context), text)).await {
        Ok(task) if task["status"]["state"] == "completed" && task["contextId"] == context => {
            stats.ok.fetch_add(1, Ordering::Relaxed);
            task["id"].as_str().map(str::to_owned)
        }
        Ok(task) => {
            stats.failed.fetch_add(1, Ordering::Relaxed);
            stats
                .problems
                .add(format!("turn {text:?} in {context}: task {task}"));
            None
        }
        Err(e) => {
            stats.failed.fetch_add(1, Ordering::Relaxed);
            stats
                .problems
                .add(format!("turn {text:?} in {context}: {e}"));
            None
        }
    }
}

async fn turn_loop(
    i: usize,
    url: String,
    context: String,
    stop: Arc<AtomicBool>,
    stats: Arc<TurnStats>,
    pause_ms: u64,
) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut rng = Rng::new(1000 + i as u64);
    let texts = ["hi there", "think about it", "slow please", "hello again"];
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let text = texts[(rng.next() % texts.len() as u64) as usize];
        let task = turn(&client, &url, n, &context, text, &stats).await;
        if let (Some(id), true) = (task, rng.unit() < 0.25) {
            let get =
                json!({"jsonrpc": "2.0", "id": n, "method": "tasks/get", "params": {"id": id}});
            match rpc(&client, &url, &get).await {
                Ok(t) if t["status"]["state"] == "completed" => {
                    stats.gets.fetch_add(1, Ordering::Relaxed);
                }
                Ok(t) => {
                    stats.failed.fetch_add(1, Ordering::Relaxed);
                    stats.problems.add(format!("tasks/get {id}: {t}"));
                }
                Err(e) => {
                    stats.failed.fetch_add(1, Ordering::Relaxed);
                    stats.problems.add(format!("tasks/get {id}: {e}"));
                }
            }
        }
        // Uniform in [pause / 7.5, pause]: 200..1500 ms by default.
        let low = pause_ms * 2 / 15;
        tokio::time::sleep(Duration::from_millis(
            low + rng.next() % (pause_ms - low + 1),
        ))
        .await;
    }
}

// ---------------------------------------------------------------- subscribers

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    /// Random disconnects on.
    Running,
    /// No more injected disconnects; read until told to quit.
    Draining,
    Quit,
}

#[derive(Default)]
struct SubState {
    last: Option<u64>,
    first: Option<u64>,
    events: u64,
    connects: u64,
    resumes: u64,
    injected: u64,
    server_ends: u64,
    stalls: u64,
    gaps: u64,
    lost: u64,
    repeated: u64,
    mismatched: u64,
    bad_frames: u64,
    connect_failures: u64,
}

struct Sub {
    stream: usize,
    url: String,
    state: Mutex<SubState>,
    connected: AtomicBool,
}

/// For each (stream, id), the hash of the data the first subscriber saw under it.
type Seen = Arc<Mutex<HashMap<(usize, u64), u64>>>;

fn data_hash(data: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    data.hash(&mut h);
    h.finish()
}

/// One complete frame (without its blank line).
fn on_frame(sub: &Sub, frame: &str, seen: &Seen, problems: &Problems) {
    let mut id = None;
    let mut event = None;
    let mut data = String::new();
    for line in frame.lines() {
        if let Some(v) = line.strip_prefix("id:") {
            id = Some(v.trim_start().to_owned());
        } else if let Some(v) = line.strip_prefix("event:") {
            event = Some(v.trim_start().to_owned());
        } else if let Some(v) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    let mut st = sub.state.lock().unwrap();
    if event.as_deref() == Some("gap") {
        st.gaps += 1;
        problems.add(format!(
            "{}: gap frame after resuming from {:?}",
            sub.url, st.last
        ));
        return;
    }
    let Some(id) = id else {
        if !data.is_empty() || event.is_some() {
            st.bad_frames += 1;
            problems.add(format!("{}: a frame without an id: {frame:?}", sub.url));
        }
        return;
    };
    let Ok(id) = id.parse::<u64>() else {
        st.bad_frames += 1;
        problems.add(format!("{}: id {id:?} is not a number", sub.url));
        return;
    };
    if serde_json::from_str::<Value>(&data).is_err() {
        st.bad_frames += 1;
        problems.add(format!("{}: id {id}: data is not JSON: {data:?}", sub.url));
    }
    st.events += 1;
    if let Some(last) = st.last {
        if id <= last {
            st.repeated += 1;
            problems.add(format!("{}: id {id} after {last} (repeated)", sub.url));
            return;
        }
        if id != last + 1 {
            st.lost += id - last - 1;
            problems.add(format!(
                "{}: id {id} after {last} ({} lost)",
                sub.url,
                id - last - 1
            ));
        }
    }
    st.last = Some(id);
    st.first.get_or_insert(id);
    drop(st);
    let h = data_hash(&data);
    let mut seen = seen.lock().unwrap();
    let prev = *seen.entry((sub.stream, id)).or_insert(h);
    if prev != h {
        drop(seen);
        sub.state.lock().unwrap().mismatched += 1;
        problems.add(format!(
            "{}: id {id} carries other data than other subscribers saw",
            sub.url
        ));
    }
}

/// Silence (no byte, not even a keepalive) longer than this is a stall.
const STALL: Duration = Duration::from_secs(30);

async fn subscriber(
    idx: usize,
    sub: Arc<Sub>,
    mut phase: watch::Receiver<Phase>,
    mean_secs: f64,
    seen: Seen,
    problems: Arc<Problems>,
) {
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let mut rng = Rng::new(idx as u64);
    let finder = memchr::memmem::Finder::new(b"\n\n");
    loop {
        if *phase.borrow_and_update() == Phase::Quit {
            return;
        }
        let last = sub.state.lock().unwrap().last;
        let mut req = client.get(&sub.url).header("accept", "text/event-stream");
        if let Some(l) = last {
            req = req.header("last-event-id", l.to_string());
        }
        let resp = tokio::select! {
            r = req.send() => r,
            _ = phase.wait_for(|p| *p == Phase::Quit) => return,
        };
        let mut resp = match resp {
            Ok(r) if r.status().is_success() => r,
            Ok(r) => {
                sub.state.lock().unwrap().connect_failures += 1;
                problems.add(format!(
                    "{}: subscribe answered HTTP {}",
                    sub.url,
                    r.status()
                ));
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            Err(e) => {
                sub.state.lock().unwrap().connect_failures += 1;
                problems.add(format!("{}: subscribe failed: {e}", sub.url));
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        {
            let mut st = sub.state.lock().unwrap();
            st.connects += 1;
            if last.is_some() {
                st.resumes += 1;
            }
        }
        sub.connected.store(true, Ordering::Relaxed);
        // Exponential time to the next injected disconnect, 0.5 s .. 10 means.
        let hold = (-mean_secs * (1.0 - rng.unit()).ln()).clamp(0.5, mean_secs * 10.0);
        let disconnect_at = tokio::time::Instant::now() + Duration::from_secs_f64(hold);
        let mut buf: Vec<u8> = Vec::new();
        let mut injected = false;
        loop {
            let running = *phase.borrow() == Phase::Running;
            tokio::select! {
                chunk = tokio::time::timeout(STALL, resp.chunk()) => match chunk {
                    Ok(Ok(Some(bytes))) => {
                        buf.extend_from_slice(&bytes);
                        let mut start = 0;
                        while let Some(end) = finder.find(&buf[start..]) {
                            let frame = String::from_utf8_lossy(&buf[start..start + end]);
                            on_frame(&sub, &frame, &seen, &problems);
                            start += end + 2;
                        }
                        buf.drain(..start);
                    }
                    Ok(Ok(None)) | Ok(Err(_)) => {
                        if *phase.borrow() != Phase::Quit {
                            sub.state.lock().unwrap().server_ends += 1;
                            let why = match chunk { Ok(Err(e)) => e.to_string(), _ => "end of body".into() };
                            problems.add(format!("{}: the gateway ended the stream ({why})", sub.url));
                        }
                        break;
                    }
                    Err(_) => {
                        sub.state.lock().unwrap().stalls += 1;
                        problems.add(format!("{}: nothing for {} s, not even a keepalive", sub.url, STALL.as_secs()));
                        break;
                    }
                },
                _ = tokio::time::sleep_until(disconnect_at), if running => {
                    injected = true;
                    sub.state.lock().unwrap().injected += 1;
                    break;
                }
                _ = phase.changed() => {
                    if *phase.borrow() == Phase::Quit {
                        sub.connected.store(false, Ordering::Relaxed);
                        return;
                    }
                }
            }
        }
        sub.connected.store(false, Ordering::Relaxed);
        drop(resp);
        if injected {
            tokio::time::sleep(Duration::from_millis(rng.next() % 1500)).await;
        }
    }
}

// ---------------------------------------------------------------- samples

#[derive(Clone, Copy, Debug)]
struct Sample {
    t: f64,
    rss_kb: u64,
    fds: u64,
    threads: u64,
    connected: usize,
}

fn sample(pid: u32, t: f64, connected: usize) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some(Sample {
        t,
        rss_kb: field("VmRSS:"),
        fds,
        threads: field("Threads:"),
        connected,
    })
}

fn pct(v: &mut [u32], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable();
    v[((v.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0
}

/// Least-squares slope of `y` over `t` (per minute).
fn slope_per_min(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let mt = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let cov: f64 = points.iter().map(|p| (p.0 - mt) * (p.1 - my)).sum();
    let var: f64 = points.iter().map(|p| (p.0 - mt).powi(2)).sum();
    if var == 0.0 {
        0.0
    } else {
        cov / var * 60.0
    }
}

async fn metrics(base: &str) -> String {
    match reqwest::get(format!("{base}/metrics")).await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(e) => format!("# cannot read /metrics: {e}"),
    }
}

/// Sum of a metric's samples whose line contains every one of `must`.
fn metric_sum(text: &str, name: &str, must: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter(|l| must.iter().all(|m| l.contains(m)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, |a, b| a + b)
}

#[tokio::main]
async fn main() {
    let o = opts();
    let t0 = Instant::now();
    let deadline = Duration::from_secs(o.secs);
    let rpc_url = format!("{}/rpc", o.gateway);
    let mut failures: Vec<String> = Vec::new();
    println!(
        "soak: {} s against {} (pid {}), warm-up {} s, {} subscribers, {} sid contexts, {} calls/s over {} connections",
        o.secs, o.gateway, o.pid, o.warmup, o.subscribers, o.contexts, o.rate, o.load_conns
    );

    // The gateway is up and its upstream answers.
    let probe = reqwest::Client::new();
    let ready_by = Instant::now() + Duration::from_secs(30);
    loop {
        let ok = probe
            .get(format!("{}/readyz", o.gateway))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if ok {
            break;
        }
        if Instant::now() > ready_by {
            println!("FAIL: the gateway was not ready within 30 s");
            std::process::exit(1);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The sid contexts, each prefilled with quick turns.
    let turn_stats = Arc::new(TurnStats::default());
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut contexts = Vec::new();
    for i in 0..o.contexts {
        match rpc(&client, &rpc_url, &turn_body(i as u64, None, "hello")).await {
            Ok(task) => contexts.push(task["contextId"].as_str().unwrap_or_default().to_owned()),
            Err(e) => {
                println!("FAIL: cannot start a sid context: {e}");
                std::process::exit(1);
            }
        }
    }
    let prefill_started = Instant::now();
    let prefills: Vec<_> = contexts
        .iter()
        .cloned()
        .map(|ctx| {
            let (url, stats, n) = (rpc_url.clone(), turn_stats.clone(), o.prefill);
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                for k in 0..n as u64 {
                    let text = if k % 2 == 0 { "hi" } else { "think" };
                    turn(&client, &url, k, &ctx, text, &stats).await;
                }
            })
        })
        .collect();
    for p in prefills {
        let _ = p.await;
    }
    println!(
        "soak: {} contexts prefilled with {} turns each in {:.1} s",
        contexts.len(),
        o.prefill,
        prefill_started.elapsed().as_secs_f64()
    );

    let stop = Arc::new(AtomicBool::new(false));
    let (phase_tx, phase_rx) = watch::channel(Phase::Running);
    let seen: Seen = Arc::new(Mutex::new(HashMap::new()));
    let sub_problems = Arc::new(Problems::default());

    // Streams: 0 is /events, 1.. are the contexts.
    let mut stream_urls = vec![format!("{}/events", o.gateway)];
    stream_urls.extend(
        contexts
            .iter()
            .map(|c| format!("{}/contexts/{c}/events", o.gateway)),
    );
    let mut subs = Vec::new();
    let mut sub_tasks = Vec::new();
    for i in 0..o.subscribers {
        let stream = if i % 2 == 0 {
            0
        } else {
            1 + (i / 2) % contexts.len()
        };
        let sub = Arc::new(Sub {
            stream,
            url: stream_urls[stream].clone(),
            state: Mutex::new(SubState::default()),
            connected: AtomicBool::new(false),
        });
        subs.push(sub.clone());
        sub_tasks.push(tokio::spawn(subscriber(
            i,
            sub,
            phase_rx.clone(),
            o.disconnect_mean,
            seen.clone(),
            sub_problems.clone(),
        )));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let load_stats = Arc::new(LoadStats::default());
    let load_tasks: Vec<_> = (0..o.load_conns)
        .map(|w| {
            tokio::spawn(load_worker(
                w,
                rpc_url.clone(),
                o.rate as f64 / o.load_conns as f64,
                stop.clone(),
                load_stats.clone(),
            ))
        })
        .collect();
    // A Prometheus stand-in, when asked: GET /metrics every `--scrape-every` s.
    let scrapes = Arc::new(AtomicU64::new(0));
    let scraper = (o.scrape_every > 0).then(|| {
        let (url, stop, scrapes) = (
            format!("{}/metrics", o.gateway),
            stop.clone(),
            scrapes.clone(),
        );
        let (every, problems) = (Duration::from_secs(o.scrape_every), load_stats.clone());
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(every).await;
                match client.get(&url).send().await {
                    Ok(r) if r.status().is_success() => {
                        let _ = r.text().await;
                        scrapes.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(r) => {
                        problems.non_2xx.fetch_add(1, Ordering::Relaxed);
                        problems
                            .problems
                            .add(format!("GET /metrics answered HTTP {}", r.status()));
                    }
                    Err(e) => {
                        problems.transport.fetch_add(1, Ordering::Relaxed);
                        problems.problems.add(format!("GET /metrics failed: {e}"));
                    }
                }
            }
        })
    });
    let turn_tasks: Vec<_> = contexts
        .iter()
        .enumerate()
        .map(|(i, c)| {
            tokio::spawn(turn_loop(
                i,
                rpc_url.clone(),
                c.clone(),
                stop.clone(),
                turn_stats.clone(),
                o.turn_pause_ms,
            ))
        })
        .collect();

    // Samples every 10 s until the end.
    let mut samples: Vec<Sample> = Vec::new();
    let mut csv = String::from("t_s,rss_kb,fds,threads,subscribers_connected\n");
    let mut next_sample = Duration::ZERO;
    let mut next_report = Duration::from_secs(60);
    while t0.elapsed() < deadline {
        if t0.elapsed() >= next_sample {
            let connected = subs
                .iter()
                .filter(|s| s.connected.load(Ordering::Relaxed))
                .count();
            match sample(o.pid, elapsed_s(t0), connected) {
                Some(s) => {
                    csv.push_str(&format!(
                        "{:.0},{},{},{},{}\n",
                        s.t, s.rss_kb, s.fds, s.threads, s.connected
                    ));
                    samples.push(s);
                }
                None => {
                    failures.push(format!(
                        "the gateway (pid {}) is gone at {:.0} s",
                        o.pid,
                        elapsed_s(t0)
                    ));
                    break;
                }
            }
            next_sample += Duration::from_secs(10);
        }
        if t0.elapsed() >= next_report {
            let s = samples.last().copied();
            let events: u64 = subs.iter().map(|s| s.state.lock().unwrap().events).sum();
            let resumes: u64 = subs.iter().map(|s| s.state.lock().unwrap().resumes).sum();
            println!(
                "soak: {:>5.0} s  rss {:>7} kB  fds {:>4}  calls {:>8} (bad {})  turns {:>6} (bad {})  events {:>9}  resumes {:>6}  subscriber problems {}",
                elapsed_s(t0),
                s.map_or(0, |s| s.rss_kb),
                s.map_or(0, |s| s.fds),
                load_stats.sent.load(Ordering::Relaxed),
                load_stats.problems.count(),
                turn_stats.turns.load(Ordering::Relaxed),
                turn_stats.problems.count(),
                events,
                resumes,
                sub_problems.count(),
            );
            next_report += Duration::from_secs(60);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let soaked = elapsed_s(t0);
    if let Some(path) = &o.samples {
        let _ = std::fs::write(path, &csv);
    }

    // End: stop the load and the turns, stop disconnecting, let every subscriber catch up.
    stop.store(true, Ordering::Relaxed);
    phase_tx.send_replace(Phase::Draining);
    for t in load_tasks {
        let _ = t.await;
    }
    for t in turn_tasks {
        let _ = t.await;
    }
    if let Some(t) = scraper {
        t.abort();
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut targets = vec![0u64; stream_urls.len()];
    let mut firsts = vec![u64::MAX; stream_urls.len()];
    for s in &subs {
        if let Some(f) = s.state.lock().unwrap().first {
            firsts[s.stream] = firsts[s.stream].min(f);
        }
    }
    for s in &subs {
        if let Some(l) = s.state.lock().unwrap().last {
            targets[s.stream] = targets[s.stream].max(l);
        }
    }
    let catch_up_by = Instant::now() + Duration::from_secs(15);
    let behind = loop {
        let behind: Vec<String> = subs
            .iter()
            .filter_map(|s| {
                let l = s.state.lock().unwrap().last.unwrap_or(0);
                (l < targets[s.stream])
                    .then(|| format!("{} at {l} of {}", s.url, targets[s.stream]))
            })
            .collect();
        if behind.is_empty() || Instant::now() > catch_up_by {
            break behind;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    phase_tx.send_replace(Phase::Quit);
    for t in sub_tasks {
        let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
    }
    let metrics_text = metrics(&o.gateway).await;

    // ------------------------------------------------------------ summary
    let sum = |f: &dyn Fn(&SubState) -> u64| -> u64 {
        subs.iter().map(|s| f(&s.state.lock().unwrap())).sum()
    };
    let events = sum(&|s| s.events);
    let events_domain: u64 = subs
        .iter()
        .filter(|s| s.stream == 0)
        .map(|s| s.state.lock().unwrap().events)
        .sum();
    let (gaps, lost, repeated, mismatched, bad_frames) = (
        sum(&|s| s.gaps),
        sum(&|s| s.lost),
        sum(&|s| s.repeated),
        sum(&|s| s.mismatched),
        sum(&|s| s.bad_frames),
    );
    let (server_ends, stalls, connect_failures) = (
        sum(&|s| s.server_ends),
        sum(&|s| s.stalls),
        sum(&|s| s.connect_failures),
    );
    let (injected, resumes) = (sum(&|s| s.injected), sum(&|s| s.resumes));

    println!();
    println!("== soak summary ({soaked:.0} s, warm-up {} s)", o.warmup);
    let mut lat = std::mem::take(&mut *load_stats.latencies_us.lock().unwrap());
    let sent = load_stats.sent.load(Ordering::Relaxed);
    let (non_2xx, rpc_errors, transport, wrong) = (
        load_stats.non_2xx.load(Ordering::Relaxed),
        load_stats.rpc_errors.load(Ordering::Relaxed),
        load_stats.transport.load(Ordering::Relaxed),
        load_stats.wrong.load(Ordering::Relaxed),
    );
    println!(
        "load:        {sent} calls ({:.0}/s), {} ok, {non_2xx} non-2xx, {rpc_errors} error answers, {wrong} wrong answers, {transport} transport errors; p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms",
        sent as f64 / (soaked - prefill_started.duration_since(t0).as_secs_f64()).max(1.0),
        load_stats.ok.load(Ordering::Relaxed),
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99),
        pct(&mut lat, 1.0),
    );
    println!(
        "sid turns:   {} turns ({} prefill), {} ok, {} tasks/get checked, {} failed",
        turn_stats.turns.load(Ordering::Relaxed),
        o.prefill * contexts.len(),
        turn_stats.ok.load(Ordering::Relaxed),
        turn_stats.gets.load(Ordering::Relaxed),
        turn_stats.failed.load(Ordering::Relaxed),
    );
    println!(
        "subscribers: {} ({} on /events, {} on {} contexts); {events} events delivered ({events_domain} domain, {} sid); {injected} injected disconnects, {resumes} Last-Event-ID resumes",
        subs.len(),
        subs.iter().filter(|s| s.stream == 0).count(),
        subs.iter().filter(|s| s.stream != 0).count(),
        contexts.len(),
        events - events_domain,
    );
    println!(
        "             lost {lost}, repeated {repeated}, gaps {gaps}, data mismatches {mismatched}, bad frames {bad_frames}, streams ended by the gateway {server_ends}, stalls {stalls}, failed subscribes {connect_failures}, behind at the end {}",
        behind.len()
    );
    println!(
        "             ids seen: /events {}..{}, contexts {:?}",
        firsts[0],
        targets[0],
        firsts[1..]
            .iter()
            .zip(&targets[1..])
            .map(|(f, l)| format!("{f}..{l}"))
            .collect::<Vec<_>>()
    );

    let cut = metric_sum(&metrics_text, "wiregate_sse_subscribers_cut_total", &[]);
    let upstream_errors = metric_sum(&metrics_text, "wiregate_upstream_errors_total", &[]);
    let malformed = metric_sum(&metrics_text, "wiregate_events_malformed_total", &[]);
    let repeated_feed = metric_sum(&metrics_text, "wiregate_events_repeated_total", &[]);
    let bad_lines = metric_sum(&metrics_text, "wiregate_sid_bad_lines_total", &[]);
    let feed_events = metric_sum(&metrics_text, "wiregate_events_total", &[]);
    let req_total = metric_sum(&metrics_text, "wiregate_requests_total", &[]);
    let req_ok = metric_sum(
        &metrics_text,
        "wiregate_requests_total",
        &["outcome=\"ok\""],
    );
    println!(
        "metrics:     requests {req_total} ({req_ok} ok), upstream errors {upstream_errors}, subscribers cut {cut}, feed events {feed_events}, malformed {malformed}, repeated by the feed {repeated_feed}, bad sid lines {bad_lines}; /metrics scraped {} times during the soak",
        scrapes.load(Ordering::Relaxed)
    );

    // Resources after the warm-up.
    let warm = o.warmup as f64;
    let base: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.t <= warm + 0.5 && s.t > warm - 30.5)
        .collect();
    let post: Vec<&Sample> = samples.iter().filter(|s| s.t > warm + 0.5).collect();
    if base.is_empty() || post.is_empty() {
        failures.push(format!(
            "too short to judge memory: {} samples at the warm-up's end, {} after it",
            base.len(),
            post.len()
        ));
    } else {
        let mean = |f: &dyn Fn(&Sample) -> u64| -> f64 {
            base.iter().map(|s| f(s) as f64).sum::<f64>() / base.len() as f64
        };
        let (base_rss, base_fds) = (mean(&|s| s.rss_kb), mean(&|s| s.fds));
        let max_rss = post.iter().map(|s| s.rss_kb).max().unwrap() as f64;
        let min_rss = post.iter().map(|s| s.rss_kb).min().unwrap() as f64;
        let max_fds = post.iter().map(|s| s.fds).max().unwrap() as f64;
        let min_fds = post.iter().map(|s| s.fds).min().unwrap() as f64;
        let end = post.last().unwrap();
        let rss_slope = slope_per_min(
            &post
                .iter()
                .map(|s| (s.t, s.rss_kb as f64))
                .collect::<Vec<_>>(),
        );
        let fd_slope = slope_per_min(&post.iter().map(|s| (s.t, s.fds as f64)).collect::<Vec<_>>());
        let first = samples.first().unwrap();
        println!(
            "rss:         {} kB at start, {base_rss:.0} kB after warm-up, then {min_rss:.0}..{max_rss:.0} kB ({:+.1} % at most), {} kB at the end; trend {rss_slope:+.1} kB/min",
            first.rss_kb,
            (max_rss / base_rss - 1.0) * 100.0,
            end.rss_kb
        );
        println!(
            "fds:         {} at start, {base_fds:.1} after warm-up, then {min_fds:.0}..{max_fds:.0} ({:+.1} % .. {:+.1} %), {} at the end; trend {fd_slope:+.2}/min; threads {}",
            first.fds,
            (min_fds / base_fds - 1.0) * 100.0,
            (max_fds / base_fds - 1.0) * 100.0,
            end.fds,
            end.threads
        );
        println!("samples:     {} (every 10 s)", samples.len());
        if max_rss > base_rss * 1.10 {
            failures.push(format!(
                "RSS grew to {max_rss:.0} kB, more than 10 % above its {base_rss:.0} kB after warm-up"
            ));
        }
        if max_fds > base_fds * 1.10 || min_fds < base_fds * 0.90 {
            failures.push(format!(
                "open fds went {min_fds:.0}..{max_fds:.0}, beyond 10 % of {base_fds:.1} after warm-up"
            ));
        }
    }

    if non_2xx + rpc_errors + transport + wrong > 0 {
        failures.push(format!(
            "load: {non_2xx} non-2xx, {rpc_errors} error answers, {wrong} wrong answers, {transport} transport errors"
        ));
    }
    if turn_stats.failed.load(Ordering::Relaxed) > 0 {
        failures.push(format!(
            "{} sid turns or task reads failed",
            turn_stats.failed.load(Ordering::Relaxed)
        ));
    }
    if lost + repeated + gaps + mismatched + bad_frames > 0 {
        failures.push(format!(
            "subscribers: {lost} events lost, {repeated} repeated, {gaps} gaps, {mismatched} mismatched, {bad_frames} bad frames"
        ));
    }
    if server_ends + stalls + connect_failures > 0 {
        failures.push(format!(
            "subscribers: {server_ends} streams ended by the gateway, {stalls} stalls, {connect_failures} failed subscribes"
        ));
    }
    if !behind.is_empty() {
        failures.push(format!(
            "{} subscribers did not catch up: {:?}",
            behind.len(),
            &behind[..behind.len().min(5)]
        ));
    }
    if resumes == 0 || events_domain == 0 || events == events_domain {
        failures
            .push("no resumes or no events on some kind of stream: the soak did not run".into());
    }
    if cut + upstream_errors + malformed + bad_lines > 0.0 {
        failures.push(format!(
            "metrics: {cut} subscribers cut, {upstream_errors} upstream errors, {malformed} malformed records, {bad_lines} bad sid lines"
        ));
    }
    for (kind, p) in [
        ("load", &load_stats.problems),
        ("turns", &turn_stats.problems),
        ("subscribers", &*sub_problems),
    ] {
        let list = p.list.lock().unwrap();
        if !list.is_empty() {
            println!("first {kind} problems ({} in all):", p.count());
            for l in list.iter() {
                println!("  {l}");
            }
        }
    }
    if failures.is_empty() {
        println!("client checks: PASS");
    } else {
        for f in &failures {
            println!("FAIL: {f}");
        }
        std::process::exit(1);
    }
}
