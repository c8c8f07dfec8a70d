//! Whole requests through the gateway: the HTTP/1 loop's head parser, its lane decision, the
//! body's read, the RPC lane's translation and the pass-through's relay, all as they run, over a
//! real socket to a gateway on 127.0.0.1 in front of the demo's legacy server.
//!
//! Input: the bytes a client sends on one connection (one or more requests), cut into reads at
//! the points [`split::cuts`] draws from the input's first 8 bytes; the client then half-closes
//! and reads until the gateway closes.
//!
//! Asserts, besides "no panic" (libFuzzer's hook aborts on a panic in any thread, so one in a
//! connection's task is a finding too): every answer the gateway writes starts with a status
//! line whose code is one the gateway documents for a client's request (the lane's answers and
//! the refusals hyper writes for what the loop hands it), and the gateway answers a plain call
//! on a new connection after every input.
#![no_main]
#![forbid(unsafe_code)]

#[path = "common/split.rs"]
mod split;

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Statuses a client may be answered with by the RPC lane, the pass-through (whatever the
/// stand-in answers: 200), the router and hyper's refusals.
const DOCUMENTED: [u16; 14] = [
    200, 204, 400, 401, 403, 404, 405, 408, 413, 415, 431, 501, 502, 505,
];

struct World {
    runtime: tokio::runtime::Runtime,
    gateway: SocketAddr,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let gateway = runtime.block_on(async {
            // The demo's legacy server (`examples/legacy_upstream`): it reads each request
            // whole and answers on a kept-alive connection.
            let (up, _task) = wiregate::demo::legacy_upstream("127.0.0.1:0".parse().unwrap())
                .await
                .unwrap();
            let toml = format!(
                r#"
[server]
listen = "127.0.0.1:0"
runtime = "work_stealing"
max_body_bytes = 4096
max_batch_len = 8
header_read_timeout_ms = 500
body_read_timeout_ms = 500

[[upstreams]]
name = "up"
url = "http://{up}/a2a"
dialect = "legacy"
timeout_ms = 1000

[[routes]]
methods = ["*"]
upstream = "up"

[[passthrough]]
prefix = "/api/"
upstream = "up"
"#
            );
            let config: wiregate::config::Config = toml::from_str(&toml).unwrap();
            config.validate().unwrap();
            let running = wiregate::server::serve(&config).await.unwrap();
            let addr = running.addr;
            std::mem::forget(running);
            addr
        });
        World { runtime, gateway }
    })
}

/// Sends `data` in `cuts`, half-closes, and reads what comes back until the gateway closes
/// (within 3 s: longer than any of its timeouts above).
async fn send(to: SocketAddr, data: &[u8], cuts: &[usize]) -> Vec<u8> {
    let mut s = TcpStream::connect(to).await.unwrap();
    s.set_nodelay(true).unwrap();
    let (mut r, mut w) = s.split();
    let write = async {
        let mut at = 0;
        for &end in cuts {
            if w.write_all(&data[at..end]).await.is_err() {
                return;
            }
            at = end;
            tokio::task::yield_now().await;
        }
        let _ = w.shutdown().await;
    };
    let mut out = Vec::new();
    let read = async {
        let _ = r.read_to_end(&mut out).await;
    };
    let both = async { tokio::join!(write, read) };
    tokio::time::timeout(Duration::from_secs(3), both)
        .await
        .expect("the gateway closes a connection whose client is done within 3 s");
    out
}

/// Sends one whole request and reads its answer, the connection kept open meanwhile (a client
/// that half-closes has left, and its call is dropped), within 3 s.
async fn ask(to: SocketAddr, request: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(to).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    let read = async {
        loop {
            let head_end = out.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
            if let Some(end) = head_end {
                let head = String::from_utf8_lossy(&out[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if out.len() >= end + length {
                    return;
                }
            }
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(3), read)
        .await
        .expect("a plain call is answered within 3 s");
    out
}

/// The status code of the first answer in `out` (only its head is certainly a head: a body
/// may hold anything).
fn status(out: &[u8]) -> Option<u16> {
    let code = out.strip_prefix(b"HTTP/1.1 ")?.get(..3)?;
    std::str::from_utf8(code).ok()?.parse().ok()
}

fuzz_target!(|data: &[u8]| {
    if data.len() > 32 * 1024 {
        return;
    }
    let w = world();
    let seed = u64::from_le_bytes(
        data.iter()
            .copied()
            .chain(std::iter::repeat(0))
            .take(8)
            .collect::<Vec<_>>()
            .try_into()
            .unwrap(),
    );
    let cuts = split::cuts(data.len(), seed);
    w.runtime.block_on(async {
        let out = send(w.gateway, data, &cuts).await;
        if let Some(code) = status(&out) {
            assert!(
                DOCUMENTED.contains(&code),
                "status {code}: {}",
                String::from_utf8_lossy(&out[..out.len().min(400)])
            );
        }
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{}}"#;
        let mut plain = format!(
            "POST /rpc HTTP/1.1\r\nhost: g\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            call.len()
        )
        .into_bytes();
        plain.extend_from_slice(call);
        let out = ask(w.gateway, &plain).await;
        assert!(
            out.starts_with(b"HTTP/1.1 200 "),
            "a plain call after the input: {}",
            String::from_utf8_lossy(&out)
        );
    });
});
