//! The accept loop and one connection's life: every wait on a client timed, HTTP/1 event
//! streams handed to [`sse_conn`](crate::http::sse_conn), everything else served by hyper.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use axum::body::Body;
use axum::response::Response;
use tokio::sync::watch;

use super::streams::stream_route;
use super::ConnService;
use crate::http::sse_conn;
use crate::http::trace::TraceContext;
use crate::telemetry::activity::Activity;

/// Accepts connections and serves each on its own task until `stopped`; then lets every open
/// connection finish its calls (streams end when the bridge and feed stop).
///
/// Our own loop rather than `axum::serve`, for what that leaves unset: every wait on a client is
/// timed by `header_read_timeout` (its first bytes, each request head, an idle HTTP/2
/// connection, unanswered HTTP/2 PINGs), so a slow or silent client cannot hold a slot forever.
pub(super) async fn accept_loop(
    mut listener: crate::server::listener::Bounded,
    front: ConnService,
    tls: Option<Arc<ArcSwap<rustls::ServerConfig>>>,
    header_read_timeout: Duration,
    mut stopped: watch::Receiver<bool>,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioTimer};
    let mut auto = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    auto.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    auto.http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(header_read_timeout))
        .keep_alive_timeout(header_read_timeout);
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    let builder = Arc::new(Builders { auto, http1 });
    let handshakes = Arc::new(crate::server::listener::Handshakes::new(
        tokio::runtime::Handle::current().metrics().num_workers(),
    ));
    loop {
        let conn = tokio::select! {
            conn = listener.accept() => conn,
            _ = stopped.wait_for(|s| *s) => break,
        };
        let (builder, front, stopped) = (builder.clone(), front.clone(), stopped.clone());
        match &tls {
            None => tokio::spawn(serve_conn(
                conn,
                builder,
                front,
                header_read_timeout,
                stopped,
            )),
            Some(tls) => {
                // The certificate of the moment: a reload's new one serves new connections.
                let config = tls.load_full();
                let handshakes = handshakes.clone();
                tokio::spawn(async move {
                    let peer = conn.peer().map(crate::auth::admin::Peer);
                    let accepted = conn.tls_accept(config, header_read_timeout, &handshakes);
                    if let Some(conn) = accepted.await {
                        let front = front.with_cert(conn.peer_cert());
                        serve_http(
                            conn,
                            None,
                            builder,
                            front,
                            peer,
                            header_read_timeout,
                            stopped,
                        )
                        .await;
                    }
                })
            }
        };
    }
    listener.close().await;
    Ok(())
}

/// hyper's connection builders: HTTP/1 alone for a connection that did not open with HTTP/2's
/// preface (the sniff already told), the auto builder for the rest (it reads the preface again
/// through a rewinding wrapper, which an HTTP/1 connection need not pay for on every read).
struct Builders {
    auto: hyper_util::server::conn::auto::Builder<hyper_util::rt::TokioExecutor>,
    http1: hyper::server::conn::http1::Builder,
}

type Builder = Arc<Builders>;

/// Serves one plain connection: its first bytes within `timeout`; an HTTP/1 event-stream GET
/// off hyper ([`sse_conn`]), anything else as [`serve_http`] does.
async fn serve_conn(
    conn: crate::server::listener::Conn,
    builder: Builder,
    front: ConnService,
    timeout: Duration,
    mut stopped: watch::Receiver<bool>,
) {
    use crate::server::listener::Protocol;
    let peer = conn.peer().map(crate::auth::admin::Peer);
    let sniffed = tokio::select! {
        s = conn.sniff(timeout) => s,
        _ = stopped.wait_for(|s| *s) => None,
    };
    let Some((mut conn, proto)) = sniffed else {
        return;
    };
    // An event stream on HTTP/1 is served off hyper, for its memory (see `sse_conn`).
    if proto == Protocol::Http1 {
        let (prefix, io) = conn.parts_mut();
        if sse_conn::may_be_get(prefix) {
            let first = std::mem::take(prefix);
            let read = match sse_conn::read_get(io, first, timeout).await {
                sse_conn::Head::Gone => return,
                sse_conn::Head::Other(read) => read,
                sse_conn::Head::Get(get, read) => {
                    if let Some((resp, access, span)) = stream_response(&front, &get) {
                        // The head's bytes are not held for the stream's life.
                        drop(read);
                        let trace = span.as_ref().map(|(t, _)| *t);
                        let _span = span.map(|(_, s)| s.answered(resp.status().as_u16()));
                        let client = match access {
                            true => front.client_ip(&front.live.load(), (&get.headers).into()),
                            false => None,
                        };
                        let (io, _permit) = conn.into_stream();
                        serve_stream(io, get, resp, access.then_some(client), trace).await;
                        return;
                    }
                    read
                }
            };
            *conn.parts_mut().0 = read;
        }
    }
    // Boxed: inline, its state (hyper's connection, and a second copy of the arguments) would
    // be part of every event-stream connection's task too.
    Box::pin(serve_http(
        conn,
        Some(proto),
        builder,
        front,
        peer,
        timeout,
        stopped,
    ))
    .await;
}

/// The answer to an event-stream GET served off hyper, with its CORS headers, whether the
/// access log is on, and its SERVER span when tracing records it (ended when the stream does);
/// `None`: not a stream route, hyper serves it.
#[allow(clippy::type_complexity)]
fn stream_response(
    front: &ConnService,
    get: &sse_conn::Get,
) -> Option<(
    Response<Body>,
    bool,
    Option<(TraceContext, Box<crate::http::scope::Recording>)>,
)> {
    let live = front.live.load_full();
    let mut resp = stream_route(&live.state, &get.uri, &get.headers)?;
    let span = match live.state.gateway.tracer().is_on() {
        true => {
            let mut trace = TraceContext::for_call(&get.headers);
            let client = front.client_ip(&live, (&get.headers).into());
            super::conn_service::server_span(
                &live,
                &mut trace,
                &axum::http::Method::GET,
                get.uri.path(),
                super::conn_service::Lane::Router,
                (front.tls, client),
            )
            .map(|s| (trace, s))
        }
        false => None,
    };
    if let Some(cors) = &live.cors {
        let origin = get.headers.get(axum::http::header::ORIGIN);
        let cors = super::cors::answer_headers(cors, origin.map(|o| o.as_bytes()));
        super::cors::add(resp.headers_mut(), cors);
    }
    Some((resp, live.access, span))
}

/// Writes an event stream to its end, and its access line after when the log is on (`access`:
/// the client's address, when known; with the trace id of the stream's span, `trace`, when it has one).
///
/// `get` is read for the access line and dropped before the stream: an idle subscriber holds
/// no request headers.
async fn serve_stream(
    io: tokio::net::TcpStream,
    get: sse_conn::Get,
    resp: Response<Body>,
    access: Option<Option<std::net::IpAddr>>,
    trace: Option<TraceContext>,
) {
    let line = access.map(|client| {
        Box::new(crate::server::access::Line {
            method: axum::http::Method::GET,
            path: get.uri.path().to_owned(),
            client,
            status: resp.status(),
            started: std::time::Instant::now(),
            trace_id: trace
                .unwrap_or_else(|| TraceContext::for_call(&get.headers))
                .trace_id_hex(),
            note: crate::http::scope::Note::default(),
        })
    });
    let http10 = get.http10;
    drop(get);
    let bytes = sse_conn::write(io, http10, resp).await;
    if let Some(line) = line {
        line.emit(bytes);
    }
}

/// Serves HTTP on a connection until it ends, it idles (HTTP/2, no call in flight for
/// `timeout`) or the gateway stops; the last two close it gracefully (calls in flight finish).
/// A connection whose first bytes are not read yet (`proto` unknown: a TLS session) gets
/// `timeout` to send them, so a silent client cannot hold its slot there either.
async fn serve_http<S>(
    conn: crate::server::listener::Conn<S>,
    proto: Option<crate::server::listener::Protocol>,
    builder: Builder,
    front: ConnService,
    peer: Option<crate::auth::admin::Peer>,
    timeout: Duration,
    mut stopped: watch::Receiver<bool>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use crate::server::listener::Protocol;
    let tls = proto.is_none();
    let (conn, proto) = match proto {
        Some(p) => (conn, p),
        None => {
            let sniffed = tokio::select! {
                s = conn.sniff(timeout) => s,
                _ = stopped.wait_for(|s| *s) => None,
            };
            match sniffed {
                Some(c) => c,
                None => return,
            }
        }
    };
    let activity = (proto == Protocol::Http2).then(|| Arc::new(Activity::new()));
    let front = front.tracking(activity.clone(), peer, tls);
    if proto == Protocol::Http1 {
        let mut conn = conn;
        let (prefix, io) = conn.parts_mut();
        // `POST` to the RPC paths and the pass-through: our own loop, hyper for the rest.
        if super::h1::may_be_post(prefix) {
            let served = super::h1::serve(io, prefix, &front, timeout, &mut stopped).await;
            if let super::h1::Served::Closed = served {
                return;
            }
        }
        let conn = builder
            .http1
            .serve_connection(hyper_util::rt::TokioIo::new(conn), front)
            .with_upgrades();
        drive(
            std::pin::pin!(conn),
            |c| c.graceful_shutdown(),
            None,
            timeout,
            stopped,
        )
        .await;
    } else {
        let conn = builder
            .auto
            .serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(conn), front);
        let activity = activity.as_deref();
        drive(
            std::pin::pin!(conn),
            |c| c.graceful_shutdown(),
            activity,
            timeout,
            stopped,
        )
        .await;
    }
}

/// How long an idle HTTP/2 connection's GOAWAY has to reach the peer before the socket is
/// closed: a tenth of the header read timeout, at most 250 ms.
fn idle_drain(timeout: Duration) -> Duration {
    (timeout / 10).min(Duration::from_millis(250))
}

/// Drives a hyper connection until it ends, it idles (`activity` given: no call in flight for
/// `timeout`) or the gateway stops; the last two close it gracefully (calls in flight finish).
/// An idle connection is closed [`idle_drain`] after its GOAWAY, answered or not.
async fn drive<C, E>(
    mut conn: std::pin::Pin<&mut C>,
    graceful_shutdown: impl Fn(std::pin::Pin<&mut C>),
    activity: Option<&Activity>,
    timeout: Duration,
    mut stopped: watch::Receiver<bool>,
) where
    C: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let idle = async {
        match activity {
            // Idle for `timeout` less the drain, so it is closed within `timeout`.
            Some(a) => {
                a.idle_for(timeout.saturating_sub(idle_drain(timeout)))
                    .await
            }
            None => std::future::pending().await,
        }
    };
    let mut idle = std::pin::pin!(idle);
    let mut closing = false;
    // Set once the connection idled out: it has no call to finish, so it is closed this soon
    // after its GOAWAY whether or not the peer answers the PING hyper sends with it (waiting
    // for that answer would hold a silent peer's slot for another keep-alive timeout).
    let drained = tokio::time::sleep(Duration::MAX);
    let mut drained = std::pin::pin!(drained);
    // Polled only once set, so a connection that never idles out registers no timer for it.
    let mut draining = false;
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
                graceful_shutdown(conn.as_mut());
                draining = true;
                drained
                    .as_mut()
                    .reset(tokio::time::Instant::now() + idle_drain(timeout));
            }
            _ = &mut drained, if draining => return,
            _ = stopped.wait_for(|s| *s), if !closing => {
                closing = true;
                graceful_shutdown(conn.as_mut());
            }
        }
    }
}
