//! Cross-replica SSE benchmark (`[cluster]`): a fake sid context on replica A floods text
//! deltas; subscribers on replica B (and C) read them through Redis. Prints events/s to one
//! subscriber on another replica beside the same figure in memory (one process, no cluster),
//! cross-replica delivery latency p50/p99 at 1 000 events/s beside in-memory, and 1 000
//! subscribers spread over three replicas at 1 000 events/s. Starts its own `redis-server`.
//!
//! ```sh
//! benches/cluster_fanout.sh       # builds in release, then runs this; LINES=50000 to change
//! ```

#[path = "support/fanout.rs"]
mod fanout;

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
async fn run(label: &str, owner: u16, readers: &[u16], subs: usize, lines: usize, rate: usize) {
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
    println!(
        "{label:<34} {subs:>5} subscribers {lines:>7} lines rate {:>7}  {:>10.0} events/s delivered  p50 {:>7.2} ms  p99 {:>7.2} ms",
        if rate == 0 { "max".to_owned() } else { format!("{rate}/s") },
        (lines * subs) as f64 / elapsed.as_secs_f64(),
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99),
    );
}

#[tokio::main]
async fn main() {
    let lines = env_or("LINES", 50_000);
    let rate_lines = env_or("RATE_LINES", 5_000);
    {
        let port = free_port();
        let _solo = gateway(port, None);
        run("in memory, same process", port, &[port], 1, lines, 0).await;
        run(
            "in memory, same process",
            port,
            &[port],
            1,
            rate_lines,
            1000,
        )
        .await;
    }
    let rp = free_port();
    let _redis = redis_server(rp);
    let (pa, pb, pc) = (free_port(), free_port(), free_port());
    let _a = gateway(pa, Some((rp, "a")));
    let _b = gateway(pb, Some((rp, "b")));
    let _c = gateway(pc, Some((rp, "c")));
    run(
        "cluster, owner A -> subscriber on B",
        pa,
        &[pb],
        1,
        lines,
        0,
    )
    .await;
    run(
        "cluster, owner A -> subscriber on B",
        pa,
        &[pb],
        1,
        rate_lines,
        1000,
    )
    .await;
    run(
        "cluster, 1000 over A, B and C",
        pa,
        &[pa, pb, pc],
        1000,
        rate_lines,
        1000,
    )
    .await;
}
