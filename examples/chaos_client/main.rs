//! Chaos soak: three release replicas on one `redis-server` under mixed load while faults are
//! injected at random, checked at the end. Started by `benches/chaos.sh`.
//!
//! ```sh
//! chaos_client --bins DIR --work DIR --secs 1800 --warmup 150 --base-port 19200
//! ```
//!
//! It starts, on loopback, `redis-server` (append-only file, so that a restart keeps the shared
//! state), the legacy upstream (`examples/legacy_upstream`, its event feed dropped once a minute)
//! and three replicas (`wiregate`, `cluster.lease_ms` 3 000, each running the fake sid). Then:
//! - translated calls (JSON-RPC calls, batches, legacy envelopes), `--rate` a second, round robin
//!   over the replicas, every answer checked;
//! - sid turns in `--contexts` contexts (each begun on a replica of its own and prefilled with
//!   `--prefill` quick turns, 1 100, so its kept tasks are at their bound before the warm-up
//!   ends), streamed through a random replica and resumed on another
//!   with `Last-Event-ID` when the stream breaks, a quarter read back with `tasks/get`;
//! - `--subscribers` SSE subscribers, half on `/events`, half on the contexts' streams, each with
//!   a home replica, dropping their connection at random and resuming;
//! - after the warm-up, a fault every 20..60 s (at random), the four kinds in turn: a replica
//!   SIGKILLed and started again 2 s later (r2 or r3, at random: r1 is never killed, so one
//!   process spans the run), `redis-server` stopped and started again, a random replica's sid
//!   child SIGKILLed, the upstream refusing connections for 5 s;
//! - every 10 s the RSS and open fds of each replica process.
//!
//! A failure is excused only by a fault of the kind that explains it, in force while the call
//! or stream ran (plus the time the fault takes to heal: a lapsed lease, a reconnect). At the
//! end: no unexcused failure, no hang, no repeated or silently skipped id, every task any stream
//! named in a final state, and for every replica process that lived past its warm-up, RSS and
//! fds in its last 5 minutes within 10 % of their level at its warm-up's end, compared at the
//! same number of contexts it runs (samples outside faults; at least one process compared).
#![forbid(unsafe_code)]

mod faults;
mod load;
#[path = "../support/mixed_calls.rs"]
mod mixed_calls;
mod procs;
mod sse;
mod subs;
mod turns;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use faults::{Kind, Timeline};
use procs::{footprint, Ports, Procs, LEASE_MS, REPLICAS};

/// What every task of the run shares.
pub struct Run {
    pub urls: Vec<String>,
    pub timeline: Timeline,
    load_stop: AtomicBool,
    subs_stop_flag: AtomicBool,
    pub subs_stop: tokio::sync::Notify,
}

impl Run {
    pub fn load_stopped(&self) -> bool {
        self.load_stop.load(Ordering::Relaxed)
    }
    pub fn subs_stopped(&self) -> bool {
        self.subs_stop_flag.load(Ordering::Relaxed)
    }
}

struct Opts {
    bins: PathBuf,
    work: PathBuf,
    secs: u64,
    warmup: u64,
    base: u16,
    rate: f64,
    contexts: usize,
    subscribers: usize,
    prefill: usize,
    seed: u64,
}

fn opts() -> Opts {
    let mut o = Opts {
        bins: PathBuf::from("target/release"),
        work: std::env::temp_dir().join("wiregate-chaos"),
        secs: 1800,
        warmup: 150,
        base: 19200,
        rate: 100.0,
        contexts: 4,
        subscribers: 30,
        prefill: 1100,
        seed: 0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        let num = || -> u64 { v.parse().unwrap_or_else(|_| panic!("{a} takes a number")) };
        match a.as_str() {
            "--bins" => o.bins = PathBuf::from(&v),
            "--work" => o.work = PathBuf::from(&v),
            "--secs" => o.secs = num(),
            "--warmup" => o.warmup = num(),
            "--base-port" => o.base = num() as u16,
            "--rate" => o.rate = num() as f64,
            "--contexts" => o.contexts = num() as usize,
            "--subscribers" => o.subscribers = num() as usize,
            "--seed" => o.seed = num(),
            "--prefill" => o.prefill = num() as usize,
            _ => panic!("unknown option {a}"),
        }
    }
    o
}

/// One fault, injected and repaired; blocking (process control), so run on a thread.
fn inject(procs: &Procs, timeline: &Timeline, kind: Kind) {
    let settle = match kind {
        // The lease lapses, the sweep (a quarter lease) takes the contexts over.
        Kind::ReplicaKilled(_) => (LEASE_MS as f64 / 1000.0) * 2.0 + 3.0,
        Kind::RedisRestarted => 5.0,
        Kind::SidKilled(_) => 5.0,
        Kind::UpstreamRefusing => 2.0,
    };
    let w = timeline.begin(kind, settle);
    match kind {
        Kind::ReplicaKilled(r) => {
            procs.kill_replica(r, timeline.now());
            std::thread::sleep(Duration::from_secs(2));
            procs.start_replica(r, timeline.now());
        }
        Kind::RedisRestarted => {
            procs.stop_redis();
            std::thread::sleep(Duration::from_millis(500));
            procs.start_redis();
        }
        Kind::SidKilled(r) => {
            procs.kill_sid(r);
        }
        Kind::UpstreamRefusing => procs.refuse_upstream(),
    }
    timeline.repaired(w);
    println!("t={:.0}s fault: {}", timeline.now(), kind.label());
}

fn pick(n: u64) -> Kind {
    match n % 4 {
        0 => Kind::ReplicaKilled(1 + fastrand::usize(..REPLICAS - 1)),
        1 => Kind::RedisRestarted,
        2 => Kind::SidKilled(fastrand::usize(..REPLICAS)),
        _ => Kind::UpstreamRefusing,
    }
}

#[derive(Clone, Copy)]
struct Sample {
    life: usize,
    t: f64,
    rss: u64,
    fds: u64,
    /// sid children the replica runs: one a context, each with its pipes and its tasks.
    contexts: usize,
}

/// Warm-up level against the last 5 minutes, per replica process, at the same number of
/// contexts (a replica taking a lost one's contexts over runs more, each with its pipes and
/// its kept tasks: more state, not a leak). Samples taken during a fault or within 10 s after
/// it are left out. Returns the lines to print, whether every comparison held, and how many
/// processes were compared.
fn footprints(
    procs: &Procs,
    samples: &[Sample],
    timeline: &Timeline,
    o: &Opts,
    end: f64,
) -> (Vec<String>, bool, usize) {
    let mut lines = Vec::new();
    let (mut ok, mut compared) = (true, 0);
    let quiet = |s: &&Sample| !timeline.any(s.t - 10.0, s.t);
    for (i, life) in procs.lives().iter().enumerate() {
        let until = life.died.unwrap_or(end);
        let warm = life.born + o.warmup as f64;
        let who = format!(
            "r{} pid {} ({:.0}..{:.0} s)",
            life.replica + 1,
            life.pid,
            life.born,
            until
        );
        let mine: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.life == i)
            .filter(quiet)
            .collect();
        let level: Vec<&Sample> = mine
            .iter()
            .copied()
            .filter(|s| s.t > warm - 60.0 && s.t <= warm)
            .collect();
        let Some(n) = level.last().map(|s| s.contexts) else {
            lines.push(format!(
                "{who}: lived {:.0} s, no quiet sample at its warm-up's end",
                until - life.born
            ));
            continue;
        };
        let level: Vec<&Sample> = level.into_iter().filter(|s| s.contexts == n).collect();
        let late_from = (until - 300.0).max(warm + 60.0);
        let late_all: Vec<&Sample> = mine.iter().copied().filter(|s| s.t > late_from).collect();
        let late: Vec<&Sample> = late_all
            .iter()
            .copied()
            .filter(|s| s.contexts == n)
            .collect();
        if late.is_empty() {
            let now = late_all
                .last()
                .map_or("?".to_owned(), |s| s.contexts.to_string());
            lines.push(format!(
                "{who}: lived {:.0} s; not compared: {n} contexts at its warm-up, {now} at its end",
                until - life.born
            ));
            continue;
        }
        compared += 1;
        let mean = |v: &[&Sample], f: fn(&Sample) -> u64| {
            v.iter().map(|s| f(s) as f64).sum::<f64>() / v.len() as f64
        };
        let (rss0, fds0) = (mean(&level, |s| s.rss), mean(&level, |s| s.fds));
        let (rss1, fds1) = (mean(&late, |s| s.rss), mean(&late, |s| s.fds));
        let rss_max = late.iter().map(|s| s.rss).max().unwrap_or(0);
        let held = rss1 <= rss0 * 1.10 && (fds1 - fds0).abs() <= fds0 * 0.10;
        ok &= held;
        lines.push(format!(
            "{who}, {n} contexts: RSS {:.1} MiB at warm-up, {:.1} MiB in the last 5 min ({:+.1} %, max {:.1}); fds {fds0:.1} -> {fds1:.1} ({:+.1} %); {} + {} samples{}",
            rss0 / 1024.0,
            rss1 / 1024.0,
            (rss1 / rss0 - 1.0) * 100.0,
            rss_max as f64 / 1024.0,
            (fds1 / fds0 - 1.0) * 100.0,
            level.len(),
            late.len(),
            if held { "" } else { "  <- beyond 10 %" }
        ));
    }
    (lines, ok, compared)
}

#[tokio::main]
async fn main() {
    let o = opts();
    fastrand::seed(o.seed);
    let _ = std::fs::remove_dir_all(&o.work);
    std::fs::create_dir_all(&o.work).unwrap();
    let procs = Arc::new(Procs::new(
        o.bins.clone(),
        o.work.clone(),
        Ports::from_base(o.base),
    ));
    let run = Arc::new(Run {
        urls: (0..REPLICAS).map(|r| procs.replica_url(r)).collect(),
        timeline: Timeline::new(),
        load_stop: AtomicBool::new(false),
        subs_stop_flag: AtomicBool::new(false),
        subs_stop: tokio::sync::Notify::new(),
    });
    procs.start_redis();
    procs.start_upstream();
    for r in 0..REPLICAS {
        procs.start_replica(r, run.timeline.now());
    }
    let client = reqwest::Client::new();
    for url in &run.urls {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !matches!(client.get(format!("{url}/readyz")).send().await, Ok(r) if r.status() == 200)
        {
            assert!(tokio::time::Instant::now() < deadline, "{url} is not ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // Each context starts on a replica of its own (then moves as replicas die).
    let prefill = o.prefill;
    let made = (0..o.contexts).map(|i| {
        let (run, client) = (run.clone(), client.clone());
        tokio::spawn(async move { turns::new_context(&run, &client, i % REPLICAS, prefill).await })
    });
    let mut contexts = Vec::new();
    for m in made.collect::<Vec<_>>() {
        contexts.push(m.await.unwrap());
    }
    println!(
        "chaos: {} s (warm-up {} s), replicas on ports {:?}, redis {}, {} calls/s, {} contexts, {} subscribers, seed {}",
        o.secs, o.warmup, procs.ports.replicas, procs.ports.redis, o.rate, o.contexts, o.subscribers, o.seed
    );

    let load = Arc::new(load::LoadStats::default());
    let turn_stats = Arc::new(turns::TurnStats::default());
    let sub_stats = Arc::new(subs::SubStats::default());
    let mut tasks = Vec::new();
    let workers = 4;
    for w in 0..workers {
        tasks.push(tokio::spawn(load::worker(
            w,
            o.rate / workers as f64,
            run.clone(),
            load.clone(),
        )));
    }
    for (i, ctx) in contexts.iter().enumerate() {
        tasks.push(tokio::spawn(turns::turns(
            i,
            ctx.clone(),
            run.clone(),
            turn_stats.clone(),
        )));
    }
    let mut sub_tasks = Vec::new();
    for i in 0..o.subscribers {
        let path = if i % 2 == 0 {
            "/events".to_owned()
        } else {
            format!("/contexts/{}/events", contexts[(i / 2) % contexts.len()])
        };
        sub_tasks.push(tokio::spawn(subs::subscriber(
            i,
            path,
            run.clone(),
            sub_stats.clone(),
        )));
    }

    // Samples every 10 s.
    let samples = Arc::new(Mutex::new(Vec::<Sample>::new()));
    let sampler = {
        let (procs, samples, run) = (procs.clone(), samples.clone(), run.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(10));
            loop {
                tick.tick().await;
                let t = run.timeline.now();
                for (i, life) in procs.lives().iter().enumerate() {
                    if life.died.is_some() {
                        continue;
                    }
                    let contexts = procs.sid_children(life.replica).len();
                    if let Some((rss, fds)) = footprint(life.pid) {
                        samples.lock().unwrap().push(Sample {
                            contexts,
                            life: i,
                            t,
                            rss,
                            fds,
                        });
                    }
                }
            }
        })
    };

    // Faults: after the warm-up, until 60 s before the end.
    let faults_until = o.secs.saturating_sub(60) as f64;
    tokio::time::sleep(Duration::from_secs(o.warmup)).await;
    let mut n = fastrand::u64(..4);
    while run.timeline.now() + 20.0 < faults_until {
        let (p, r) = (procs.clone(), run.clone());
        let kind = pick(n);
        n += 1;
        tokio::task::spawn_blocking(move || inject(&p, &r.timeline, kind))
            .await
            .unwrap();
        let pause = 20.0 + fastrand::f64() * 40.0;
        let left = faults_until - run.timeline.now();
        if left <= 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_secs_f64(pause.min(left))).await;
    }
    let left = o.secs as f64 - run.timeline.now();
    tokio::time::sleep(Duration::from_secs_f64(left.max(0.0))).await;

    // The end: the load stops, the turns finish, the subscribers read on a little, then stop.
    run.load_stop.store(true, Ordering::Relaxed);
    let end = run.timeline.now();
    for t in tasks {
        if tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .is_err()
        {
            turn_stats
                .problems
                .add("a load task did not stop within 120 s".into());
        }
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    run.subs_stop_flag.store(true, Ordering::Relaxed);
    run.subs_stop.notify_waiters();
    for t in sub_tasks {
        if tokio::time::timeout(Duration::from_secs(30), t)
            .await
            .is_err()
        {
            sub_stats
                .problems
                .add("a subscriber did not stop within 30 s".into());
        }
    }
    sampler.abort();
    let (final_ok, final_bad) = turns::all_final(&run, &turn_stats).await;

    // The summary.
    let windows = run.timeline.all();
    let mut by_kind = std::collections::BTreeMap::<&str, u64>::new();
    for w in &windows {
        *by_kind.entry(w.kind.family()).or_default() += 1;
    }
    println!("faults injected: {} {:?}", windows.len(), by_kind);
    let o_ = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    println!(
        "translated calls: {} sent, {} answered correctly, {} excused, {} problems",
        o_(&load.sent),
        o_(&load.ok),
        load.excused.table().iter().map(|e| e.1).sum::<u64>(),
        load.problems.count()
    );
    println!(
        "sid turns: {} started, {} completed, {} failed, {} resumed on another replica, {} read back; tasks final at the end {final_ok}/{}",
        o_(&turn_stats.turns),
        o_(&turn_stats.completed),
        o_(&turn_stats.failed),
        o_(&turn_stats.resumed),
        o_(&turn_stats.gets),
        final_ok + final_bad
    );
    println!(
        "subscribers: {} events, {} connects, {} resumes, {} dropped by the client, {} gap frames",
        o_(&sub_stats.events),
        o_(&sub_stats.connects),
        o_(&sub_stats.resumes),
        o_(&sub_stats.dropped),
        o_(&sub_stats.gaps)
    );
    println!("excused failures (what, under which fault, how many):");
    for e in [&load.excused, &turn_stats.excused, &sub_stats.excused] {
        for ((what, fault), n) in e.table() {
            println!("  {what} | {fault} | {n}");
        }
    }
    let samples = samples.lock().unwrap().clone();
    let (lines, held, compared) = footprints(&procs, &samples, &run.timeline, &o, end);
    println!("replica processes:");
    for l in &lines {
        println!("  {l}");
    }
    procs.stop_all();

    let mut failed = !held;
    if compared == 0 && o.secs >= 600 {
        println!("FAIL: no replica process could be compared with its warm-up");
        failed = true;
    }
    for (name, p) in [
        ("translated calls", &load.problems),
        ("sid turns", &turn_stats.problems),
        ("subscribers", &sub_stats.problems),
    ] {
        if p.count() > 0 {
            failed = true;
            println!("FAIL {name}: {} problems, the first:", p.count());
            for l in p.listed() {
                println!("  {l}");
            }
        }
    }
    if final_bad > 0 {
        failed = true;
    }
    if windows.is_empty() && o.secs > o.warmup + 120 {
        println!("FAIL: no fault was injected");
        failed = true;
    }
    println!("chaos: {}", if failed { "FAIL" } else { "PASS" });
    std::process::exit(i32::from(failed));
}
