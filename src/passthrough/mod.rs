//! The pass-through reverse proxy: every request the gateway does not answer itself, under a
//! `[[passthrough]]` prefix, goes to that upstream's scheme and authority with its own method,
//! path, query, headers and body. Bodies stream both ways without buffering (an upstream's SSE
//! reaches the client event by event), `Upgrade` (WebSocket) is tunnelled, and the hop is told
//! as RFC 9110 and RFC 7239 say (see [`forwarded`](crate::http::forwarded)).
//!
//! The exchange runs in the calling task over [`proxy`](crate::upstream)'s pooled connections (see
//! [`exchange`]), as the RPC path's does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, HeaderName, HeaderValue, Request, Response, StatusCode};
use bytes::BytesMut;
use hyper::body::Body as _;
use hyper_util::rt::TokioIo;
use tokio::io::AsyncWriteExt;

use crate::config::{Config, Upstream};
use crate::http::forwarded;
use crate::http::span::Kind;
use crate::http::trace::{self, TraceContext};
use crate::outbound::stream::Stream;
use crate::upstream::{Endpoint, Outcome, UpstreamClient};

pub(crate) mod exchange;
pub(crate) mod head;
#[doc(hidden)]
pub mod raw;

/// Pass-through traffic, by upstream and answer status class.
pub const REQUESTS: &str = "wiregate_passthrough_requests_total";
/// Time to the upstream's answer head, by upstream.
pub const LATENCY: &str = "wiregate_passthrough_duration_seconds";

/// One upstream's client.
struct Target {
    name: String,
    timeout: Duration,
    /// `server.body_read_timeout_ms`: how long a client's streamed upload may take.
    body_timeout: Duration,
    /// Its endpoints: the RPC path's own (the same pools, health and ejections).
    client: UpstreamClient,
    /// Its metric handles, registered once: answers by status class (1xx to 5xx), latency.
    answers: [metrics::Counter; 5],
    latency: metrics::Histogram,
}

/// One `[[passthrough]]` entry: its prefix, its position in the list (its rule's, for the
/// gate) and its target.
type Route = (Box<str>, usize, Arc<Target>);

/// The pass-through table: prefixes, longest first, and their upstreams.
#[derive(Clone, Default)]
pub struct Passthrough {
    routes: Arc<[Route]>,
    /// `server.trusted_proxies` (whose forwarding headers are kept) and the header they write.
    proxies: crate::http::client_ip::Proxies,
}

impl std::fmt::Debug for Passthrough {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.routes.iter().map(|(p, _, t)| (p, &t.name)))
            .finish()
    }
}

/// Where the client's request came from, for the forwarding headers.
#[derive(Clone, Debug)]
pub struct Origin {
    /// The client's address.
    pub peer: Option<std::net::SocketAddr>,
    /// Whether it came over TLS.
    pub tls: bool,
    /// What the gate (`[auth]`) changes in its headers; `None` when it is open.
    pub edits: Option<Arc<Edits>>,
}

/// How the gate changes a request's headers on its way upstream.
#[derive(Debug, Default)]
pub struct Edits {
    /// Headers not passed on: the credentials (`auth.strip_credentials`) and a client's own
    /// `auth.identity_header`.
    pub drop: Vec<HeaderName>,
    /// `auth.identity_header` with the verified caller's id.
    pub identity: Option<(HeaderName, HeaderValue)>,
}

impl Edits {
    /// Whether a client header `name` is passed on.
    #[inline]
    fn keeps(edits: &Option<Arc<Edits>>, name: &HeaderName) -> bool {
        edits.as_ref().is_none_or(|e| !e.drop.contains(name))
    }

    /// Writes the identity header line, if any.
    fn write_identity(edits: &Option<Arc<Edits>>, out: &mut Vec<u8>) {
        if let Some((name, value)) = edits.as_ref().and_then(|e| e.identity.as_ref()) {
            crate::wire::head_writer::header_line(out, name.as_str().as_bytes(), value.as_bytes());
        }
    }
}

impl Passthrough {
    /// The table of a validated configuration, whose upstreams are `upstreams` (the gateway's:
    /// the pass-through shares their endpoints).
    pub fn new(config: &Config, upstreams: &[UpstreamClient]) -> Self {
        let mut routes: Vec<Route> = config
            .passthrough
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let u = config.upstreams.iter().find(|u| u.name == p.upstream)?;
                let client = upstreams.iter().find(|c| c.name() == u.name)?.clone();
                let prefix = p.prefix.trim_end_matches('/');
                let body_timeout = Duration::from_millis(config.server.body_read_timeout_ms);
                Some((
                    prefix.into(),
                    i,
                    Arc::new(Target::new(u, client, body_timeout)),
                ))
            })
            .collect();
        routes.sort_by_key(|(p, _, _)| std::cmp::Reverse(p.len()));
        Passthrough {
            routes: routes.into(),
            proxies: config.server.proxies(),
        }
    }

    /// Whether any prefix is configured.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// Whether a prefix takes `path`.
    pub fn takes(&self, path: &str) -> bool {
        self.target(path).is_some()
    }

    /// The target of `path`: the longest prefix it lies under, on segment boundaries.
    fn target(&self, path: &str) -> Option<&Arc<Target>> {
        self.route(path).map(|(_, t)| t)
    }

    /// The `[[passthrough]]` position of the prefix `path` lies under.
    pub(crate) fn prefix_of(&self, path: &str) -> Option<usize> {
        self.route(path).map(|(i, _)| i)
    }

    fn route(&self, path: &str) -> Option<(usize, &Arc<Target>)> {
        self.routes.iter().find_map(|(prefix, i, t)| {
            let rest = path.strip_prefix(&**prefix)?;
            (rest.is_empty() || rest.starts_with('/')).then_some((*i, t))
        })
    }

    /// Forwards `req` when a prefix takes its path; `Err(req)` hands it back otherwise.
    pub async fn forward(
        &self,
        req: Request<Body>,
        origin: Origin,
    ) -> Result<Response<Body>, Request<Body>> {
        let Some(target) = self.target(req.uri().path()).cloned() else {
            return Err(req);
        };
        let trusted = origin
            .peer
            .is_some_and(|p| self.proxies.trusted.contains(p.ip()));
        let client = origin
            .peer
            .map(|p| self.proxies.client_ip(p.ip(), req.headers()));
        Ok(target.forward(req, origin, (trusted, client)).await)
    }
}

/// A `POST` the HTTP/1 loop read whole, laid out for its upstream (see [`raw`]).
pub(crate) struct Ready {
    target: Arc<Target>,
    /// The endpoint it goes to.
    endpoint: Arc<Endpoint>,
    /// Its head and body, as the upstream gets them.
    request: Vec<u8>,
}

impl Passthrough {
    /// The request of `req` (a `POST` with `body`) as its upstream gets it, when a prefix takes
    /// `path`.
    pub(crate) fn ready(
        &self,
        path: &str,
        req: &raw::Request<'_>,
        body: &[u8],
        origin: Origin,
    ) -> Option<Ready> {
        let t = self.target(path)?.clone();
        let trusted = origin
            .peer
            .is_some_and(|p| self.proxies.trusted.contains(p.ip()));
        let get = |name: &str| {
            let (_, v) = req.headers.iter().find(|(n, _)| n.as_str() == name)?;
            Some(&req.bytes[v.clone()])
        };
        let client = origin.peer.map(|p| self.proxies.client_ip(p.ip(), req));
        let endpoint = t.client.pick_request(get, client).endpoint.clone();
        let mut request = Vec::with_capacity(request_room(req, body));
        upstream_request(&mut request, req, body, endpoint.label(), origin, trusted);
        Some(Ready {
            target: t,
            endpoint,
            request,
        })
    }
}

/// Room for the upstream's request of `req` and `body`: the client's head and body, and the
/// lines this hop adds.
fn request_room(req: &raw::Request<'_>, body: &[u8]) -> usize {
    req.bytes.len() + body.len() + 256
}

/// Writes in `out` the request `req` (a `POST` with `body`, from `origin`; `trusted`: a
/// trusted proxy's) as the upstream at `authority` gets it: head and body.
#[doc(hidden)]
pub fn upstream_request(
    out: &mut Vec<u8>,
    req: &raw::Request<'_>,
    body: &[u8],
    authority: &str,
    origin: Origin,
    trusted: bool,
) {
    let length = (!body.is_empty() || req.get(&header::CONTENT_LENGTH).is_some())
        .then_some(body.len() as u64);
    let outline = head::Outline {
        method: "POST",
        target: &req.bytes[req.target.clone()],
        authority,
        version: "1.1",
        uri_host: None,
        upgrade: None,
        framing: length.map_or(head::Framing::None, head::Framing::Length),
    };
    let (ctx, client_traced) = TraceContext::for_parent(req.get(&trace::TRACEPARENT));
    out.reserve(request_room(req, body));
    head::request_head(out, &outline, req, &origin, trusted, (&ctx, client_traced));
    out.extend_from_slice(body);
}

impl Ready {
    /// Sends the request and writes the answer's head as the client gets it in `out` (without
    /// its framing); an upstream that failed is a short answer of the gateway's own (502, 504).
    pub(crate) async fn relay(
        self,
        out: &mut Vec<u8>,
    ) -> Result<exchange::Relayed, Response<Body>> {
        let t = &self.target;
        let started = Instant::now();
        let Some(_slot) = t.admit() else {
            return Err(t.overloaded(started));
        };
        let sent = {
            let _in_flight = self.endpoint.in_flight();
            exchange::relay(&self.endpoint.pool, &self.request, out, t.timeout).await
        };
        let tried = match &sent {
            Ok(answer) => Outcome::of_status(answer.status),
            Err(exchange::Unanswered::TimedOut) => Outcome::TimedOut,
            Err(exchange::Unanswered::Failed(e)) => Outcome::of_error(e),
        };
        t.client.record(&self.endpoint, tried);
        crate::http::scope::note_try(self.endpoint.label());
        match sent {
            Ok(answer) => {
                t.record(answer.status, started);
                Ok(answer)
            }
            Err(exchange::Unanswered::Failed(e)) => {
                out.clear();
                tracing::warn!(upstream = %t.name, error = %e, "pass-through upstream unreachable");
                Err(t.refuse(StatusCode::BAD_GATEWAY, started, "unreachable"))
            }
            Err(exchange::Unanswered::TimedOut) => {
                out.clear();
                tracing::warn!(upstream = %t.name, timeout_ms = t.timeout.as_millis() as u64, "pass-through upstream timed out");
                Err(t.refuse(StatusCode::GATEWAY_TIMEOUT, started, "timed out"))
            }
        }
    }
}

impl Target {
    fn new(u: &Upstream, client: UpstreamClient, body_timeout: Duration) -> Self {
        // The recorder first, so the handles are live ones.
        crate::telemetry::install();
        let answers = ["1xx", "2xx", "3xx", "4xx", "5xx"].map(
            |class| metrics::counter!(REQUESTS, "upstream" => u.name.clone(), "status" => class),
        );
        Target {
            answers,
            latency: metrics::histogram!(LATENCY, "upstream" => u.name.clone()),
            name: u.name.clone(),
            timeout: u.timeout(),
            body_timeout,
            client,
        }
    }

    /// `trusted`: the peer is a trusted proxy; `client`: the client's address as
    /// [`Proxies::client_ip`](crate::http::client_ip::Proxies::client_ip) reads it (a split
    /// sticky by `ip` hashes it).
    async fn forward(
        &self,
        mut req: Request<Body>,
        origin: Origin,
        (trusted, client): (bool, Option<std::net::IpAddr>),
    ) -> Response<Body> {
        let started = Instant::now();
        let upgrade = wants_upgrade(req.headers()).then(|| {
            (
                req.headers().get(header::UPGRADE).cloned(),
                hyper::upgrade::on(&mut req),
            )
        });
        crate::http::scope::note_call("http", &self.name);
        let Some(_slot) = self.admit() else {
            return self.overloaded(started);
        };
        let get = |name: &str| req.headers().get(name).map(HeaderValue::as_bytes);
        let endpoint = self.client.pick_request(get, client).endpoint.clone();
        crate::http::scope::note_try(endpoint.label());
        let (parts, body) = req.into_parts();
        // The upstream request is a CLIENT span of the request's, when it records spans.
        let traced = crate::http::scope::parent().map(|p| {
            let span = p.child(Kind::Client, parts.method.as_str());
            (p, span)
        });
        let (head, sending, no_body) = self.head(
            &endpoint,
            &parts,
            &body,
            (origin, trusted),
            upgrade.as_ref().map(|u| &u.0),
            traced.as_ref().map(|(_, s)| s.span_id),
        );
        // Timed step by step, not as a whole: an upload may take longer than the upstream's
        // timeout, at the client's pace (bounded by `server.body_read_timeout_ms`).
        let timeouts = exchange::Timeouts {
            upstream: self.timeout,
            client_body: self.body_timeout,
        };
        let sent = {
            let _in_flight = endpoint.in_flight();
            exchange::exchange(
                &endpoint.pool,
                head,
                body,
                sending,
                no_body,
                upgrade.is_some(),
                timeouts,
            )
            .await
        };
        let tried = match &sent {
            Ok(answer) => Some(Outcome::of_status(answer.status)),
            Err(exchange::Failed::TimedOut) => Some(Outcome::TimedOut),
            Err(exchange::Failed::Upstream(e)) => Some(Outcome::of_error(e)),
            // The client's fault: the endpoint is not to blame, nor credited.
            Err(_) => None,
        };
        if let Some(tried) = tried {
            self.client.record(&endpoint, tried);
        }
        if let Some((parent, mut span)) = traced {
            span.set("http.request.method", parts.method.as_str());
            span.set("url.path", parts.uri.path());
            span.set("wiregate.upstream", &*self.name);
            span.set_server(endpoint.peer(), endpoint.label());
            match &sent {
                Ok(answer) => span.set_status(answer.status.as_u16()),
                Err(e) => span.fail(e.kind()),
            }
            parent.submit(span);
        }
        match sent {
            Ok(answer) => self.answered(answer, upgrade, started),
            Err(e) => self.failed(e, started),
        }
    }

    /// The upstream's answer as the client gets it: hop-by-hop headers dropped, the hop told,
    /// and an upgraded connection tunnelled between the two.
    fn answered(
        &self,
        answer: exchange::Answer,
        upgrade: Option<(Option<HeaderValue>, hyper::upgrade::OnUpgrade)>,
        started: Instant,
    ) -> Response<Body> {
        self.record(answer.status, started);
        let mut headers = answer.headers;
        let proto = headers.get(header::UPGRADE).cloned();
        forwarded::strip_hop_by_hop(&mut headers);
        let body = match answer.body {
            exchange::Delivered::Body(body) => body,
            exchange::Delivered::Upgraded(upstream, rest) => {
                if let Some((_, client)) = upgrade {
                    tokio::spawn(tunnel(client, upstream, rest));
                }
                if let Some(p) = proto {
                    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
                    headers.insert(header::UPGRADE, p);
                }
                Body::empty()
            }
        };
        forwarded::add_via(&mut headers, "1.1");
        let mut resp = Response::new(body);
        *resp.status_mut() = answer.status;
        *resp.headers_mut() = headers;
        resp
    }

    /// The gateway's own answer to an exchange that failed: the client's body (400, 408), or the
    /// upstream (504, 502).
    fn failed(&self, e: exchange::Failed, started: Instant) -> Response<Body> {
        match e {
            exchange::Failed::ClientBody(e) => {
                tracing::debug!(upstream = %self.name, error = %e, "pass-through request body failed");
                self.refuse(
                    StatusCode::BAD_REQUEST,
                    started,
                    "not sent: the request body failed",
                )
            }
            exchange::Failed::ClientBodyTimedOut => {
                tracing::debug!(upstream = %self.name, "pass-through request body timed out");
                self.refuse(
                    StatusCode::REQUEST_TIMEOUT,
                    started,
                    "not sent: the request body was not in within server.body_read_timeout_ms",
                )
            }
            exchange::Failed::TimedOut => {
                tracing::warn!(upstream = %self.name, timeout_ms = self.timeout.as_millis() as u64, "pass-through upstream timed out");
                self.refuse(StatusCode::GATEWAY_TIMEOUT, started, "timed out")
            }
            e => {
                tracing::warn!(upstream = %self.name, error = %e, "pass-through upstream unreachable");
                self.refuse(StatusCode::BAD_GATEWAY, started, "unreachable")
            }
        }
    }

    /// The request's head as the upstream gets it: its method and target, the upstream's
    /// authority, the client's end-to-end headers, the hop told, the trace passed on, and the
    /// body's framing. Also how the body goes, and whether the answer can have one.
    fn head(
        &self,
        endpoint: &Endpoint,
        req: &axum::http::request::Parts,
        body: &Body,
        (origin, trusted): (Origin, bool),
        upgrade: Option<&Option<HeaderValue>>,
        span: Option<[u8; 8]>,
    ) -> (Vec<u8>, exchange::Sending, bool) {
        let headers = &req.headers;
        let client_traced = trace::has_valid_parent(headers);
        let ctx = crate::http::scope::trace().unwrap_or_else(|| TraceContext::for_call(headers));
        let ctx = span.map_or(ctx, |id| ctx.with_span(id));
        let had_length = headers.contains_key(header::CONTENT_LENGTH);
        let (sending, framing) = match body.size_hint().exact() {
            Some(0) if !had_length => (exchange::Sending::Nothing, head::Framing::None),
            Some(0) => (exchange::Sending::Nothing, head::Framing::Length(0)),
            Some(n) => (exchange::Sending::Length, head::Framing::Length(n)),
            None => (exchange::Sending::Chunked, head::Framing::Chunked),
        };
        let target = req.uri.path_and_query().map_or("/", |p| p.as_str());
        let outline = head::Outline {
            method: req.method.as_str(),
            target: target.as_bytes(),
            authority: endpoint.label(),
            version: via_version(req.version),
            uri_host: req.uri.authority().map(|a| a.as_str()),
            upgrade: upgrade.map(|u| u.as_ref().map(HeaderValue::as_bytes)),
            framing,
        };
        let mut out = Vec::with_capacity(256 + target.len());
        head::request_head(
            &mut out,
            &outline,
            headers,
            &origin,
            trusted,
            (&ctx, client_traced),
        );
        (out, sending, req.method == axum::http::Method::HEAD)
    }

    /// A short plain-text answer of the gateway's own for an upstream that failed.
    /// A slot of the upstream's `max_concurrent`, held while the exchange runs (to the
    /// answer's head); `None` when none is free.
    fn admit(&self) -> Option<Option<crate::upstream::Slot<'_>>> {
        self.client.admit().ok()
    }

    /// The answer when `max_concurrent` exchanges are in flight to the upstream.
    fn overloaded(&self, started: Instant) -> Response<Body> {
        self.refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            started,
            "is at its max_concurrent exchanges in flight",
        )
    }

    fn refuse(&self, status: StatusCode, started: Instant, what: &str) -> Response<Body> {
        self.record(status, started);
        let body = format!("wiregate: pass-through upstream {:?} {what}\n", self.name);
        Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .body(Body::from(body))
            .expect("a static answer is valid")
    }

    fn record(&self, status: StatusCode, started: Instant) {
        let class = usize::from(status.as_u16() / 100).clamp(1, 5);
        self.answers[class - 1].increment(1);
        self.latency.record(started.elapsed().as_secs_f64());
    }
}

/// `Connection: upgrade` with an `Upgrade` header (HTTP/1.1's way to switch protocols).
fn wants_upgrade(headers: &axum::http::HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        && headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

fn via_version(v: axum::http::Version) -> &'static str {
    match v {
        axum::http::Version::HTTP_10 => "1.0",
        axum::http::Version::HTTP_2 => "2",
        axum::http::Version::HTTP_3 => "3",
        _ => "1.1",
    }
}

/// Copies bytes both ways between the client's upgraded connection and the upstream's, the
/// bytes already read from the upstream first, until either side closes.
async fn tunnel(client: hyper::upgrade::OnUpgrade, mut upstream: Stream, rest: BytesMut) {
    let client = match client.await {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(error = %e, "upgrade not completed");
            return;
        }
    };
    let mut client = TokioIo::new(client);
    if !rest.is_empty() {
        if let Err(e) = client.write_all(&rest).await {
            tracing::debug!(error = %e, "tunnel ended");
            return;
        }
    }
    if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
        tracing::debug!(error = %e, "tunnel ended");
    }
}
