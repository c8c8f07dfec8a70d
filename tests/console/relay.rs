//! A TCP relay between the browser and the gateway that can cut a stream's connection after
//! it has carried a given number of text deltas: to the browser, the server hung up mid-turn.
//! It also keeps every request head it forwarded, to show what the browser sent on resuming.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the relay counts in the answers it forwards: one per text delta.
const DELTA: &[u8] = b"event: TaskArtifactUpdateEvent";

/// A running relay.
#[derive(Clone)]
pub struct Relay {
    /// Where the browser connects.
    pub addr: SocketAddr,
    cut_after: Arc<AtomicUsize>,
    cuts: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Relay {
    /// Relays 127.0.0.1:<free port> to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let relay = Relay {
            addr: listener.local_addr().unwrap(),
            cut_after: Arc::new(AtomicUsize::new(0)),
            cuts: Arc::new(AtomicUsize::new(0)),
            heads: Arc::new(Mutex::new(Vec::new())),
        };
        let r = relay.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(r.clone().pipe(client, upstream));
            }
        });
        relay
    }

    /// Arms one cut: the next connection whose answer carries `n` deltas is closed right after
    /// the `n`th.
    pub fn cut_after(&self, n: usize) {
        self.cut_after.store(n, Ordering::SeqCst);
    }

    /// Connections cut so far.
    pub fn cuts(&self) -> usize {
        self.cuts.load(Ordering::SeqCst)
    }

    /// The request heads forwarded so far, lower-cased.
    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }

    async fn pipe(self, client: TcpStream, upstream: SocketAddr) {
        let Ok(server) = TcpStream::connect(upstream).await else {
            return;
        };
        let (mut cr, mut cw) = client.into_split();
        let (mut sr, mut sw) = server.into_split();
        let heads = self.heads.clone();
        // Deltas in the answer to the connection's current request (a kept-alive connection
        // carries one request after another).
        let seen = Arc::new(AtomicUsize::new(0));
        let seen_up = seen.clone();
        let up = async move {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                let n = match cr.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let text = String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase();
                if let Some(end) = text.find("\r\n\r\n") {
                    if text.starts_with("get ") || text.starts_with("post ") {
                        heads.lock().unwrap().push(text[..end].to_owned());
                        seen_up.store(0, Ordering::SeqCst);
                    }
                }
                if sw.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
            let _ = sw.shutdown().await;
            // The answer may still be coming: the other direction decides when this ends.
            std::future::pending::<()>().await;
        };
        let down = async move {
            let mut buf = vec![0u8; 16 * 1024];
            let mut tail: Vec<u8> = Vec::new();
            loop {
                let n = match sr.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                if cw.write_all(&buf[..n]).await.is_err() {
                    break;
                }
                // Occurrences ending in this read, a pattern split across reads included.
                tail.extend_from_slice(&buf[..n]);
                let found = tail.windows(DELTA.len()).filter(|w| *w == DELTA).count();
                let seen = seen.fetch_add(found, Ordering::SeqCst) + found;
                let keep = tail.len().min(DELTA.len() - 1);
                tail.drain(..tail.len() - keep);
                let armed = self.cut_after.load(Ordering::SeqCst);
                if armed > 0
                    && seen >= armed
                    && self
                        .cut_after
                        .compare_exchange(armed, 0, Ordering::SeqCst, Ordering::SeqCst)
                        .is_ok()
                {
                    self.cuts.fetch_add(1, Ordering::SeqCst);
                    break;
                }
            }
            let _ = cw.shutdown().await;
        };
        tokio::select! {
            _ = up => {}
            _ = down => {}
        }
    }
}
