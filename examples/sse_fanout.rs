//! SSE fan-out benchmark: a fake sid context floods text deltas through a release `wiregate`
//! to 1, 100 and 1,000 SSE subscribers on loopback. Prints events/s delivered, delivery latency
//! (from the moment the fake sid wrote the line to the moment a subscriber parsed its frame) and
//! the gateway's resident memory, then the memory of 10,000 idle subscribers.
//!
//! ```sh
//! cargo build --release --bin wiregate --example fake_sid --example sse_fanout
//! ./target/release/examples/sse_fanout            # LINES=200000 IDLE=10000 to change sizes
//! ```
//!
//! The subscribers are plain sockets with a minimal frame scanner, so the client is not the
//! limit; the flooding child writes pre-formatted lines. With `SUPERGATEWAY=path/to/supergateway`
//! (`benches/sse_fanout.sh` installs 4.0.0 from npm) the same burst also goes through
//! supergateway (`--stdio`, SSE on `/sse`) to the same kind of client, as the peer to beat.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Gateway {
    child: Child,
    port: u16,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn start_gateway(port: u16) -> Gateway {
    let dir = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let fake = dir.join("examples").join("fake_sid");
    let child = Command::new(dir.join("wiregate"))
        // No gateway.toml there: built-in defaults plus the variables below.
        .current_dir(std::env::temp_dir())
        .env("WIREGATE_SERVER__LISTEN", format!("127.0.0.1:{port}"))
        .env("WIREGATE_SID__ENABLED", "true")
        .env(
            "WIREGATE_SID__COMMAND",
            format!("[\"{}\",\"--raw\"]", fake.display()),
        )
        // Shipped defaults (a replay log of 4 096 events each subscriber reads through its
        // cursor) but for one: room above the 10 000 idle subscribers for the stream a turn's
        // own call holds open.
        .env("WIREGATE_SID__MAX_SUBSCRIBERS", "20000")
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .spawn()
        .expect("build wiregate first (see the module docs)");
    std::thread::sleep(Duration::from_millis(400));
    Gateway { child, port }
}

fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// CPU time (user + system) the process has used, in seconds (clock ticks of 1/100 s).
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0.0))
        .collect();
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0
}

async fn post(port: u16, body: String) -> String {
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

async fn send_text(port: u16, context: Option<&str>, text: &str) -> String {
    let ctx = context
        .map(|c| format!(",\"contextId\":\"{c}\""))
        .unwrap_or_default();
    post(port, format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"message/send\",\"params\":{{\"message\":{{\"parts\":[{{\"text\":\"{text}\"}}]}}{ctx}}}}}"
    ))
    .await
}

fn context_of(answer: &str) -> String {
    let i = answer.find("\"contextId\":\"").expect("a task") + 13;
    answer[i..i + 36].to_owned()
}

/// Opens an SSE subscription and waits for its response head.
async fn subscribe(port: u16, ctx: &str, last: &str) -> TcpStream {
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
    s
}

/// Splits the complete frames off `carry` and calls `each` with every one; keeps the tail.
/// memchr's SIMD search, so the client is not what limits the measurement.
fn frames(carry: &mut Vec<u8>, mut each: impl FnMut(&[u8])) {
    let end_of_frame = memchr::memmem::Finder::new(b"\n\n");
    let mut start = 0;
    while let Some(end) = end_of_frame.find(&carry[start..]) {
        each(&carry[start..start + end]);
        start += end + 2;
    }
    carry.drain(..start);
}

/// Reads frames until `n` deltas were seen; returns each delta's latency in µs (when stamped).
async fn read_deltas(mut s: TcpStream, n: usize, stamped: bool) -> Vec<u64> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut carry: Vec<u8> = Vec::new();
    let mut seen = 0;
    let mut lat = Vec::new();
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
        frames(&mut carry, |frame| {
            if delta.find(frame).is_none() {
                return;
            }
            seen += 1;
            if let (true, Some(i)) = (stamped, text.find(frame)) {
                let digits: String = frame[i + 8..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .map(|c| *c as char)
                    .collect();
                if let Ok(ts) = digits.parse::<u64>() {
                    lat.push(now.saturating_sub(ts));
                }
            }
        });
    }
    lat
}

fn pct(v: &mut [u64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i] as f64 / 1000.0
}

/// Floods `lines` deltas (at `rate`/s, 0 = as fast as possible) to `subs` subscribers.
async fn run(port: u16, pid: u32, subs: usize, lines: usize, rate: usize) {
    let first = send_text(port, None, "hello").await;
    let ctx = context_of(&first);
    let last = "999999999";
    let mut readers = Vec::new();
    for _ in 0..subs {
        readers.push(subscribe(port, &ctx, last).await);
    }
    // Subscribed with an unknown id: each gets a gap frame and the retained backlog first; the
    // scanner counts only this flood's deltas after the backlog, so skip the warm-up deltas.
    let warm = 3;
    let stamped = rate > 0;
    let text = if stamped {
        format!("flood {lines} {rate} ts")
    } else {
        format!("flood {lines}")
    };
    let started = Instant::now();
    let cpu_before = cpu_s(pid);
    let tasks: Vec<_> = readers
        .into_iter()
        .map(|r| tokio::spawn(read_deltas(r, lines + warm, stamped)))
        .collect();
    let flood_ctx = ctx.clone();
    let flood = tokio::spawn(async move { send_text(port, Some(&flood_ctx), &text).await });
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    let elapsed = started.elapsed();
    flood.await.unwrap();
    let cpu = cpu_s(pid) - cpu_before;
    let delivered = (lines * subs) as f64;
    println!(
        "{subs:>6} subscribers  {lines:>7} lines  rate {:>8}  {:>12.0} events/s delivered  {:>9.0} lines/s  p50 {:>7.2} ms  p99 {:>7.2} ms  rss {:>6.1} MB  gateway cpu {:>5.2} us/event",
        if rate == 0 { "max".to_owned() } else { format!("{rate}/s") },
        delivered / elapsed.as_secs_f64(),
        lines as f64 / elapsed.as_secs_f64(),
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99),
        rss_mb(pid),
        cpu * 1e6 / delivered,
    );
}

/// The same burst through supergateway: its child waits for one message (sent once the client
/// is attached, since supergateway drops lines printed before), then prints `lines` lines.
async fn supergateway(bin: &str, lines: usize) {
    let port = 19_450 + (std::process::id() % 40) as u16;
    let script = format!(
        "import sys\nsys.stdin.readline()\nline='{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"level\":\"info\",\"data\":\"x\"}}}}\\n'\nsys.stdout.write(line*{lines})\nsys.stdout.flush()\nsys.stdin.readline()\n"
    );
    let script_path = std::env::temp_dir().join(format!("sgw-flood-{}.py", std::process::id()));
    std::fs::write(&script_path, script).unwrap();
    let mut child = Command::new(bin)
        .args([
            "--stdio",
            &format!("python3 {}", script_path.display()),
            "--port",
            &port.to_string(),
            "--logLevel",
            "none",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("supergateway runs");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(b"GET /sse HTTP/1.1\r\nhost: x\r\naccept: text/event-stream\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    let endpoint = loop {
        let n = s.read(&mut buf).await.unwrap();
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        if let Some(i) = text.find("data: /message") {
            let rest = &text[i + 6..];
            break rest[..rest.find(['\r', '\n']).unwrap()].to_owned();
        }
    };
    let started = Instant::now();
    let msg = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let post = format!(
        "POST {endpoint} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{msg}",
        msg.len()
    );
    let mut p = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    p.write_all(post.as_bytes()).await.unwrap();
    let mut seen = 0;
    let mut carry: Vec<u8> = Vec::new();
    let method = memchr::memmem::Finder::new(b"\"method\"");
    while seen < lines {
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0, "supergateway's stream ended after {seen}");
        carry.extend_from_slice(&buf[..n]);
        frames(&mut carry, |frame| {
            if method.find(frame).is_some() {
                seen += 1;
            }
        });
    }
    let elapsed = started.elapsed();
    println!(
        "supergateway 1 subscriber {lines:>7} lines              {:>12.0} events/s delivered                                          rss {:>6.1} MB",
        lines as f64 / elapsed.as_secs_f64(),
        rss_mb(child.id())
    );
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(script_path);
}

#[tokio::main]
async fn main() {
    let lines = env_or("LINES", 200_000);
    if let Ok(bin) = std::env::var("SUPERGATEWAY") {
        supergateway(&bin, lines).await;
    }
    let idle = env_or("IDLE", 10_000);
    let base = 19_500 + (std::process::id() % 400) as u16;
    for (i, (subs, n, rate)) in [(1, lines, 0), (100, lines / 10, 0), (1000, 5_000, 1000)]
        .into_iter()
        .enumerate()
    {
        let gw = start_gateway(base + i as u16);
        run(gw.port, gw.child.id(), subs, n, rate).await;
    }
    let gw = start_gateway(base + 10);
    let ctx = context_of(&send_text(gw.port, None, "hello").await);
    let before = rss_mb(gw.child.id());
    let mut conns = Vec::with_capacity(idle);
    for _ in 0..idle {
        conns.push(subscribe(gw.port, &ctx, "999999999").await);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_mb(gw.child.id());
    println!(
        "{idle:>6} idle subscribers: rss {after:.1} MB ({before:.1} MB before them; {:.1} KB each)",
        (after - before) * 1024.0 / idle as f64
    );
    let _ = Arc::new(conns);
}
