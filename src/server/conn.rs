//! The accept loop and one connection's life: every wait on a client timed, HTTP/1 event
//! streams handed to [`sse_conn`](crate::sse_conn), everything else served by hyper.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::streams::stream_route;
use super::Front;
use crate::activity::Activity;
use crate::sse_conn;

/// Accepts connections and serves each on its own task until `stopped`; then lets every open
/// connection finish its calls (streams end when the bridge and feed stop).
///
/// Our own loop rather than `axum::serve`, for what that leaves unset: every wait on a client is
/// timed by `header_read_timeout` (its first bytes, each request head, an idle HTTP/2
/// connection, unanswered HTTP/2 PINGs), so a slow or silent client cannot hold a slot forever.
pub(super) async fn accept_loop(
    mut listener: crate::listener::Bounded,
    front: Front,
    header_read_timeout: Duration,
    mut stopped: watch::Receiver<bool>,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioTimer};
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(header_read_timeout))
        .keep_alive_timeout(header_read_timeout);
    loop {
        let conn = tokio::select! {
            conn = listener.accept() => conn,
            _ = stopped.wait_for(|s| *s) => break,
        };
        tokio::spawn(serve_conn(
            conn,
            builder.clone(),
            front.clone(),
            header_read_timeout,
            stopped.clone(),
        ));
    }
    listener.close().await;
    Ok(())
}

/// Serves one connection: its first bytes within `timeout`, then HTTP until it ends, it idles
/// (HTTP/2, no call in flight for `timeout`) or the gateway stops; the last two close it
/// gracefully (calls in flight finish).
async fn serve_conn(
    conn: crate::listener::Conn,
    builder: hyper_util::server::conn::auto::Builder<hyper_util::rt::TokioExecutor>,
    front: Front,
    timeout: Duration,
    mut stopped: watch::Receiver<bool>,
) {
    use crate::listener::Protocol;
    let sniffed = tokio::select! {
        s = conn.sniff(timeout) => s,
        _ = stopped.wait_for(|s| *s) => None,
    };
    let Some((mut conn, proto)) = sniffed else {
        return;
    };
    let peer = conn.peer().map(crate::admin::Peer);
    // An event stream on HTTP/1 is served off hyper, for its memory (see `sse_conn`).
    if proto == Protocol::Http1 {
        let (prefix, io) = conn.parts_mut();
        if sse_conn::may_be_get(prefix) {
            let first = std::mem::take(prefix);
            let read = match sse_conn::read_get(io, first, timeout).await {
                sse_conn::Head::Gone => return,
                sse_conn::Head::Other(read) => read,
                sse_conn::Head::Get(get, read) => {
                    match stream_route(&front.state, &get.uri, &get.headers) {
                        Some(resp) => {
                            let (io, _permit) = conn.into_stream();
                            sse_conn::write(io, &get, resp).await;
                            return;
                        }
                        None => read,
                    }
                }
            };
            *conn.parts_mut().0 = read;
        }
    }
    let activity = (proto == Protocol::Http2).then(|| Arc::new(Activity::new()));
    let front = front.tracking(activity.clone(), peer);
    let conn = builder.serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(conn), front);
    let mut conn = std::pin::pin!(conn);
    let idle = async {
        match &activity {
            Some(a) => a.idle_for(timeout).await,
            None => std::future::pending().await,
        }
    };
    let mut idle = std::pin::pin!(idle);
    let mut closing = false;
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            _ = &mut idle, if !closing => {
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
            _ = stopped.wait_for(|s| *s), if !closing => {
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}
