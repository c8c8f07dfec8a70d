//! The service every connection is served by: each request's lane, and what its answer carries.
//!
//! `POST /rpc`, nearly every request a gateway sees, goes straight to its handler; a path the
//! gateway never answers itself, under a pass-through prefix, straight to the pass-through;
//! everything else through the router. Whatever the lane, the request runs in its trace context
//! and scope, and its answer's body ends its access line and its call in flight.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use axum::body::Body;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

use super::access::Arrival;
use crate::gateway::Binding;
use crate::http::headers::{Headers, RawHead};
use crate::http::reply::Reply;
use crate::http::scope::{self, Note};
use crate::http::trace::TraceContext;
use crate::model::error::GatewayError;
use crate::telemetry::activity::{self, Activity};

use super::calls::{self, rpc_call, rpc_reply};
use super::{is_own_path, Live, OverTls};

/// The service a connection is served by: `POST /rpc`, nearly every request a gateway sees, goes
/// straight to its handler; everything else through the router. Routing, the handler's service
/// adapters and their boxing cost about as much per call as the upstream exchange itself
/// (measured with callgrind: docs/performance.md).
#[derive(Clone)]
pub(super) struct ConnService {
    /// The configuration being served; a reload swaps it.
    pub(super) live: Arc<ArcSwap<Live>>,
    /// On an HTTP/2 connection, its calls in flight (HTTP/1's idle time is hyper's to time).
    activity: Option<Arc<Activity>>,
    /// The connection's client, put on each of its requests for the routes that ask.
    pub(super) peer: Option<crate::auth::admin::Peer>,
    /// Whether the connection is TLS.
    pub(super) tls: bool,
    /// The client certificate its TLS handshake verified (DER), for `auth.mtls`.
    pub(super) cert: Option<Arc<[u8]>>,
}

pub(super) use crate::auth::refusal::ClientCert;

impl ConnService {
    /// The client of a request on this connection with `headers` ([`Gate::client_ip`]).
    ///
    /// [`Gate::client_ip`]: crate::auth::gate::Gate::client_ip
    pub(super) fn client_ip(&self, live: &Live, headers: Headers<'_>) -> Option<std::net::IpAddr> {
        let peer = self.peer?.0.ip();
        Some(live.state.gateway.client_ip(peer, headers))
    }

    pub(super) fn new(live: Arc<ArcSwap<Live>>) -> Self {
        ConnService {
            live,
            activity: None,
            peer: None,
            tls: false,
            cert: None,
        }
    }

    /// The same service for a TLS connection whose client showed `cert`.
    pub(super) fn with_cert(mut self, cert: Option<Arc<[u8]>>) -> Self {
        self.cert = cert;
        self
    }

    /// The same service for one connection: its client, whether it is TLS, and its calls
    /// counted into `activity`.
    pub(super) fn tracking(
        &self,
        activity: Option<Arc<Activity>>,
        peer: Option<crate::auth::admin::Peer>,
        tls: bool,
    ) -> Self {
        ConnService {
            activity,
            peer,
            tls,
            cert: self.cert.clone(),
            live: self.live.clone(),
        }
    }
}

pub(super) type ConnServiceFuture =
    Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

/// A request's handler, boxed on its own before [`ConnService::respond`] wraps it.
type Handled = Pin<Box<dyn Future<Output = Response> + Send>>;

impl hyper::service::Service<hyper::Request<hyper::body::Incoming>> for ConnService {
    type Response = Response;
    type Error = Infallible;
    type Future = ConnServiceFuture;

    fn call(&self, req: hyper::Request<hyper::body::Incoming>) -> ConnServiceFuture {
        let live = self.live.load_full();
        let req = req.map(Body::new);
        let lane = live.lane(req.method(), req.uri().path());
        self.respond(live, req, lane)
    }
}

/// Which way a request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lane {
    /// `POST` to an RPC path: straight to [`rpc_call`] (or the HTTP/1 loop's writer), with
    /// CORS or without.
    Rpc,
    /// A path the gateway never answers itself, under a pass-through prefix, no CORS configured:
    /// straight to the pass-through.
    Passthrough,
    /// Everything else: the router.
    Router,
}

impl Live {
    /// The lane of a request with `method` to `path` under this configuration.
    pub(super) fn lane(&self, method: &axum::http::Method, path: &str) -> Lane {
        if method == axum::http::Method::POST && self.rpc_paths.matches(path) {
            Lane::Rpc
        } else if self.cors.is_some() {
            Lane::Router
        } else if !is_own_path(&self.rpc_paths, path) && self.state.passthrough.takes(path) {
            Lane::Passthrough
        } else {
            Lane::Router
        }
    }
}

impl ConnService {
    /// Answers `req` by its `lane` under `live`, the configuration it was read under: its trace
    /// context and scope, its access line, its call counted on an HTTP/2 connection. hyper's
    /// connections call it through [`Service`](hyper::service::Service), the HTTP/1 loop of
    /// [`h1`](super::h1) directly for the pass-through.
    pub(super) fn respond(
        &self,
        live: Arc<Live>,
        mut req: axum::extract::Request,
        lane: Lane,
    ) -> ConnServiceFuture {
        let (mut trace, state) = TraceContext::for_call_with_state(req.headers());
        // The client as the access line and the span name it: read only when either is on.
        let client = match live.access || live.state.gateway.tracer().is_on() {
            true => self.client_ip(&live, Headers::Map(req.headers())),
            false => None,
        };
        let span = server_span(
            &live,
            &mut trace,
            req.method(),
            req.uri().path(),
            lane,
            (self.tls, client),
        );
        let fast = lane == Lane::Rpc;
        let passed = lane == Lane::Passthrough;
        // What the routes may ask of the connection (the admin rule, the forwarding headers);
        // `POST /rpc` asks nothing, and skips building the extensions map.
        if !fast && !passed {
            if let Some(peer) = self.peer {
                req.extensions_mut().insert(peer);
            }
            if self.tls {
                req.extensions_mut().insert(OverTls);
            }
        }
        if let Some(cert) = self.cert.as_ref().filter(|_| !fast) {
            req.extensions_mut().insert(ClientCert(cert.clone()));
        }
        let access = live.access.then(|| Arrival {
            method: req.method().clone(),
            path: req.uri().path().to_owned(),
            started: Instant::now(),
            client,
        });
        // The call counts as in flight until its answer's body is done or dropped.
        let call = self
            .activity
            .as_ref()
            .map(|a| crate::telemetry::activity::Call::begin(a.clone()));
        // Boxed on its own before it is wrapped: the handlers' futures are large, and every
        // wrapper that held one by value would copy it (measured with callgrind: much
        // of a call's instructions were memcpy; docs/performance.md).
        let handled: Handled = if fast {
            let cors = live.cors.as_ref().map(|c| {
                let origin = req.headers().get(header::ORIGIN);
                super::cors::answer_headers(c, origin.map(|o| o.as_bytes()))
            });
            Box::pin(rpc_call(
                live.state.clone(),
                req,
                (self.peer, self.cert.clone(), self.tls),
                Binding::Gateway,
                cors,
            ))
        } else if passed {
            self.passed(&live, req)
        } else {
            routed(&live, req)
        };
        Box::pin(async move {
            let (resp, note, span) =
                scope::run(trace, state, access.is_some(), span, handled).await;
            Ok(finished(resp, note, access, trace, call, span))
        })
    }

    /// The pass-through lane's handler: the pass-through's answer, else 404.
    #[inline]
    fn passed(&self, live: &Live, req: axum::extract::Request) -> Handled {
        let passthrough = live.state.passthrough.clone();
        let gateway = live.state.gateway.clone();
        let origin = crate::passthrough::Origin {
            peer: self.peer.map(|p| p.0),
            tls: self.tls,
            edits: None,
        };
        Box::pin(async move {
            let cert = req.extensions().get::<ClientCert>().cloned();
            let (uri, headers) = (req.uri(), req.headers());
            let gate = super::fallback::gated(&gateway, &passthrough, uri, headers, cert, origin);
            let origin = match gate.await {
                Ok(origin) => origin,
                Err(refused) => return refused,
            };
            match passthrough.forward(req, origin).await {
                Ok(resp) => resp,
                Err(_) => StatusCode::NOT_FOUND.into_response(),
            }
        })
    }
}

/// The router lane's handler: the router's answer.
#[inline]
fn routed(live: &Live, req: axum::extract::Request) -> Handled {
    let router = live.router.clone();
    Box::pin(async move {
        match tower::ServiceExt::oneshot(router, req).await {
            Ok(mut resp) => {
                // axum writes `content-length: 0` on every empty answer, a 204 too,
                // which RFC 9110 forbids; hyper's HTTP/1 drops it, its HTTP/2 sends
                // it. Dropped here, so every writer's 204 is the same.
                if resp.status() == StatusCode::NO_CONTENT {
                    resp.headers_mut().remove(header::CONTENT_LENGTH);
                }
                resp
            }
            Err(never) => match never {},
        }
    })
}

/// `resp` with its body tied to the request's end: its access line (when `access`), written
/// once the body is sent or dropped, and its call in flight (when `call`), ended then.
#[inline]
fn finished(
    mut resp: Response,
    note: Note,
    access: Option<Arrival>,
    trace: TraceContext,
    call: Option<activity::Call>,
    span: Option<Box<scope::Recording>>,
) -> Response {
    if let Some(span) = span {
        let end = span.answered(resp.status().as_u16());
        resp = resp.map(|b| Body::new(activity::GuardedBody::new(b, end)));
    }
    if let Some(arrival) = access {
        let line = arrival.answered(resp.status(), &trace, note);
        resp = resp.map(|b| Body::new(crate::server::access::Counted::new(b, line)));
    }
    if let Some(call) = call {
        resp = resp.map(|b| Body::new(call.guard_body(b)));
    }
    resp
}

/// What the HTTP/1 loop awaits for a call it answers itself: the reply and its request id.
pub(super) type ReplyFuture = Pin<Box<dyn Future<Output = (Reply, calls::RequestId)> + Send>>;

/// A call the HTTP/1 loop answers from its [`Reply`] ([`ConnService::rpc_reply`]): the call, the trace
/// context and `tracestate` to run it in, its SERVER span, and what its answer adds when the
/// access log or CORS is on.
pub(super) struct RpcCall {
    pub(super) trace: TraceContext,
    pub(super) state: Option<HeaderValue>,
    pub(super) span: Option<Box<scope::Recording>>,
    /// `None` on the plain path (no access log, no CORS): nothing made for it.
    pub(super) extras: Option<Box<Extras>>,
    pub(super) call: ReplyFuture,
}

/// What an answer the HTTP/1 loop writes adds with the access log or CORS on.
pub(super) struct Extras {
    /// The access line's start, written once the answer is.
    pub(super) access: Option<Arrival>,
    /// The CORS headers, written into the answer's head.
    pub(super) cors: Option<axum::http::HeaderMap>,
}

impl ConnService {
    /// A `POST` to an RPC path that the HTTP/1 loop answers itself, its body read: the call
    /// (boxed on its own, as [`ConnService::respond`] boxes it: a wrapper holding it by value would
    /// copy it), answered with the [`Reply`] for the loop to write: no response object, no
    /// answer header map. The loop never counts calls in flight (that is HTTP/2's idle rule).
    pub(super) fn rpc_reply(
        &self,
        live: Arc<Live>,
        head: RawHead,
        read: Result<bytes::Bytes, GatewayError>,
        target: std::ops::Range<usize>,
    ) -> RpcCall {
        debug_assert!(self.activity.is_none());
        let (mut trace, state) = TraceContext::for_call_with_state(&head);
        let tracing = live.state.gateway.tracer().is_on();
        let path = || {
            let target = head.text(target.clone()).unwrap_or_default();
            target.split_once('?').map_or(target, |(p, _)| p)
        };
        // The client as the access line and the span name it: read only when either is on.
        let client = match live.access || tracing {
            true => self.client_ip(&live, Headers::Head(&head)),
            false => None,
        };
        let span = match tracing {
            true => {
                let how = (self.tls, client);
                server_span(&live, &mut trace, &Method::POST, path(), Lane::Rpc, how)
            }
            false => None,
        };
        let extras = match (live.access, &live.cors) {
            (false, None) => None,
            (access, cors) => Some(Box::new(Extras {
                access: access.then(|| Arrival {
                    method: Method::POST,
                    path: path().to_owned(),
                    started: Instant::now(),
                    client,
                }),
                cors: cors.as_ref().map(|c| {
                    super::cors::answer_headers(c, Headers::Head(&head).get(&header::ORIGIN))
                }),
            })),
        };
        let (peer, tls) = (self.peer, self.tls);
        let cert = self.cert.clone();
        let call = Box::pin(async move {
            rpc_reply(
                &live.state,
                Headers::Head(&head),
                read,
                (peer, cert.as_deref(), tls),
                Binding::Gateway,
            )
            .await
        });
        RpcCall {
            trace,
            state,
            span,
            extras,
            call,
        }
    }
}

/// The request's SERVER span, when tracing is on and its trace is sampled (decided here):
/// named by its method and, where the gateway knows it, its route; `url.path` without the
/// query (which may carry anything).
pub(super) fn server_span(
    live: &Live,
    trace: &mut TraceContext,
    method: &Method,
    path: &str,
    lane: Lane,
    (tls, client): (bool, Option<std::net::IpAddr>),
) -> Option<Box<scope::Recording>> {
    let tracer = live.state.gateway.tracer();
    if !tracer.is_on() {
        return None;
    }
    // The RPC path is the route and the name; a router path's template is `http.route`.
    let template = match lane {
        Lane::Router => crate::http::routes::template(path),
        _ => None,
    };
    let route = match (lane, template) {
        (Lane::Rpc, _) => Some(path),
        (_, t) => t,
    };
    let r = match route {
        Some(route) => tracer.server(trace, &[method.as_str(), " ", route]),
        None => tracer.server(trace, &[method.as_str()]),
    }?;
    {
        let mut span = r.span.borrow_mut();
        span.set("http.request.method", method.as_str());
        span.set("url.path", path);
        span.set("url.scheme", if tls { "https" } else { "http" });
        if let Some(ip) = client {
            span.set("client.address", ip.to_string().as_str());
        }
        if let Some(t) = template {
            span.set("http.route", t);
        }
        if lane == Lane::Passthrough {
            span.set("wiregate.passthrough", true);
        }
    }
    Some(r)
}
