//! One HTTP/1 answer read off a raw socket, for the tests that speak HTTP/1 by hand (pipelining,
//! framing, connection reuse), where a client crate would hide what they check.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};

/// One answer: status line, headers (names lowercased, repeated ones joined by " | "), body,
/// and how many chunks carried it (0 when it had a `content-length`).
pub struct Answer {
    pub status: String,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
    pub chunks: usize,
}

impl Answer {
    /// The body as JSON; panics with the body when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!("{e}: {}", String::from_utf8_lossy(&self.body));
        })
    }
}

/// Reads one answer framed by its `content-length` or chunked, within `within`.
pub async fn read_answer<R: AsyncRead + Unpin>(r: &mut BufReader<R>, within: Duration) -> Answer {
    tokio::time::timeout(within, async {
        let mut status = String::new();
        r.read_line(&mut status).await.unwrap();
        let mut headers: HashMap<String, String> = HashMap::new();
        loop {
            let mut line = String::new();
            r.read_line(&mut line).await.unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (k, v) = line.split_once(':').expect("a header line");
            headers
                .entry(k.to_ascii_lowercase())
                .and_modify(|p| *p = format!("{p} | {}", v.trim()))
                .or_insert(v.trim().to_owned());
        }
        let (mut body, mut chunks) = (Vec::new(), 0);
        if let Some(n) = headers.get("content-length") {
            body.resize(n.parse().unwrap(), 0);
            r.read_exact(&mut body).await.unwrap();
        } else if headers.get("transfer-encoding").map(String::as_str) == Some("chunked") {
            loop {
                let mut size = String::new();
                r.read_line(&mut size).await.unwrap();
                let n = usize::from_str_radix(size.trim(), 16).unwrap();
                let mut chunk = vec![0; n + 2];
                r.read_exact(&mut chunk).await.unwrap();
                if n == 0 {
                    break;
                }
                chunks += 1;
                body.extend_from_slice(&chunk[..n]);
            }
        }
        Answer {
            status: status.trim_end().to_owned(),
            headers,
            body,
            chunks,
        }
    })
    .await
    .expect("an answer in time")
}

/// Sends `bytes` on a new connection and reads until the gateway closes it (or `wait` passes).
pub async fn exchange(addr: std::net::SocketAddr, bytes: &[u8], wait: Duration) -> String {
    use tokio::io::AsyncWriteExt;
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    let _ =
        tokio::time::timeout(wait, tokio::io::AsyncReadExt::read_to_end(&mut s, &mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}
