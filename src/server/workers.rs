//! Per-core workers (`server.runtime = "per_core"`): a thread per worker, each with a
//! current-thread runtime and a listening socket of its own on the same address
//! (`SO_REUSEPORT`, the kernel spreading new connections over them), and its own idle upstream
//! connections ([`crate::util::worker`]). A connection's calls run on the thread that accepted
//! it from the first byte read to the last written: no task moves between threads and no
//! wake-up crosses one, which is what the work-stealing runtime pays for in its tail latency
//! when the cores are busy (docs/performance.md, "The worker model").
//!
//! What outlives a call (the sid bridge, the cluster link, the exporters, the event feed) runs
//! on the runtime that started the gateway, which the workers name as their background
//! ([`crate::util::background`]); the workers only serve connections.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::{oneshot, watch, Semaphore};
use tokio::task::JoinHandle;

use super::conn::accept_loop;
use super::conn_service::ConnService;
use super::listener::Bounded;

/// How many connections the kernel queues for each worker's socket before it accepts them.
const BACKLOG: i32 = 1024;

/// What each worker serves: the same front, TLS and timeouts for every one.
#[derive(Clone)]
pub(super) struct Serving {
    pub(super) front: ConnService,
    pub(super) tls: Option<Arc<ArcSwap<rustls::ServerConfig>>>,
    pub(super) header_read_timeout: Duration,
    pub(super) stopped: watch::Receiver<bool>,
    /// `server.max_connections`, shared by every worker's socket.
    pub(super) max_connections: usize,
}

/// Binds a socket per worker on `listen` (`workers`, 0: one per core), all on one address
/// (port 0 resolved by the first).
pub(super) fn bind(
    listen: SocketAddr,
    workers: usize,
) -> std::io::Result<Vec<std::net::TcpListener>> {
    let n = match workers {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let first = reuse_port_listener(listen)?;
    let addr = first.local_addr()?;
    let mut sockets = vec![first];
    for _ in 1..n {
        sockets.push(reuse_port_listener(addr)?);
    }
    Ok(sockets)
}

/// Starts a worker on each of `sockets` ([`bind`]'s); returns once every worker serves its
/// socket, with their address and a task that ends when every worker has stopped accepting and
/// its connections have closed.
pub(super) async fn start(
    sockets: Vec<std::net::TcpListener>,
    serving: Serving,
) -> std::io::Result<(SocketAddr, JoinHandle<std::io::Result<()>>)> {
    let addr = sockets
        .first()
        .ok_or_else(|| std::io::Error::other("no worker socket"))?
        .local_addr()?;
    let background = tokio::runtime::Handle::current();
    let permits = Arc::new(Semaphore::new(serving.max_connections));
    let mut done = Vec::with_capacity(sockets.len());
    for (i, socket) in sockets.into_iter().enumerate() {
        let (ready_tx, ready) = oneshot::channel();
        let (tx, rx) = oneshot::channel();
        let (serving, permits, background) = (serving.clone(), permits.clone(), background.clone());
        std::thread::Builder::new()
            // `wg-w0:8080`: a thread's name holds 15 bytes, and `top -H` shows it.
            .name(format!("wg-w{i}:{}", addr.port()))
            .spawn(move || {
                crate::util::worker::enter(i);
                crate::util::background::enter(background);
                let _ = tx.send(run(socket, permits, serving, ready_tx));
            })?;
        // A worker that could not start says why here, before the gateway is said to listen.
        match ready.await {
            Ok(()) => done.push(rx),
            // The workers started already stop as the caller drops its stop signal.
            Err(_) => {
                return Err(match rx.await {
                    Ok(Err(e)) => e,
                    _ => std::io::Error::other("a worker thread did not start"),
                })
            }
        }
    }
    let task = tokio::spawn(async move {
        for rx in done {
            rx.await
                .unwrap_or_else(|_| Err(std::io::Error::other("a worker thread panicked")))?;
        }
        Ok(())
    });
    Ok((addr, task))
}

/// One worker: its runtime, serving `socket` until stopped and its connections are closed;
/// `ready` is told once it serves (dropped unsent when it cannot).
fn run(
    socket: std::net::TcpListener,
    permits: Arc<Semaphore>,
    serving: Serving,
    ready: oneshot::Sender<()>,
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(socket)?;
        let bounded = Bounded::sharing(listener, permits, serving.max_connections);
        let _ = ready.send(());
        accept_loop(
            bounded,
            serving.front,
            serving.tls,
            serving.header_read_timeout,
            serving.stopped,
        )
        .await
    })
}

/// A non-blocking listening socket on `addr` that other sockets may bind as well
/// (`SO_REUSEPORT`; and `SO_REUSEADDR`, as tokio's own `bind` sets).
fn reuse_port_listener(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    Ok(socket.into())
}
