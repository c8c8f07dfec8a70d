//! One endpoint of an upstream: its connections ([`Pool`]: a keep-alive pool, a pipelining
//! lane where enabled, the TLS client of an `https://` endpoint), its health, and one try of a
//! call on them, its failure saying whether anything was sent.

use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode};
use bytes::Bytes;

use super::health;
pub(crate) use super::health::Outcome;
use crate::config::Upstream;
use crate::model::error::GatewayError;
use crate::outbound::{self, h1, Options, Pool};

/// One endpoint of an upstream: its connections and its health.
pub(crate) struct Endpoint {
    /// The endpoint's URL as configured.
    pub(crate) url: String,
    /// Its health, kept across reloads and shared with the shadow's copy of the upstream.
    pub(crate) state: Arc<health::State>,
    /// Its connections (shared with the pass-through's streamed answers, which give theirs
    /// back when they end).
    pub(crate) pool: Arc<Pool>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// What an upstream answered.
#[derive(Debug)]
pub struct Answer {
    /// Its HTTP status.
    pub status: StatusCode,
    /// Its body, read whole (bounded).
    pub body: Bytes,
}

/// How one try of a call failed.
#[derive(Debug)]
pub(crate) struct Failure {
    /// The error the caller gets when the call is not tried again.
    pub(crate) error: GatewayError,
    /// Whether any byte of the request may have reached the endpoint (so whether the upstream
    /// may have acted on it).
    pub(crate) sent: bool,
    /// How the metrics and the outlier detection count it.
    pub(crate) outcome: Outcome,
}

impl Endpoint {
    /// The endpoint at `url` (validated) of `config`, with the upstream's TLS client (one for
    /// all its `https://` endpoints, read from its files once).
    pub(crate) fn new(
        config: &Upstream,
        url: &str,
        max_body: usize,
        state: Arc<health::State>,
        tls: Option<&Arc<rustls::ClientConfig>>,
    ) -> Self {
        let opts = Options::within(config.timeout(), max_body).with_tls(tls.cloned());
        let pool = Pool::new(url, &opts, config.pipeline).expect("upstream URLs are validated");
        Endpoint {
            url: url.to_owned(),
            state,
            pool: Arc::new(pool),
        }
    }

    /// POSTs a JSON body, within the upstream's timeout, and reads the whole answer. An
    /// `authorization` that is not a valid header value is not sent. A failure says whether
    /// the request may have reached the endpoint. `identity` is the caller's header
    /// (`auth.identity_header`), sent when a valid value. `span` is the try's CLIENT span, when
    /// it records one: its id goes in the `traceparent`.
    pub(crate) async fn post(
        &self,
        config: &Upstream,
        body: &[u8],
        authorization: Option<&str>,
        identity: Option<(&str, &str)>,
        span: Option<[u8; 8]>,
    ) -> Result<Answer, Failure> {
        let (traceparent, tracestate) = match crate::http::scope::upstream_trace() {
            Some((t, state)) => {
                let t = span.map_or(t, |id| t.with_span(id));
                (Some(t.traceparent_bytes()), state)
            }
            None => (None, None),
        };
        let head = h1::Head {
            path: self.pool.path(),
            host: self.pool.label(),
            authorization: authorization.filter(|a| h1::is_header_value(a)),
            traceparent: traceparent.as_ref(),
            tracestate: tracestate.as_ref().map(HeaderValue::as_bytes),
            identity: identity.filter(|(_, v)| h1::is_header_value(v)),
        };
        let answer = self.pool.post(&head, body, config.timeout()).await;
        self.answered(config, answer)
    }

    /// An exchange's outcome as the caller's.
    fn answered(
        &self,
        config: &Upstream,
        answer: Result<h1::Answer, outbound::Error>,
    ) -> Result<Answer, Failure> {
        let e = match answer {
            Ok(answer) => {
                return Ok(Answer {
                    status: answer.status,
                    body: answer.body,
                })
            }
            Err(outbound::Error::Exchange(e)) => e,
            Err(outbound::Error::TimedOut { sent }) => return Err(self.timed_out(config, sent)),
            Err(e) => return Err(self.failed(config, e, true, Outcome::Failed)),
        };
        match e {
            h1::Error::TooLarge { status, limit } => Err(Failure {
                error: bad_envelope(config, status, format!("answer exceeds {limit} bytes")),
                sent: true,
                outcome: Outcome::Failed,
            }),
            // The address stays in the log (`Failure::log`); the caller is told what happened.
            h1::Error::Connect { source, .. } => Err(self.failed(
                config,
                format!("connection failed: {source}"),
                false,
                Outcome::Refused,
            )),
            e @ h1::Error::NotSent(_) => Err(self.failed(config, e, false, Outcome::Refused)),
            e => Err(self.failed(config, e, true, Outcome::Failed)),
        }
    }

    fn timed_out(&self, config: &Upstream, sent: bool) -> Failure {
        Failure {
            error: GatewayError::UpstreamTimeout {
                upstream: config.name.clone(),
                timeout_ms: config.timeout_ms,
            },
            sent,
            outcome: Outcome::TimedOut,
        }
    }

    fn failed(
        &self,
        config: &Upstream,
        e: impl std::fmt::Display,
        sent: bool,
        outcome: Outcome,
    ) -> Failure {
        let detail = e.to_string();
        Failure {
            error: GatewayError::UpstreamUnreachable {
                upstream: config.name.clone(),
                detail: detail.chars().take(300).collect(),
            },
            sent,
            outcome,
        }
    }

    /// Whether a TCP connection to the upstream can be opened now.
    pub(crate) async fn reachable(&self) -> bool {
        self.pool.reachable().await
    }

    /// Counts a call in flight on it while the guard lives.
    #[inline]
    pub(crate) fn in_flight(&self) -> health::InFlight<'_> {
        health::InFlight::begin(&self.state)
    }

    /// The path its calls are POSTed to.
    pub(crate) fn path(&self) -> &str {
        self.pool.path()
    }

    /// The host and port connected to.
    pub(crate) fn peer(&self) -> (&str, u16) {
        self.pool.peer()
    }

    /// Its `host:port` (the `Host` it gets): how logs, metrics and `/readyz` name it.
    pub(crate) fn label(&self) -> &str {
        self.pool.label()
    }

    /// Whether its pool can serve `config` (an upstream reloaded): the settings a connection
    /// is made with are the same.
    pub(crate) fn fits(&self, config: &Upstream, max_body: usize) -> bool {
        self.pool.fits(config.pipeline, max_body)
    }
}

/// The error for an answer that is not a valid envelope of the upstream's dialect.
pub(crate) fn bad_envelope(
    config: &Upstream,
    status: StatusCode,
    detail: impl Into<String>,
) -> GatewayError {
    GatewayError::UpstreamBadEnvelope {
        upstream: config.name.clone(),
        dialect: config.dialect.as_str(),
        status: status.as_u16(),
        detail: detail.into(),
    }
}
