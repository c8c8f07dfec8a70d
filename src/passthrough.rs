//! The pass-through reverse proxy: every request the gateway does not answer itself, under a
//! `[[passthrough]]` prefix, goes to that upstream's scheme and authority with its own method,
//! path, query, headers and body. Bodies stream both ways without buffering (an upstream's SSE
//! reaches the client event by event), `Upgrade` (WebSocket) is tunnelled, and the hop is told
//! as RFC 9110 and RFC 7239 say (see [`forwarded`](crate::forwarded)).
//!
//! A second HTTP client beside [`proxy`](crate::proxy)'s on purpose: that one reads whole JSON
//! answers on the hot RPC path; this one must stream any body and hand over upgraded
//! connections, which hyper's client does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, HeaderValue, Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::config::{Config, Upstream};
use crate::forwarded::{self, Hop, Trusted};
use crate::trace::{self, TraceContext};

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// Pass-through traffic, by upstream and answer status class.
pub const REQUESTS: &str = "wiregate_passthrough_requests_total";
/// Time to the upstream's answer head, by upstream.
pub const LATENCY: &str = "wiregate_passthrough_duration_seconds";

/// One upstream's client.
struct Target {
    name: String,
    scheme: axum::http::uri::Scheme,
    authority: axum::http::uri::Authority,
    timeout: Duration,
    client: Client<Https, Body>,
}

/// The pass-through table: prefixes, longest first, and their upstreams.
#[derive(Clone, Default)]
pub struct Passthrough {
    routes: Arc<[(Box<str>, Arc<Target>)]>,
    trusted: Trusted,
}

impl std::fmt::Debug for Passthrough {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.routes.iter().map(|(p, t)| (p, &t.name)))
            .finish()
    }
}

/// Where the client's request came from, for the forwarding headers.
#[derive(Clone, Copy, Debug)]
pub struct Origin {
    /// The client's address.
    pub peer: Option<std::net::SocketAddr>,
    /// Whether it came over TLS.
    pub tls: bool,
}

impl Passthrough {
    /// The table of a validated configuration.
    pub fn new(config: &Config) -> Self {
        let mut routes: Vec<(Box<str>, Arc<Target>)> = config
            .passthrough
            .iter()
            .filter_map(|p| {
                let u = config.upstreams.iter().find(|u| u.name == p.upstream)?;
                let prefix = p.prefix.trim_end_matches('/');
                Some((prefix.into(), Arc::new(Target::new(u)?)))
            })
            .collect();
        routes.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        Passthrough {
            routes: routes.into(),
            trusted: Trusted::new(&config.server.trusted_proxies),
        }
    }

    /// Whether any prefix is configured.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// The target of `path`: the longest prefix it lies under, on segment boundaries.
    fn target(&self, path: &str) -> Option<&Arc<Target>> {
        self.routes.iter().find_map(|(prefix, t)| {
            let rest = path.strip_prefix(&**prefix)?;
            (rest.is_empty() || rest.starts_with('/')).then_some(t)
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
        let trusted = origin.peer.is_some_and(|p| self.trusted.contains(p.ip()));
        Ok(target.forward(req, origin, trusted).await)
    }
}

impl Target {
    fn new(u: &Upstream) -> Option<Self> {
        let uri: Uri = u.url.parse().ok()?;
        let tls = crate::tls::client_config(u).ok()?;
        let connector = crate::tls::connector(tls, Some(u.timeout()));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(256)
            .build(connector);
        Some(Target {
            name: u.name.clone(),
            scheme: uri.scheme()?.clone(),
            authority: uri.authority()?.clone(),
            timeout: u.timeout(),
            client,
        })
    }

    async fn forward(
        &self,
        mut req: Request<Body>,
        origin: Origin,
        trusted: bool,
    ) -> Response<Body> {
        let started = Instant::now();
        let upgrade = wants_upgrade(req.headers()).then(|| {
            (
                req.headers().get(header::UPGRADE).cloned(),
                hyper::upgrade::on(&mut req),
            )
        });
        let version = via_version(req.version());
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned)
            .or_else(|| req.uri().authority().map(|a| a.to_string()));
        let client_traced = trace::has_valid_parent(req.headers());
        let ctx = crate::scope::trace().unwrap_or_else(|| TraceContext::for_call(req.headers()));
        crate::scope::note_call("http", &self.name);
        let (mut parts, body) = req.into_parts();
        let mut uri = axum::http::uri::Parts::default();
        uri.scheme = Some(self.scheme.clone());
        uri.authority = Some(self.authority.clone());
        uri.path_and_query = parts.uri.path_and_query().cloned();
        parts.uri = Uri::from_parts(uri).expect("scheme, authority and a path make a URI");
        parts.version = axum::http::Version::HTTP_11;
        let headers = &mut parts.headers;
        forwarded::strip_hop_by_hop(headers);
        headers.remove(header::HOST);
        if let Some(peer) = origin.peer {
            forwarded::add_request_hop(
                headers,
                &Hop {
                    peer,
                    proto: if origin.tls { "https" } else { "http" },
                    version,
                    trusted,
                    host: host.as_deref(),
                },
            );
        }
        trace::set_upstream_headers(headers, &ctx, client_traced);
        if let Some((Some(proto), _)) = &upgrade {
            headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
            headers.insert(header::UPGRADE, proto.clone());
        }
        let sent = tokio::time::timeout(
            self.timeout,
            self.client.request(Request::from_parts(parts, body)),
        )
        .await;
        let resp = match sent {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => {
                tracing::warn!(upstream = %self.name, error = %error_chain(&e), "pass-through upstream unreachable");
                return self.refuse(StatusCode::BAD_GATEWAY, started, "unreachable");
            }
            Err(_) => {
                tracing::warn!(upstream = %self.name, timeout_ms = self.timeout.as_millis() as u64, "pass-through upstream timed out");
                return self.refuse(StatusCode::GATEWAY_TIMEOUT, started, "timed out");
            }
        };
        self.record(resp.status(), started);
        let mut resp = resp.map(Body::new);
        if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
            if let Some((_, client_side)) = upgrade {
                let upstream_side = hyper::upgrade::on(&mut resp);
                tokio::spawn(tunnel(client_side, upstream_side));
            }
            let proto = resp.headers().get(header::UPGRADE).cloned();
            forwarded::strip_hop_by_hop(resp.headers_mut());
            if let Some(p) = proto {
                resp.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
                resp.headers_mut().insert(header::UPGRADE, p);
            }
        } else {
            forwarded::strip_hop_by_hop(resp.headers_mut());
        }
        forwarded::add_via(resp.headers_mut(), "1.1");
        resp
    }

    /// A short plain-text answer of the gateway's own for an upstream that failed.
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
        let class = match status.as_u16() / 100 {
            1 => "1xx",
            2 => "2xx",
            3 => "3xx",
            4 => "4xx",
            _ => "5xx",
        };
        metrics::counter!(REQUESTS, "upstream" => self.name.clone(), "status" => class)
            .increment(1);
        metrics::histogram!(LATENCY, "upstream" => self.name.clone())
            .record(started.elapsed().as_secs_f64());
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

/// Copies bytes both ways between the client's and the upstream's upgraded connections until
/// either side closes.
async fn tunnel(client: hyper::upgrade::OnUpgrade, upstream: hyper::upgrade::OnUpgrade) {
    let (client, upstream) = match tokio::join!(client, upstream) {
        (Ok(c), Ok(u)) => (c, u),
        (c, u) => {
            tracing::debug!(
                client = c.is_ok(),
                upstream = u.is_ok(),
                "upgrade not completed"
            );
            return;
        }
    };
    let (mut client, mut upstream) = (TokioIo::new(client), TokioIo::new(upstream));
    if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
        tracing::debug!(error = %e, "tunnel ended");
    }
}

/// An error and its sources on one line (hyper's client errors say little at the top).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}
