//! Cross-replica SSE benchmark (`[cluster]`): a fake sid context on replica A floods text
//! deltas; subscribers on replica B (and C) read them through Redis. Prints events/s to one
//! subscriber on another replica beside the same figure in memory (one process, no cluster),
//! cross-replica delivery latency p50/p99 at 1 000 events/s beside in-memory, and 1 000
//! subscribers spread over three replicas at 1 000 events/s. Starts its own `redis-server`.
//!
//! ```sh
//! benches/cluster_fanout.sh       # builds in release, then runs this; LINES=50000 to change
//! ```

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn redis_server(port: u16) -> Proc {
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server is installed");
    std::thread::sleep(Duration::from_millis(300));
    Proc(child)
}

/// A release gateway on `port`; with `redis`, a replica named `node`.
fn gateway(port: u16, redis: Option<(u16, &str)>) -> Proc {
    let dir = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let fake = dir.join("examples").join("fake_sid");
    let mut cmd = Command::new(dir.join("wiregate"));
    cmd.current_dir(std::env::temp_dir())
        .env("WIREGATE_SERVER__LISTEN", format!("127.0.0.1:{port}"))
        .env("WIREGATE_SID__ENABLED", "true")
        .env(
            "WIREGATE_SID__COMMAND",
            format!("[\"{}\",\"--raw\"]", fake.display()),
        )
        .env("WIREGATE_SID__MAX_SUBSCRIBERS", "20000")
        .env("RUST_LOG", "error")
        .stdout(Stdio::null());
    if let Some((rp, node)) = redis {
        cmd.env(
            "WIREGATE_CLUSTER__REDIS",
            format!("redis://127.0.0.1:{rp}/0"),
        )
        .env("WIREGATE_CLUSTER__NODE_ID", node)
        .env(
            "WIREGATE_CLUSTER__ADVERTISE",
            format!("http://127.0.0.1:{port}"),
        );
    }
    let child = cmd.spawn().expect("build first (see the module docs)");
    std::thread::sleep(Duration::from_millis(1200));
    Proc(child)
}

async fn send_text(port: u16, context: Option<&str>, text: &str) -> String {
    let ctx = context
        .map(|c| format!(",\"contextId\":\"{c}\""))
        .unwrap_or_default();
    let body = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"message/send\",\"params\":{{\"message\":{{\"parts\":[{{\"text\":\"{text}\"}}]}}{ctx}}}}}"
    );
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let req = format!(
        "POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

fn context_of(answer: &str) -> String {
    let i = answer.find("\"contextId\":\"").expect("a task") + 13;
    answer[i..i + 36].to_owned()
}

/// Subscribes after `last` (the last event id so far) and waits for the response head.
async fn subscribe(port: u16, ctx: &str, last: u64) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let req =
        format!("GET /contexts/{ctx}/events HTTP/1.1\r\nhost: x\r\nlast-event-id: {last}\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut b).await.unwrap();
        head.push(b[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    s
}

/// Reads until `n` deltas; each stamped delta's latency in µs.
async fn read_deltas(mut s: TcpStream, n: usize) -> Vec<u64> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut carry: Vec<u8> = Vec::new();
    let (mut seen, mut lat) = (0, Vec::new());
    let end = memchr::memmem::Finder::new(b"\n\n");
    let delta = memchr::memmem::Finder::new(b"\"artifact\":\"response\"");
    let text = memchr::memmem::Finder::new(b"\"text\":\"");
    while seen < n {
        let k = s.read(&mut buf).await.unwrap();
        assert!(k > 0, "stream ended after {seen} of {n} deltas");
        carry.extend_from_slice(&buf[..k]);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros() as u64;
        let mut start = 0;
        while let Some(e) = end.find(&carry[start..]) {
            let frame = &carry[start..start + e];
            if delta.find(frame).is_some() {
                seen += 1;
                if let Some(i) = text.find(frame) {
                    let digits: String = frame[i + 8..]
                        .iter()
                        .take_while(|c| c.is_ascii_digit())
                        .map(|c| *c as char)
                        .collect();
                    if let Ok(ts) = digits.parse::<u64>() {
                        lat.push(now.saturating_sub(ts));
                    }
                }
            }
            start += e + 2;
        }
        carry.drain(..start);
    }
    lat
}

fn pct(v: &mut [u64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable();
    v[((v.len() as f64 - 1.0) * p).round() as usize] as f64 / 1000.0
}

/// The last event id of a context so far (its first turn's events), read on `port`.
async fn last_id(port: u16, ctx: &str) -> u64 {
    let mut s = subscribe(port, ctx, 0).await;
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
        conns.push(subscribe(readers[i % readers.len()], &ctx, after).await);
    }
    let text = match rate {
        0 => format!("flood {lines}"),
        r => format!("flood {lines} {r} ts"),
    };
    let warm = 3;
    let started = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|c| tokio::spawn(read_deltas(c, lines + warm)))
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
