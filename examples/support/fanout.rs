//! What the SSE fan-out benchmarks share (`sse_fanout`, `cluster_fanout`, each including this
//! file with `#[path]`): a release gateway as a child process, the calls that start a flood, and
//! plain-socket subscribers with a minimal frame scanner, so the client is not the limit.

// Each example uses a part of it.
#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A child server process (a gateway, Redis), killed when dropped.
pub struct Server {
    pub child: Child,
    pub port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A free loopback port (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something accepts connections on loopback `port`, for at most `limit`; whether
/// it did. (A fixed wait can end before a starting process listens, and the run then fails
/// with "connection refused".)
pub fn wait_listening(port: u16, limit: Duration) -> bool {
    let due = std::time::Instant::now() + limit;
    while std::time::Instant::now() < due {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// The release `wiregate` beside this example, on `port`, over the fake sid, with `env` set
/// too; waits until it listens, then `settle` more.
pub fn start_gateway(port: u16, env: &[(&str, String)], settle: Duration) -> Server {
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
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::null())
        .spawn()
        .expect("build wiregate first (see the module docs)");
    assert!(
        wait_listening(port, Duration::from_secs(30)),
        "wiregate did not listen on {port}"
    );
    std::thread::sleep(settle);
    Server { child, port }
}

pub fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// CPU time (user + system) the process has used, in seconds (clock ticks of 1/100 s).
pub fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0.0))
        .collect();
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0
}

/// Write syscalls (`write`, `writev`) the process has made: `syscw` of `/proc/<pid>/io`. What a
/// gathered write saves, as a count that does not move with the machine's speed.
pub fn write_calls(pid: u32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    io.lines()
        .find_map(|l| l.strip_prefix("syscw: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

pub async fn post(port: u16, body: String) -> String {
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

/// `message/send` of `text` (in `context` when given); the whole HTTP answer.
pub async fn send_text(port: u16, context: Option<&str>, text: &str) -> String {
    let ctx = context
        .map(|c| format!(",\"contextId\":\"{c}\""))
        .unwrap_or_default();
    post(port, format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"message/send\",\"params\":{{\"message\":{{\"parts\":[{{\"text\":\"{text}\"}}]}}{ctx}}}}}"
    ))
    .await
}

pub fn context_of(answer: &str) -> String {
    let i = answer.find("\"contextId\":\"").expect("a task") + 13;
    answer[i..i + 36].to_owned()
}

/// Opens an SSE subscription after `last` and waits for its response head.
pub async fn subscribe(port: u16, ctx: &str, last: &str) -> TcpStream {
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

/// Splits the complete frames off `carry` and calls `each` with every one; keeps the tail.
/// memchr's SIMD search, so the client is not what limits the measurement.
pub fn frames(carry: &mut Vec<u8>, mut each: impl FnMut(&[u8])) {
    let end_of_frame = memchr::memmem::Finder::new(b"\n\n");
    let mut start = 0;
    while let Some(end) = end_of_frame.find(&carry[start..]) {
        each(&carry[start..start + end]);
        start += end + 2;
    }
    carry.drain(..start);
}

/// Reads frames until `n` deltas were seen; returns each delta's latency in µs (when stamped:
/// from the moment the fake sid wrote the line to the moment this scanner parsed its frame).
pub async fn read_deltas(mut s: TcpStream, n: usize, stamped: bool) -> Vec<u64> {
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

/// The `p` quantile of `v` (µs), in ms.
pub fn pct(v: &mut [u64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i] as f64 / 1000.0
}
