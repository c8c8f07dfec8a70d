//! How a context reaches sid: a child process on its pipes, or an attached `sid --listen`
//! socket kept connected, and the tasks that move lines between either and the context.

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, Notify};

use super::context::Context;

use super::lines::{Line, Lines};

impl Context {
    /// Runs sid as a child (with `--resume SESSION` when given) until it exits: the child and
    /// its pipes' tasks belong to the background runtime ([`crate::util::background`]), so
    /// they outlive the call that started them on a per-core worker.
    pub(crate) fn spawn_child(
        self: &Arc<Self>,
        command: &[String],
        resume: Option<String>,
    ) -> std::io::Result<()> {
        crate::util::background::within(|| self.start_child(command, resume))
    }

    /// [`spawn_child`](Self::spawn_child), in the runtime it runs in.
    fn start_child(
        self: &Arc<Self>,
        command: &[String],
        resume: Option<String>,
    ) -> std::io::Result<()> {
        let mut cmd = tokio::process::Command::new(&command[0]);
        cmd.args(&command[1..]);
        if let Some(s) = &resume {
            cmd.args(["--resume", s]);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn()?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let (tx, rx) = mpsc::channel(self.max_queued);
        let kill = Arc::new(Notify::new());
        self.on_up(tx, Some(kill.clone()));
        tokio::spawn(write_lines(stdin, rx));
        let id = self.id.clone();
        // Its stderr is bounded as its stdout is: a line over the cap is dropped as it comes.
        let max_line = self.max_line;
        tokio::spawn(async move {
            let mut lines = Lines::new(stderr, 8 * 1024, max_line);
            loop {
                match lines.next().await {
                    Ok(Some(Line::Text(l))) => {
                        let l = String::from_utf8_lossy(l);
                        tracing::info!(context = %id, "sid stderr: {}", l.trim_end());
                    }
                    Ok(Some(Line::TooLong { bytes })) => {
                        tracing::warn!(context = %id, bytes, "sid stderr line over sid.max_line_bytes skipped");
                    }
                    _ => break,
                }
            }
        });
        let ctx = self.clone();
        tokio::spawn(async move {
            let mut stdout = Lines::new(stdout, 64 * 1024, ctx.max_line);
            // One waiter for the kill signal, registered once rather than per line; polled
            // first, so a child that floods stdout can still be killed.
            let mut killed = std::pin::pin!(kill.notified());
            loop {
                tokio::select! {
                    biased;
                    _ = &mut killed => {
                        let _ = child.start_kill();
                        killed.set(kill.notified());
                    }
                    // sid waits (its pipe fills) while a subscriber catches up; see `room`.
                    more = async {
                        ctx.queue.room(ctx.lag_grace).await;
                        match stdout.next().await {
                            Ok(Some(Line::Text(line))) => {
                                ctx.on_bytes(line);
                                true
                            }
                            Ok(Some(Line::TooLong { bytes })) => {
                                ctx.skipped_line(bytes);
                                true
                            }
                            _ => false,
                        }
                    } => if !more {
                        break;
                    },
                }
            }
            let status = child.wait().await;
            let was_busy = ctx.active_turn().is_some();
            let reason = match status {
                Ok(s) if s.success() && !was_busy => format!("sid exited ({s})"),
                Ok(s) => format!("sid exited mid-task ({s})"),
                Err(e) => format!("sid could not be waited for: {e}"),
            };
            tracing::info!(context = %ctx.id, %reason, "sid stopped");
            ctx.on_down(reason, true);
        });
        Ok(())
    }

    /// Attaches to `sid --listen` and stays attached, reconnecting with backoff, until
    /// [`close`](Self::close). Open tasks fail when the socket stays down for `grace`.
    pub(crate) fn spawn_socket(self: &Arc<Self>, spec: String, grace: Duration) {
        let ctx = self.clone();
        crate::util::background::spawn(async move {
            let mut backoff = Duration::from_millis(50);
            let mut down_since: Option<Instant> = None;
            while !ctx.queue.is_closed() {
                match connect(&spec).await {
                    Ok((read, write)) => {
                        backoff = Duration::from_millis(50);
                        down_since = None;
                        let (tx, rx) = mpsc::channel(ctx.max_queued);
                        tokio::spawn(write_lines(write, rx));
                        let mut tx = Some(tx);
                        let mut read = Lines::new(read, 64 * 1024, ctx.max_line);
                        loop {
                            ctx.queue.room(ctx.lag_grace).await;
                            let line = match read.next().await {
                                Ok(Some(Line::Text(line))) => line,
                                Ok(Some(Line::TooLong { bytes })) => {
                                    ctx.skipped_line(bytes);
                                    continue;
                                }
                                _ => break,
                            };
                            // sid replays its history first; requests go out only once it is live.
                            let marker = ctx.on_bytes(line);
                            if marker {
                                if let Some(tx) = tx.take() {
                                    ctx.on_up(tx, None);
                                }
                            }
                        }
                        tracing::warn!(context = %ctx.id, "the sid socket dropped; reconnecting");
                        ctx.on_down("the sid socket dropped".into(), false);
                    }
                    Err(e) => {
                        tracing::debug!(context = %ctx.id, error = %e, "cannot reach the sid socket")
                    }
                }
                let since = *down_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= grace && ctx.active_turn().is_some() {
                    ctx.fail_open("the sid socket dropped and did not come back in time");
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        });
    }
}

impl Context {
    /// A line of sid's longer than `sid.max_line_bytes` was dropped: counted and logged (its
    /// length, never its bytes), and the next line read.
    fn skipped_line(&self, bytes: u64) {
        metrics::counter!("wiregate_sid_lines_skipped_total").increment(1);
        tracing::warn!(
            context = %self.id,
            bytes,
            max_line_bytes = self.max_line,
            "a line of sid's output longer than sid.max_line_bytes; skipped"
        );
    }
}

async fn write_lines(mut w: impl AsyncWrite + Unpin, mut rx: mpsc::Receiver<String>) {
    while let Some(mut line) = rx.recv().await {
        line.push('\n');
        if w.write_all(line.as_bytes()).await.is_err() || w.flush().await.is_err() {
            break;
        }
    }
    let _ = w.shutdown().await;
}

type Halves = (
    Box<dyn AsyncRead + Send + Unpin>,
    Box<dyn AsyncWrite + Send + Unpin>,
);

async fn connect(spec: &str) -> std::io::Result<Halves> {
    if let Some(path) = spec.strip_prefix("unix://") {
        let s = tokio::net::UnixStream::connect(path).await?;
        let (r, w) = s.into_split();
        Ok((Box::new(r), Box::new(w)))
    } else if let Some(addr) = spec.strip_prefix("tcp://") {
        let s = tokio::net::TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        let (r, w) = s.into_split();
        Ok((Box::new(r), Box::new(w)))
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{spec}: want unix:///path or tcp://host:port"),
        ))
    }
}
