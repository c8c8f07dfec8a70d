//! The exporter task: every `export_interval_ms` (or sooner, when a batch is waiting) it takes
//! the tracer's queue and POSTs it to the collector, one request per 512 spans, one request at
//! a time; spans that arrive meanwhile wait in the bounded queue. It never touches a request.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use axum::http::{header, HeaderName, HeaderValue, Method, Request, StatusCode};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;

use crate::outbound::{Options, Pool};

use super::otlp::{self, Service};
use super::{Pending, Tracer, EXPORT_FAILURES, SPANS_EXPORTED};
use crate::config::{OtlpProtocol, Tracing};

/// How long one export may take before it counts as failed.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting to the collector may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest answer read from the collector (a partial-success message is a few bytes).
const MAX_ANSWER: usize = 1 << 20;
/// Export errors are logged at most this often.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// The collector's client, for one endpoint: `https://` ones over TLS verified against
/// `tracing.ca_file` or the platform's roots. OTLP/HTTP goes through the outbound client's
/// pool; gRPC needs HTTP/2, so hyper's client over the outbound client's connector (ALPN `h2`).
enum Transport {
    Http(Pool),
    Grpc(Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>),
}

/// Where and how spans are sent, built again when a reload changes `[tracing]`.
struct Target {
    settings: Arc<Tracing>,
    url: axum::http::Uri,
    transport: Transport,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl Target {
    /// The target of `settings`; `Err` says why there is none (never a credential), `Ok(None)`
    /// when the endpoint names no collector.
    fn new(settings: Arc<Tracing>) -> Result<Option<Self>, String> {
        let Some((protocol, url)) = settings.target() else {
            return Ok(None);
        };
        let tls = settings
            .tls()
            .map_err(|e| format!("tracing.{}: {}", e.key, e.message))?;
        let transport = match protocol {
            OtlpProtocol::Http => {
                let opts = Options::within(EXPORT_TIMEOUT, MAX_ANSWER)
                    .connect_within(CONNECT_TIMEOUT)
                    .with_tls(tls);
                match Pool::new(&url, &opts, 0) {
                    Ok(pool) => Transport::Http(pool),
                    Err(_) => return Ok(None),
                }
            }
            OtlpProtocol::Grpc => Transport::Grpc(
                Client::builder(hyper_util::rt::TokioExecutor::new())
                    .http2_only(true)
                    .build(crate::outbound::tls::h2_connector(tls, CONNECT_TIMEOUT)),
            ),
        };
        // Checked by `check-config`; a pair that still fails is left out, not sent broken.
        let headers = settings
            .headers
            .iter()
            .filter_map(|(k, v)| {
                Some((
                    HeaderName::from_bytes(k.as_bytes()).ok()?,
                    HeaderValue::from_str(v).ok()?,
                ))
            })
            .collect();
        let Ok(url) = url.parse() else {
            return Ok(None);
        };
        Ok(Some(Target {
            url,
            settings,
            transport,
            headers,
        }))
    }

    /// Sends one batch (its spans after [`otlp::HEAD_ROOM`]); `Err` says why it was not
    /// accepted (never a header's value).
    async fn send(&self, batch: Vec<u8>, service: &Service) -> Result<(), String> {
        let client = match &self.transport {
            Transport::Http(pool) => return self.post(pool, batch, service).await,
            Transport::Grpc(client) => client,
        };
        let body = otlp::request(service, batch, true);
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(self.url.clone())
            .header(header::CONTENT_TYPE, "application/grpc")
            .header(header::TE, "trailers");
        for (k, v) in &self.headers {
            req = req.header(k, v);
        }
        let req = req.body(Full::new(body)).map_err(|e| e.to_string())?;
        let sent = async {
            let resp = client.request(req).await.map_err(|e| format!("{e:?}"))?;
            let status = resp.status();
            let head_grpc = resp.headers().get("grpc-status").cloned();
            let collected = Limited::new(resp.into_body(), MAX_ANSWER)
                .collect()
                .await
                .map_err(|e| e.to_string())?;
            let grpc = head_grpc.or_else(|| {
                collected
                    .trailers()
                    .and_then(|t| t.get("grpc-status").cloned())
            });
            match (status, grpc.as_ref().map(HeaderValue::as_bytes)) {
                (StatusCode::OK, Some(b"0")) => Ok(()),
                (s, g) => Err(format!(
                    "the collector answered {s}, grpc-status {}",
                    g.map_or("none".into(), |g| String::from_utf8_lossy(g).into_owned())
                )),
            }
        };
        tokio::time::timeout(EXPORT_TIMEOUT, sent)
            .await
            .map_err(|_| format!("no answer within {} s", EXPORT_TIMEOUT.as_secs()))?
    }

    /// One batch over OTLP/HTTP, through the outbound client.
    async fn post(&self, pool: &Pool, batch: Vec<u8>, service: &Service) -> Result<(), String> {
        let body = otlp::request(service, batch, false);
        let mut headers = vec![("content-type", "application/x-protobuf")];
        headers.extend(
            self.headers
                .iter()
                .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?))),
        );
        let req = crate::outbound::Request {
            method: "POST",
            target: None,
            headers: &headers,
            body: &body,
        };
        match pool.fetch(&req).await {
            Ok(a) if a.status.is_success() => Ok(()),
            Ok(a) => Err(format!("the collector answered {}", a.status)),
            Err(crate::outbound::Error::TimedOut { .. }) => {
                Err(format!("no answer within {} s", EXPORT_TIMEOUT.as_secs()))
            }
            Err(e) => Err(e.to_string()),
        }
    }
}

/// The exporter's loop, until the tracer is gone: each round, whatever it found, is counted
/// for [`Tracer::flush`].
pub(super) async fn run(tracer: Weak<Tracer>, wake: Arc<tokio::sync::Notify>) {
    let mut exporter = Exporter {
        target: None,
        logged: None,
        exported: metrics::counter!(SPANS_EXPORTED),
        failures: metrics::counter!(EXPORT_FAILURES),
    };
    loop {
        let Some(interval) = tracer
            .upgrade()
            .map(|t| Duration::from_millis(t.settings.load().export_interval_ms.max(10)))
        else {
            return;
        };
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            () = wake.notified() => {}
        }
        let Some(t) = tracer.upgrade() else {
            return;
        };
        let settings = t.settings.load_full();
        let pending = t.take();
        let rounds = t.rounds.clone();
        let service = Service {
            name: settings.service_name.clone(),
            instance: t.instance.clone(),
        };
        drop(t);
        exporter.round(settings, &service, pending).await;
        rounds.send_modify(|r| *r += 1);
    }
}

/// What the loop keeps between rounds: the collector's client, when the last error was
/// logged, the counters.
struct Exporter {
    target: Option<Target>,
    logged: Option<Instant>,
    exported: metrics::Counter,
    failures: metrics::Counter,
}

impl Exporter {
    /// Sends the spans `pending` to the collector of `settings`, a batch at a time.
    async fn round(&mut self, settings: Arc<Tracing>, service: &Service, pending: Pending) {
        if pending.spans == 0 || !settings.enabled() {
            return;
        }
        if self.target.as_ref().is_none_or(|t| t.settings != settings) {
            self.target = match Target::new(settings.clone()) {
                Ok(t) => t,
                Err(e) => {
                    let n = pending.spans as u64;
                    Self::failed(&self.failures, &mut self.logged, &settings, &e, n);
                    None
                }
            };
        }
        let Some(target) = &self.target else {
            return;
        };
        for batch in pending.batches {
            let n = batch.spans as u64;
            match target.send(batch.bytes, service).await {
                Ok(()) => self.exported.increment(n),
                Err(e) => Self::failed(&self.failures, &mut self.logged, &settings, &e, n),
            }
        }
    }

    /// Counts a failed export of `n` spans, and logs it (at most once a minute): the endpoint
    /// without its credentials ([`redact::url`](crate::util::redact::url)), never a header.
    fn failed(
        failures: &metrics::Counter,
        logged: &mut Option<Instant>,
        settings: &Tracing,
        error: &str,
        n: u64,
    ) {
        failures.increment(1);
        if logged.is_none_or(|at| at.elapsed() >= LOG_EVERY) {
            *logged = Some(Instant::now());
            tracing::warn!(
                endpoint = %crate::util::redact::url(&settings.otlp_endpoint),
                error = %error,
                spans = n,
                "span export failed; the spans are dropped (logged at most once a minute)"
            );
        }
    }
}
