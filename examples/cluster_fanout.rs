//! Cross-replica SSE benchmark (`[cluster]`): a fake sid context on replica A floods text
//! deltas; subscribers on replica B (and C) read them through Redis. Prints events/s to one
//! subscriber on another replica beside the same figure in memory (one process, no cluster),
//! cross-replica delivery latency p50/p99 at 1 000 events/s beside in-memory, and 1 000
//! subscribers spread over three replicas at 1 000 events/s. Starts its own `redis-server`.
//!
//! Beside each cluster figure: the CPU each process spent per delivered event (user + system,
//! from `/proc`), and Redis's own count of commands and µs per command (`INFO commandstats`),
//! with how many events each `XADD` and each `XREAD` carried: what a change costs moves these
//! less than events/s, which moves with the machine's speed. And Redis commands per delivered
//! event (every command Redis counted over the flood but `INFO`, over the events the
//! subscriber on B got), and what Redis is sent while a context is quiet with subscribers on
//! B and C attached (`IDLE_S` seconds, 5 by default; 0 to skip).
//!
//! ```sh
//! benches/cluster_fanout.sh       # builds in release, then runs this; LINES=50000 to change
//! ```
#![forbid(unsafe_code)]

#[path = "support/fanout.rs"]
mod fanout;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;

use fanout::{context_of, env_or, free_port, pct, read_deltas, send_text, subscribe, Server};

fn redis_server(port: u16) -> Server {
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server is installed");
    std::thread::sleep(Duration::from_millis(300));
    Server { child, port }
}

/// CPU time (user + system) of process `pid` so far, in µs.
fn cpu_us(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis; utime and stime are the 14th and 15th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    // Clock ticks of 10 ms (USER_HZ is 100 on Linux).
    f.iter().sum::<u64>() * 10_000
}

/// Redis's calls and µs per command so far (`INFO commandstats`).
fn command_stats(port: u16) -> BTreeMap<String, (u64, u64)> {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "info", "commandstats"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mut stats = BTreeMap::new();
    for line in out.lines() {
        let Some((name, rest)) = line.trim().split_once(':') else {
            continue;
        };
        let Some(cmd) = name.strip_prefix("cmdstat_") else {
            continue;
        };
        let field = |k: &str| {
            rest.split(',')
                .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        stats.insert(cmd.to_owned(), (field("calls"), field("usec")));
    }
    stats
}

/// What the processes watched by a cluster run cost: the gateways' and Redis's pids, and
/// Redis's port.
struct Watch<'a> {
    pids: &'a [(&'a str, u32)],
    redis: Option<u16>,
}

impl Watch<'_> {
    fn take(&self) -> (Vec<u64>, BTreeMap<String, (u64, u64)>) {
        (
            self.pids.iter().map(|(_, p)| cpu_us(*p)).collect(),
            self.redis.map(command_stats).unwrap_or_default(),
        )
    }

    /// Prints the costs between `before` and now, per event of `events`.
    fn report(&self, before: (Vec<u64>, BTreeMap<String, (u64, u64)>), events: usize) {
        if self.redis.is_some() {
            let total: u64 = self
                .take()
                .1
                .iter()
                .filter(|(cmd, _)| *cmd != "info")
                .map(|(cmd, (calls, _))| calls - before.1.get(cmd).map_or(0, |b| b.0))
                .sum();
            println!(
                "    redis commands per delivered event: {:.4} ({total} commands, one per {:.1} events)",
                total as f64 / events as f64,
                events as f64 / total.max(1) as f64,
            );
        }
        let (cpu, stats) = self.take();
        let per = |v: u64| v as f64 / events as f64;
        let cpu: Vec<String> = self
            .pids
            .iter()
            .zip(cpu.iter().zip(&before.0))
            .map(|((name, _), (now, was))| format!("{name} {:.2}", per(now - was)))
            .collect();
        println!("    CPU µs per event: {}", cpu.join(", "));
        for (cmd, (calls, usec)) in &stats {
            let (c0, u0) = before.1.get(cmd).copied().unwrap_or((0, 0));
            let (calls, usec) = (calls - c0, usec - u0);
            if calls == 0 || cmd == "info" {
                continue;
            }
            println!(
                "    redis {cmd:<10} {calls:>7} calls  {:>6.2} µs/call  {:>7.1} events/call  {:.2} µs/event",
                usec as f64 / calls as f64,
                events as f64 / calls as f64,
                per(usec),
            );
        }
    }
}

/// A release gateway on `port`; with `redis`, a replica named `node`.
fn gateway(port: u16, redis: Option<(u16, &str)>) -> Server {
    let env: Vec<(&str, String)> = match redis {
        None => Vec::new(),
        Some((rp, node)) => vec![
            (
                "WIREGATE_CLUSTER__REDIS",
                format!("redis://127.0.0.1:{rp}/0"),
            ),
            ("WIREGATE_CLUSTER__NODE_ID", node.to_owned()),
            (
                "WIREGATE_CLUSTER__ADVERTISE",
                format!("http://127.0.0.1:{port}"),
            ),
        ],
    };
    fanout::start_gateway(port, &env, Duration::from_millis(1200))
}

/// The last event id of a context so far (its first turn's events), read on `port`.
async fn last_id(port: u16, ctx: &str) -> u64 {
    let mut s = subscribe(port, ctx, "0").await;
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = String::new();
    while !got.contains("\"final\":true") {
        let k = s.read(&mut buf).await.unwrap();
        got.push_str(&String::from_utf8_lossy(&buf[..k]));
    }
    got.split("\nid: ")
        .chain(got.strip_prefix("id: "))
        .filter_map(|p| p.split('\n').next()?.trim().parse::<u64>().ok())
        .max()
        .unwrap_or(0)
}

/// Floods `lines` deltas on `owner` (at `rate`/s, 0 = as fast as possible) to subscribers on
/// `readers` (round robin, `subs` in all); prints events/s delivered and latency.
async fn run(
    label: &str,
    owner: u16,
    readers: &[u16],
    subs: usize,
    lines: usize,
    rate: usize,
    watch: Option<&Watch<'_>>,
) -> f64 {
    let ctx = context_of(&send_text(owner, None, "hello").await);
    let after = last_id(owner, &ctx).await;
    let mut conns = Vec::new();
    for i in 0..subs {
        conns.push(subscribe(readers[i % readers.len()], &ctx, &after.to_string()).await);
    }
    let text = match rate {
        0 => format!("flood {lines}"),
        r => format!("flood {lines} {r} ts"),
    };
    let before = watch.map(Watch::take);
    let started = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        // Subscribed after the first turn's last event: only the flood's deltas arrive.
        .map(|c| tokio::spawn(read_deltas(c, lines, rate > 0)))
        .collect();
    let flood = tokio::spawn(async move { send_text(owner, Some(&ctx), &text).await });
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    let elapsed = started.elapsed();
    flood.await.unwrap();
    let per_s = (lines * subs) as f64 / elapsed.as_secs_f64();
    println!(
        "{label:<34} {subs:>5} subscribers {lines:>7} lines rate {:>7}  {per_s:>10.0} events/s delivered  p50 {:>7.2} ms  p99 {:>7.2} ms",
        if rate == 0 { "max".to_owned() } else { format!("{rate}/s") },
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99),
    );
    if let (Some(w), Some(before)) = (watch, before) {
        w.report(before, lines * subs);
    }
    per_s
}

/// A context on `owner` that flooded a little, then stays quiet for `secs` with a subscriber on
/// each of `readers` attached: prints every command Redis counted meanwhile (but `INFO`).
async fn idle(owner: u16, readers: &[u16], redis: u16, secs: usize) {
    let ctx = context_of(&send_text(owner, None, "hello").await);
    let after = last_id(owner, &ctx).await;
    let mut conns = Vec::new();
    for port in readers {
        conns.push(subscribe(*port, &ctx, &after.to_string()).await);
    }
    send_text(owner, Some(&ctx), "flood 100").await;
    let mut delivered = 0;
    for c in conns.iter_mut() {
        let mut buf = vec![0u8; 64 * 1024];
        let mut got = String::new();
        while got.matches("\"artifact\":\"response\"").count() < 100 {
            let k = c.read(&mut buf).await.unwrap();
            got.push_str(&String::from_utf8_lossy(&buf[..k]));
        }
        delivered += 100;
    }
    // The run's last writes (snapshots) and the readers' next reads.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = command_stats(redis);
    tokio::time::sleep(Duration::from_secs(secs as u64)).await;
    let after = command_stats(redis);
    let made: Vec<(String, u64)> = after
        .iter()
        .filter(|(cmd, _)| *cmd != "info")
        .map(|(cmd, (calls, _))| (cmd.clone(), calls - before.get(cmd).map_or(0, |b| b.0)))
        .filter(|(_, n)| *n > 0)
        .collect();
    let total: u64 = made.iter().map(|(_, n)| n).sum();
    let each: Vec<String> = made.iter().map(|(c, n)| format!("{c} {n}")).collect();
    println!(
        "idle {secs} s, a context quiet after {delivered} events to subscribers on {} replicas: {total} redis commands ({:.1}/s): {}",
        readers.len(),
        total as f64 / secs as f64,
        if each.is_empty() { "none".to_owned() } else { each.join(", ") },
    );
    drop(conns);
}

#[tokio::main]
async fn main() {
    let lines = env_or("LINES", 50_000);
    // 0: only the maximum-rate runs.
    let rate_lines = env_or("RATE_LINES", 5_000);
    // How many times each maximum-rate run is repeated.
    let rounds = env_or("ROUNDS", 1);
    // Both set up first, then the maximum-rate rounds alternate (in memory, then across
    // replicas), so each ratio compares rounds run a moment apart: on a shared machine the
    // load moves between rounds far more than within one.
    let port = free_port();
    let solo = gateway(port, None);
    let solo_pids = [("gateway", solo.child.id())];
    let solo_watch = Watch {
        pids: &solo_pids,
        redis: None,
    };
    let rp = free_port();
    let redis = redis_server(rp);
    let (pa, pb, pc) = (free_port(), free_port(), free_port());
    let a = gateway(pa, Some((rp, "a")));
    let b = gateway(pb, Some((rp, "b")));
    let _c = gateway(pc, Some((rp, "c")));
    let pids = [
        ("owner A", a.child.id()),
        ("subscriber's B", b.child.id()),
        ("redis", redis.child.id()),
    ];
    let watch = Watch {
        pids: &pids,
        redis: Some(rp),
    };
    let (solo_label, label) = (
        "in memory, same process",
        "cluster, owner A -> subscriber on B",
    );
    let mut ratios = Vec::new();
    for _ in 0..rounds {
        let one = run(solo_label, port, &[port], 1, lines, 0, Some(&solo_watch)).await;
        let across = run(label, pa, &[pb], 1, lines, 0, Some(&watch)).await;
        println!("    on B / in memory: {:.0} %", 100.0 * across / one);
        ratios.push(across / one);
    }
    if let (Some(min), Some(max)) = (
        ratios.iter().copied().reduce(f64::min),
        ratios.iter().copied().reduce(f64::max),
    ) {
        println!(
            "max rate, on B / in memory over {rounds} rounds: min {:.0} %, max {:.0} %",
            100.0 * min,
            100.0 * max
        );
    }
    let idle_s = env_or("IDLE_S", 5);
    if idle_s > 0 {
        idle(pa, &[pb, pc], rp, idle_s).await;
    }
    if rate_lines > 0 {
        run(solo_label, port, &[port], 1, rate_lines, 1000, None).await;
        run(label, pa, &[pb], 1, rate_lines, 1000, Some(&watch)).await;
        let label = "cluster, 1000 over A, B and C";
        run(label, pa, &[pa, pb, pc], 1000, rate_lines, 1000, None).await;
    }
}
