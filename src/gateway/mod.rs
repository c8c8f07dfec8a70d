//! `POST /rpc`: one body in either dialect → calls → one answer in the caller's dialect.
//!
//! Every call is brought to one pivot form ([`Call`]) whatever the client spoke, dispatched to a
//! built-in method or to the routed upstream in that upstream's dialect, and its outcome is
//! written back in the client's dialect. JSON-RPC's rules (ids restored, notifications silent,
//! batches in order) hold whatever the upstream.

mod admission;
pub(crate) mod facade;
pub(crate) use admission::Refusals;
mod legacy;
mod sid;
mod spans;

use std::sync::Arc;
use std::time::Instant;

use axum::http::{HeaderValue, StatusCode};
use futures_util::stream::{self, StreamExt};

use crate::a2a::{self, A2a};
use crate::config::Config;
use crate::events::feed::Feed;
use crate::gateway::facade::Facade;
use crate::http::reply::{empty_reply, error_status, json_reply, single_reply, status_of, Reply};
use crate::migration::Migration;
use crate::model::a2a::{SpecCall, Version};
use crate::model::error::GatewayError;
use crate::sid::Bridge;
use crate::telemetry::spans::Tracer;
use crate::telemetry::{self, CallLabels};
use crate::upstream::affinity::Who;
use crate::upstream::call::{forward, Call, Done};
use crate::upstream::router::Router;
use crate::upstream::UpstreamClient;
use crate::wire::dialect::{self, Entry, Inbound, Message};
use crate::wire::jsonrpc::{Id, Outcome, Request, Response};
use crate::wire::legacy::{Auth, LegacyResponse};
use crate::wire::translate::ErrorTable;

/// What the caller's headers say about a body.
#[derive(Clone, Copy, Debug, Default)]
pub struct Meta<'a> {
    /// `Last-Event-ID` (resuming a stream).
    pub last_event_id: Option<&'a str>,
    /// `A2A-Version`.
    pub a2a_version: Option<&'a str>,
    /// All the request's headers (a split's `sticky = "header:NAME"`, the caller report).
    pub headers: Option<crate::http::headers::Headers<'a>>,
    /// The client's address (`sticky = "ip"`): the connection's peer, or what a trusted proxy
    /// says of its client.
    pub peer: Option<std::net::IpAddr>,
    /// Whether the connection is TLS.
    pub tls: bool,
    /// The connection's peer (a proxy, perhaps), for what a trusted one says of its client.
    pub proxy: Option<std::net::IpAddr>,
    /// The request's `X-Request-Id` (named in shadow differences), as the header's bytes: read
    /// as text only for a shadowed call.
    pub request_id: Option<&'a [u8]>,
    /// Which binding the body arrived on.
    pub binding: Binding,
    /// Who sent it, when the gate is not open ([`Gateway::identify`]).
    pub(crate) identity: Option<&'a crate::auth::gate::Identity>,
    /// Where a refused call leaves its refusal for the answer's headers.
    pub(crate) refusals: Option<&'a admission::Refusals>,
}

impl<'a> Meta<'a> {
    /// `Authorization`, as text: read when a call needs it (a bearer JWT is long, and a
    /// credential the gate strips is not read at all).
    pub fn authorization(&self) -> Option<&'a str> {
        self.headers
            .and_then(|h| h.str(&axum::http::header::AUTHORIZATION))
    }
}

impl Gateway {
    /// Who asks, as the sid bridge and A2A scope their answers: the verified caller's
    /// `kind:id`, the request's `Host`, and whether it came over TLS (to this listener, or to a
    /// trusted proxy that says so), for the URLs an extended card names.
    pub(crate) fn asker<'a>(&self, meta: &Meta<'a>) -> a2a::Asker<'a> {
        let https = match meta.headers {
            Some(h) => self.gate.over_tls(meta.tls, meta.proxy, &h),
            None => meta.tls,
        };
        a2a::Asker {
            tenant: meta.identity.and_then(|i| i.caller()).map(|c| &*c.tenant),
            host: meta.headers.and_then(|h| h.str(&axum::http::header::HOST)),
            https,
        }
    }
}

/// The binding a body arrived on: the gateway's own `POST /rpc`, or A2A's JSON-RPC binding
/// (`a2a.jsonrpc_path`).
///
/// They differ in two rules. On A2A's binding every JSON-RPC answer is HTTP 200, a malformed
/// request's -32600 and -32700 included (as a2a-sdk's server answers, and the A2A TCK checks);
/// the gateway's own path answers those 400, as its contract says. And A2A's binding
/// serves only A2A methods: slash names are A2A 0.3 with or without `A2A-Version` (there is no
/// seed dialect there), and any other method is -32601.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Binding {
    /// `server.rpc_paths`: every dialect, JSON-RPC envelope errors answered 400.
    #[default]
    Gateway,
    /// `a2a.jsonrpc_path`: A2A's JSON-RPC binding.
    A2a,
}

/// The request-path state built from the configuration.
#[derive(Debug)]
pub struct Gateway {
    facade: Facade,
    router: Router,
    upstreams: Vec<UpstreamClient>,
    table: ErrorTable,
    deprecation: bool,
    sunset: Option<HeaderValue>,
    batch_concurrency: usize,
    batch_len: usize,
    bridge: Option<Arc<Bridge>>,
    a2a: Option<Arc<A2a>>,
    feed: Option<Arc<Feed>>,
    migration: Migration,
    cluster: Option<Arc<crate::cluster::Link>>,
    /// `[auth]` and `[[rate_limits]]`.
    gate: Arc<crate::auth::gate::Gate>,
    /// `[tracing]`: the spans' queue and exporter, kept across reloads.
    tracer: Arc<Tracer>,
    /// Where a call carried to another replica goes there: the first of `server.rpc_paths`,
    /// and `a2a.jsonrpc_path` for one that came on A2A's binding.
    carry_paths: (String, Option<String>),
}

impl Gateway {
    /// Builds the gateway from a validated configuration, starting its sid bridge and event
    /// feed when they are configured.
    pub fn new(config: &Config) -> Self {
        let cluster = config
            .cluster
            .enabled()
            .then(|| crate::cluster::Link::start(&config.cluster))
            .and_then(|l| {
                l.map_err(|e| tracing::error!(error = %e, "cluster disabled"))
                    .ok()
            });
        let bridge = config
            .sid
            .enabled
            .then(|| Bridge::start(config.sid.clone(), cluster.clone()));
        let a2a = bridge.as_ref().filter(|_| config.a2a.enabled).map(|b| {
            Arc::new(A2a::new(
                b.clone(),
                config.a2a.clone(),
                // The card names A2A's own binding, else the gateway's first RPC path.
                match config.a2a.jsonrpc_path() {
                    Some(p) => p.to_owned(),
                    None => config
                        .server
                        .rpc_paths
                        .first()
                        .map_or("/rpc", |p| p.trim_end_matches('/'))
                        .to_owned(),
                },
                card_security(config),
            ))
        });
        let feed = (!config.events.source.is_empty()).then(|| match &cluster {
            Some(link) => crate::cluster::feed::start(config.events.clone(), link.clone()),
            None => Feed::start(config.events.clone()),
        });
        let tracer = Tracer::new(&config.tracing, spans::instance_id(config));
        Self::with_services(config, bridge, a2a, feed, None, cluster, tracer)
    }

    /// Whether a body goes through the gate ([`Gateway::identify`]) rather than straight
    /// to [`Gateway::handle`].
    #[inline]
    pub fn is_gated(&self) -> bool {
        !self.gate.is_open()
    }

    /// The gateway of a reloaded configuration: routes, upstreams and the legacy rules anew,
    /// the running sid bridge, A2A service and event feed kept (their sessions, contexts and
    /// subscribers are not disturbed by a reload), and the migration state carried over: a
    /// route that keeps its name keeps its figures and rollbacks (see `migration`).
    pub fn reloaded(&self, config: &Config) -> Self {
        Self::with_services(
            config,
            self.bridge.clone(),
            self.a2a.clone(),
            self.feed.clone(),
            Some((&self.migration, &self.upstreams, &self.gate)),
            self.cluster.clone(),
            self.tracer.clone(),
        )
    }

    fn with_services(
        config: &Config,
        bridge: Option<Arc<Bridge>>,
        a2a: Option<Arc<A2a>>,
        feed: Option<Arc<Feed>>,
        previous: Option<(&Migration, &[UpstreamClient], &crate::auth::gate::Gate)>,
        cluster: Option<Arc<crate::cluster::Link>>,
        tracer: Arc<Tracer>,
    ) -> Self {
        tracer.reconfigure(&config.tracing);
        // A reloaded upstream keeps the endpoints it still lists: their pools, health and
        // ejections.
        let upstreams: Vec<UpstreamClient> = config
            .upstreams
            .iter()
            .enumerate()
            .map(|(i, u)| {
                let old = previous.and_then(|(_, ups, _)| ups.iter().find(|o| o.name() == u.name));
                UpstreamClient::build(u.clone(), i, config.server.max_upstream_body_bytes, old)
            })
            .collect();
        let gate = crate::auth::gate::Gate::new(config, previous.map(|p| p.2), cluster.clone())
            .unwrap_or_else(|e| {
                // The files were read when the configuration was checked; one gone since
                // leaves the gate closed rather than open.
                tracing::error!(error = %e, "auth: every call is refused until a reload");
                crate::auth::gate::Gate::closed()
            });
        if let Some(b) = &bridge {
            // Contexts and tasks belong to their callers while callers are identified.
            b.set_tenancy(gate.identifies());
        }
        let previous = previous.map(|(m, _, _)| m);
        let table = ErrorTable::with_overrides(&config.legacy.error_codes);
        Gateway {
            facade: Facade::new(),
            router: Router::new(&config.routes),
            migration: Migration::new(config, &upstreams, &table, previous),
            table,
            deprecation: config.legacy.deprecation,
            sunset: config
                .legacy
                .sunset_time()
                .and_then(|t| HeaderValue::from_str(&httpdate::fmt_http_date(t)).ok()),
            batch_concurrency: config.server.max_batch_concurrency,
            batch_len: config.server.max_batch_len,
            bridge,
            a2a,
            feed,
            cluster,
            upstreams,
            gate: Arc::new(gate),
            tracer,
            carry_paths: (
                config
                    .server
                    .rpc_paths
                    .first()
                    .map_or("/rpc", |p| p.as_str())
                    .to_owned(),
                config.a2a.jsonrpc_path().map(str::to_owned),
            ),
        }
    }

    /// The tracer of `[tracing]`.
    pub(crate) fn tracer(&self) -> &Arc<Tracer> {
        &self.tracer
    }

    /// The link to the replicas' shared store, with `[cluster]`.
    pub(crate) fn cluster(&self) -> Option<&Arc<crate::cluster::Link>> {
        self.cluster.as_ref()
    }

    /// `[auth]` and `[[rate_limits]]`, for the routes that pass them on their own (the A2A REST
    /// binding, the event streams).
    pub(crate) fn gate(&self) -> &Arc<crate::auth::gate::Gate> {
        &self.gate
    }

    /// The domain-event feed, when a source is configured.
    pub fn feed(&self) -> Option<&Arc<Feed>> {
        self.feed.as_ref()
    }

    /// The sid bridge, when enabled.
    pub fn bridge(&self) -> Option<&Arc<Bridge>> {
        self.bridge.as_ref()
    }

    /// The A2A service, shared (for the REST binding's router).
    pub fn a2a_shared(&self) -> Option<Arc<A2a>> {
        self.a2a.clone()
    }

    /// The A2A service, when the sid bridge and `[a2a]` are on.
    pub fn a2a(&self) -> Option<&A2a> {
        self.a2a.as_deref()
    }

    /// Which dialect a JSON-RPC call speaks; always the seed's (or a route's) without `[a2a]`.
    /// On A2A's binding, only A2A methods (see [`Binding`]).
    fn classify(&self, method: &str, meta: &Meta<'_>) -> Result<Option<SpecCall>, GatewayError> {
        match (self.a2a.as_ref(), meta.binding) {
            (Some(_), Binding::Gateway) => a2a::classify(method, meta.a2a_version),
            (Some(_), Binding::A2a) => a2a::classify_binding(method, meta.a2a_version).map(Some),
            (None, Binding::Gateway) => Ok(None),
            (None, Binding::A2a) => Err(GatewayError::MethodNotFound(method.to_owned())),
        }
    }

    /// The status of a JSON-RPC envelope error (-32700, -32600): 200 on A2A's binding.
    fn envelope_status(resp: &Response, meta: &Meta<'_>) -> StatusCode {
        match meta.binding {
            Binding::Gateway => status_of(resp),
            Binding::A2a => StatusCode::OK,
        }
    }

    /// Splits, shadows, rollbacks and the caller report.
    pub fn migration(&self) -> &Migration {
        &self.migration
    }

    /// The configured upstreams.
    pub fn upstreams(&self) -> &[UpstreamClient] {
        &self.upstreams
    }

    /// Answers one request body; `meta` is what the caller's headers say.
    pub async fn handle(&self, body: &[u8], meta: &Meta<'_>) -> Reply {
        match dialect::parse_bounded(body, self.batch_len) {
            Err(resp) => json_reply(Self::envelope_status(&resp, meta), &resp),
            Ok(Inbound::Legacy(_)) if meta.binding == Binding::A2a => {
                let resp = Response::error(
                    Id::Null,
                    crate::wire::jsonrpc::ErrorObject::invalid_request(
                        "A2A's JSON-RPC binding takes JSON-RPC 2.0 requests; legacy envelopes \
                         go to server.rpc_paths",
                    ),
                );
                json_reply(StatusCode::OK, &resp)
            }
            Ok(Inbound::Legacy(Err(fault))) => self.legacy_reply(
                StatusCode::BAD_REQUEST,
                &LegacyResponse::error(fault.request_id, fault.error),
                None,
            ),
            Ok(Inbound::Legacy(Ok(req))) => self.handle_legacy(req, meta).await,
            Ok(Inbound::JsonRpc(Message::Single(Ok(req)))) => {
                let spec = self.classify(&req.method, meta);
                // The rare branches' futures are boxed: held inline, they would make every
                // call's future as large as the largest of them, and that future is moved (its
                // bytes copied) into its box and at each await on the way in.
                if req.id.is_some() {
                    // Checked here, outside the box: a gateway without a cluster allocates
                    // nothing for the carry.
                    if let Some(bridge) = self.bridge.as_deref().filter(|b| b.is_clustered()) {
                        let carried = self.carried(bridge, &req, &spec, body, meta);
                        if let Some(reply) = Box::pin(carried).await {
                            return reply;
                        }
                    }
                    let streaming = match spec {
                        Ok(Some(c)) if c.method.is_streaming() => Some(Some(c)),
                        Ok(None)
                            if self
                                .bridge
                                .as_ref()
                                .is_some_and(|b| b.is_streaming(&req.method)) =>
                        {
                            Some(None)
                        }
                        _ => None,
                    };
                    if let Some(spec) = streaming {
                        // A stream opens without `dispatch`: the gate is passed here.
                        if let Some(refused) = self.refused_stream(&req, spec, meta) {
                            return refused;
                        }
                        spans::stream(&req, spec.map_or("jsonrpc", |s| s.version.label()));
                        return Box::pin(self.open_stream(req, spec, meta)).await;
                    }
                }
                single_reply(self.handle_request(req, spec, meta).await)
            }
            Ok(Inbound::JsonRpc(Message::Single(Err(resp)))) => {
                json_reply(Self::envelope_status(&resp, meta), &resp)
            }
            Ok(Inbound::JsonRpc(Message::Batch(entries))) => {
                Box::pin(self.handle_batch(entries, meta)).await
            }
        }
    }

    /// A batch's entries, `server.max_batch_concurrency` at a time, answered in order.
    async fn handle_batch(&self, entries: Vec<Entry>, meta: &Meta<'_>) -> Reply {
        let answers: Vec<Response> = stream::iter(entries)
            .map(|e| {
                let span = crate::http::scope::call_span(match &e {
                    Ok(req) => req.method.as_str(),
                    Err(_) => "invalid request",
                });
                crate::http::scope::in_call(span, async move {
                    let answer = self.handle_entry(e, meta).await;
                    if let Some((_, resp, _)) = &answer {
                        spans::answered(resp);
                    }
                    answer
                })
            })
            .buffered(self.batch_concurrency)
            .filter_map(|a| async move { a.map(|(_, r, _)| r) })
            .collect()
            .await;
        match answers.is_empty() {
            true => empty_reply(),
            false => json_reply(StatusCode::OK, &answers),
        }
    }

    /// One JSON-RPC entry: `None` for a notification (nothing to answer).
    async fn handle_entry(
        &self,
        entry: Entry,
        meta: &Meta<'_>,
    ) -> Option<(StatusCode, Response, Option<f64>)> {
        match entry {
            Ok(req) => {
                let spec = self.classify(&req.method, meta);
                self.handle_request(req, spec, meta).await
            }
            Err(resp) => Some((Self::envelope_status(&resp, meta), resp, None)),
        }
    }

    /// One JSON-RPC request, its dialect already told: `None` for a notification.
    async fn handle_request(
        &self,
        req: Request,
        spec: Result<Option<SpecCall>, GatewayError>,
        meta: &Meta<'_>,
    ) -> Option<(StatusCode, Response, Option<f64>)> {
        let id = req.id.clone();
        let spec = match spec {
            Ok(spec) => spec,
            Err(e) => {
                // Only A2A method names fail to classify: answered as A2A 1.0 errors.
                return id.map(|id| {
                    (
                        error_status(&e, true),
                        Response::error(id, a2a::wire_error(&e, Some(Version::V1_0))),
                        None,
                    )
                });
            }
        };
        let call = Call {
            upstream_id: id
                .as_ref()
                .and_then(Id::as_text)
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| crate::util::ids::uuid_v4().to_string()),
            notification: id.is_none(),
            method: req.method,
            params: req.params,
            // A credential the gate checked and strips is never read into the call.
            auth: match self.strips(meta) {
                true => None,
                false => meta.authorization().and_then(Auth::from_header),
            },
            spec,
        };
        let client_dialect = spec.map_or("jsonrpc", |s| s.version.label());
        if let Some(id) = &id {
            crate::http::scope::annotate(|s| {
                id.with_text(|text| s.set("rpc.jsonrpc.request_id", text));
            });
        }
        let result = self.dispatch(call, client_dialect, meta).await;
        let id = id?;
        Some(match result {
            Ok(done) => (
                StatusCode::OK,
                Response {
                    id,
                    outcome: done.outcome,
                },
                done.timing_ms,
            ),
            Err(e) => (
                error_status(&e, spec.is_some()),
                Response::error(id, a2a::wire_error(&e, spec.map(|s| s.version))),
                None,
            ),
        })
    }

    /// Serves one call from a built-in method or the routed upstream, and records it.
    async fn dispatch(
        &self,
        call: Call,
        client_dialect: &'static str,
        meta: &Meta<'_>,
    ) -> Result<Done, GatewayError> {
        let started = Instant::now();
        let caller = meta.identity.and_then(|i| i.caller());
        // Behind the gate the route is looked up once, for its rule and for the call.
        let routed = meta.identity.map(|_| self.router.route(&call.method));
        if let Some(route) = routed {
            self.admit(&call.method, route.map(|(r, _)| r), meta)?;
        }
        let identity = match (&self.gate.identity_header, caller) {
            (Some(name), Some(c)) => Some((name.as_str(), &*c.id)),
            _ => None,
        };
        let who = Who {
            auth: call.auth.as_ref(),
            headers: meta.headers,
            ip: meta.peer,
            caller: caller.map(|c| (c.kind.as_str(), &*c.id)),
        };
        self.migration.saw(&who, client_dialect, &call.method);
        let sid = self
            .bridge
            .as_ref()
            .filter(|b| call.spec.is_some() || b.handles(&call.method));
        // The clock is read once more when the call is done, for the metrics and the
        // migration's figures alike.
        let mut elapsed = None;
        let traced = crate::http::scope::recording();
        let mut route_seen = None;
        let (upstream, served, result) = if self.facade.handles(&call.method) {
            ("builtin", None, self.builtin(&call))
        } else if let Some(bridge) = sid {
            let asker = self.asker(meta);
            (
                "sid",
                None,
                Box::pin(self.to_sid(bridge, &call, asker)).await,
            )
        } else if let Some((route, pick)) = routed
            .unwrap_or_else(|| self.router.route(&call.method))
            .and_then(|(route, _)| Some((route, self.migration.pick(route, &who)?)))
        {
            // The migration step (above): which side of a split serves this caller; here a copy
            // of the call for the route's shadow, sent later, off the caller's path.
            let shadow = self.migration.shadow_copy(route, pick, &call);
            if traced {
                route_seen = Some((route, pick));
            }
            let up = &self.upstreams[pick.upstream];
            let r = forward(up, &self.table, &call, Some(&who), identity).await;
            let took = *elapsed.insert(started.elapsed());
            self.migration
                .finished(route, pick, &r, took, shadow, meta.request_id);
            if let Err(e) = &r {
                telemetry::record_upstream_error(up.name(), e.kind());
                tracing::warn!(upstream = up.name(), method = %call.method, error = %e, "upstream call failed");
            }
            (up.name(), Some(up.dialect()), r)
        } else {
            (
                "none",
                None,
                Err(GatewayError::MethodNotFound(call.method.clone())),
            )
        };
        let outcome = outcome_label(&result);
        if traced {
            let route = route_seen.map(|(r, p)| self.migration.describe(r, p));
            spans::dispatched(
                &call.method,
                client_dialect,
                (upstream, served),
                route,
                &result,
            );
        }
        let elapsed = elapsed.unwrap_or_else(|| started.elapsed());
        telemetry::record_routed_call(
            CallLabels {
                client_dialect,
                upstream,
                method: &call.method,
                outcome,
            },
            served,
            elapsed,
        );
        result
    }

    /// The answer to a streaming call the gate refuses, in its dialect; `None`: it passes.
    fn refused_stream(
        &self,
        req: &Request,
        spec: Option<SpecCall>,
        meta: &Meta<'_>,
    ) -> Option<Reply> {
        let route = self.router.route(&req.method).map(|(r, _)| r);
        let e = self.admit(&req.method, route, meta).err()?;
        let id = req.id.clone().unwrap_or(Id::Null);
        let err = a2a::wire_error(&e, spec.map(|s| s.version));
        Some(json_reply(
            error_status(&e, spec.is_some()),
            &Response::error(id, err),
        ))
    }

    /// Whether a call's credential stays at the gateway: `auth.strip_credentials`, and the gate
    /// verified who sent it.
    #[inline]
    pub(super) fn strips(&self, meta: &Meta<'_>) -> bool {
        self.gate.strip_credentials && meta.identity.is_some_and(|i| i.caller().is_some())
    }

    /// Whether the gate lets a call of `method` through: the rule of its route (`route`, a
    /// `[[routes]]` index), then the rate limits (open when `meta` has no identity: the gate
    /// is). A refusal is counted and left for the answer's headers.
    fn admit(
        &self,
        method: &str,
        route: Option<usize>,
        meta: &Meta<'_>,
    ) -> Result<(), GatewayError> {
        let Some(identity) = meta.identity else {
            return Ok(());
        };
        let subject = crate::auth::limits::Subject {
            caller: identity.caller(),
            ip: meta.peer,
            headers: meta.headers,
        };
        let admitted = self.gate.admit_call(route, method, identity, &subject);
        telemetry::auth::record(method, &admitted);
        if let (Err(e), Some(r)) = (&admitted, meta.refusals) {
            r.note(e);
        }
        admitted
    }

    /// A call a built-in method answers ([`Facade`]).
    #[inline]
    fn builtin(&self, call: &Call) -> Result<Done, GatewayError> {
        let req = Request {
            method: call.method.clone(),
            params: call.params.clone(),
            id: Some(Id::Null),
        };
        let resp = self.facade.dispatch(&req);
        Ok(Done {
            outcome: resp.outcome,
            timing_ms: None,
        })
    }
}

/// What the agent card says of how callers prove who they are.
fn card_security(config: &Config) -> a2a::card::Security {
    let auth = &config.auth;
    a2a::card::Security {
        bearer: !config.sid.bearer_tokens.is_empty(),
        jwt: !auth.jwt.is_empty(),
        api_key: (!auth.api_keys.file.is_empty()).then(|| auth.api_keys.header.clone()),
        mtls: auth.mtls.identity != crate::config::MtlsIdentity::Off,
        required: !config.sid.bearer_tokens.is_empty()
            || auth.mode == crate::config::AuthMode::Required,
    }
}

/// A call's outcome as the metrics label it: `ok`, `error` (a JSON-RPC error answer), or the
/// kind of the failure.
#[inline]
fn outcome_label(result: &Result<Done, GatewayError>) -> &'static str {
    match result {
        Ok(Done {
            outcome: Outcome::Result(_),
            ..
        }) => "ok",
        Ok(Done {
            outcome: Outcome::Error(_),
            ..
        }) => "error",
        Err(e) => e.kind(),
    }
}
