//! A real `redis-server` (the Debian package `.ci/run` installs) on a free loopback port, with
//! nothing written to disk, killed when dropped.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `redis-server`.
#[derive(Debug)]
pub struct RedisServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts one on a free port and waits until it answers.
    pub async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = RedisServer { port, child: None };
        server.restart().await;
        server
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Kills it (SIGKILL) and waits for it to be gone.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port (empty: it keeps nothing), after [`kill`](Self::kill).
    pub async fn restart(&mut self) {
        self.kill();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed (apt-get install redis-server; .ci/run does)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if self.ping().await {
                return;
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Holds every write command for `ms` (`CLIENT PAUSE ms WRITE`; reads go on), as a Redis
    /// slow to take writes would.
    pub async fn pause_writes(&self, ms: u64) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .unwrap();
        s.write_all(format!("CLIENT PAUSE {ms} WRITE\r\n").as_bytes())
            .await
            .unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"+OK\r\n", "CLIENT PAUSE answered");
    }

    /// Whether it answers PING.
    pub async fn ping(&self) -> bool {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await else {
            return false;
        };
        if s.write_all(b"PING\r\n").await.is_err() {
            return false;
        }
        let mut buf = [0u8; 7];
        matches!(
            tokio::time::timeout(Duration::from_secs(1), s.read_exact(&mut buf)).await,
            Ok(Ok(_))
        ) && &buf == b"+PONG\r\n"
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
