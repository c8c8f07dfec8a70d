//! SSE fan-out benchmark: a fake sid context floods text deltas through a release `wiregate`
//! to 1, 100 and 1,000 SSE subscribers on loopback. Prints events/s delivered, delivery latency
//! (from the moment the fake sid wrote the line to the moment a subscriber parsed its frame) and
//! the gateway's resident memory, then the memory of 10,000 idle subscribers.
//!
//! ```sh
//! cargo build --release --bin wiregate --example fake_sid --example sse_fanout
//! ./target/release/examples/sse_fanout            # LINES=200000 IDLE=10000 to change sizes
//! PORT_BASE=23000 ./target/release/examples/sse_fanout   # gateways on 23000..23010, supergateway on 23020
//! ```
//!
//! The subscribers are plain sockets with a minimal frame scanner, so the client is not the
//! limit; the flooding child writes pre-formatted lines. With `SUPERGATEWAY=path/to/supergateway`
//! (`benches/sse_fanout.sh` installs 4.0.0 from npm) the same burst also goes through
//! supergateway (`--stdio`, SSE on `/sse`) to the same kind of client, as the peer to beat.
#![forbid(unsafe_code)]

#[path = "support/fanout.rs"]
mod fanout;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use fanout::{
    context_of, cpu_s, env_or, frames, pct, read_deltas, rss_mb, send_text, subscribe, write_calls,
    Server,
};

fn start_gateway(port: u16) -> Server {
    fanout::start_gateway(port, &[], Duration::from_millis(400))
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
    let writes_before = write_calls(pid);
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
    let writes = write_calls(pid) - writes_before;
    let delivered = (lines * subs) as f64;
    println!(
        "{subs:>6} subscribers  {lines:>7} lines  rate {:>8}  {:>12.0} events/s delivered  {:>9.0} lines/s  p50 {:>7.2} ms  p99 {:>7.2} ms  rss {:>6.1} MB  gateway cpu {:>5.2} us/event  {:>5.1} events/write",
        if rate == 0 { "max".to_owned() } else { format!("{rate}/s") },
        delivered / elapsed.as_secs_f64(),
        lines as f64 / elapsed.as_secs_f64(),
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99),
        rss_mb(pid),
        cpu * 1e6 / delivered,
        delivered / writes.max(1) as f64,
    );
}

/// The same burst through supergateway: its child waits for one message (sent once the client
/// is attached, since supergateway drops lines printed before), then prints `lines` lines.
async fn supergateway(bin: &str, lines: usize) {
    let port = match env_or("PORT_BASE", 0) {
        0 => 19_450 + (std::process::id() % 40) as u16,
        base => base as u16 + 20,
    };
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
    if !fanout::wait_listening(port, Duration::from_secs(30)) {
        let _ = child.kill();
        panic!("supergateway did not listen on {port}");
    }
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
    let base = env_or("PORT_BASE", 19_500 + (std::process::id() % 400) as usize) as u16;
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
