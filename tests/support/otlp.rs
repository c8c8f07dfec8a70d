//! An OTLP collector on loopback: it decodes what the gateway exports with the official
//! protobuf definitions (`opentelemetry-proto`), over OTLP/HTTP (`POST /v1/traces`) and OTLP/gRPC
//! (the `TraceService/Export` call, HTTP/2), in clear or over TLS, and keeps every span for the
//! test to read. It can be told to refuse (503) or to be slow.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

/// One exported span with its resource's attributes.
#[derive(Clone, Debug)]
pub struct Exported {
    /// The span as decoded.
    pub span: Span,
    /// The resource's attributes (`service.name`, …).
    pub resource: Vec<KeyValue>,
    /// The export request's headers.
    pub headers: HeaderMap,
}

impl Exported {
    /// Attribute `key` as text (strings as they are, numbers and flags written out).
    pub fn attr(&self, key: &str) -> Option<String> {
        attr(&self.span.attributes, key)
    }

    /// The resource's attribute `key`.
    pub fn resource_attr(&self, key: &str) -> Option<String> {
        attr(&self.resource, key)
    }

    /// The span id as 16 hex digits.
    pub fn id(&self) -> String {
        hex(&self.span.span_id)
    }

    /// The parent's span id as 16 hex digits ("" for a root).
    pub fn parent(&self) -> String {
        hex(&self.span.parent_span_id)
    }

    /// The trace id as 32 hex digits.
    pub fn trace(&self) -> String {
        hex(&self.span.trace_id)
    }

    /// SpanKind: 1 internal, 2 server, 3 client.
    pub fn kind(&self) -> i32 {
        self.span.kind
    }

    /// Whether its status is ERROR.
    pub fn failed(&self) -> bool {
        self.span.status.as_ref().is_some_and(|s| s.code == 2)
    }
}

fn attr(attrs: &[KeyValue], key: &str) -> Option<String> {
    let v = attrs
        .iter()
        .find(|a| a.key == key)?
        .value
        .as_ref()?
        .value
        .as_ref()?;
    Some(match v {
        any_value::Value::StringValue(s) => s.clone(),
        any_value::Value::IntValue(i) => i.to_string(),
        any_value::Value::BoolValue(b) => b.to_string(),
        any_value::Value::DoubleValue(d) => d.to_string(),
        other => format!("{other:?}"),
    })
}

/// `host:port` of a URL, as `wiregate.endpoint` names an endpoint.
pub fn authority(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split('/').next().unwrap_or_default().to_owned()
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// How the collector answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// 200, every span kept.
    Accept,
    /// 503, nothing kept.
    Refuse,
}

#[derive(Clone)]
struct Shared {
    spans: Arc<Mutex<Vec<Exported>>>,
    requests: Arc<AtomicUsize>,
    refuse: Arc<std::sync::atomic::AtomicBool>,
    delay_ms: Arc<AtomicU64>,
    /// Over TLS: the ALPN protocol each handshake settled on (`None`: none).
    alpn: Arc<Mutex<Vec<Option<Vec<u8>>>>>,
}

/// A running collector.
#[derive(Clone)]
pub struct Collector {
    /// Where it listens.
    pub addr: SocketAddr,
    shared: Shared,
}

impl Collector {
    fn app(mode: Mode) -> (axum::Router, Shared) {
        let shared = Shared {
            spans: Arc::default(),
            requests: Arc::default(),
            refuse: Arc::new((mode == Mode::Refuse).into()),
            delay_ms: Arc::default(),
            alpn: Arc::default(),
        };
        let app = axum::Router::new()
            .route("/v1/traces", post(http_export))
            .route(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                post(grpc_export),
            )
            .with_state(shared.clone());
        (app, shared)
    }

    /// Starts one on 127.0.0.1:0.
    pub async fn start(mode: Mode) -> Collector {
        let (app, shared) = Self::app(mode);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Collector { addr, shared }
    }

    /// Starts one on 127.0.0.1:0 that speaks only TLS, with the certificate `issued`, ALPN
    /// `h2` and `http/1.1`: OTLP/HTTP and OTLP/gRPC over TLS.
    pub async fn start_tls(mode: Mode, issued: &super::pki::Issued) -> Collector {
        let (app, shared) = Self::app(mode);
        let mut config = (*super::pki::server_config(issued, None)).clone();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let alpn = shared.alpn.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, app, alpn) = (acceptor.clone(), app.clone(), alpn.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let protocol = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
                    alpn.lock().unwrap().push(protocol);
                    let svc = hyper_util::service::TowerToHyperService::new(app);
                    let _ = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), svc)
                    .await;
                });
            }
        });
        Collector { addr, shared }
    }

    /// The ALPN protocol of each TLS handshake finished so far.
    pub fn alpn(&self) -> Vec<Option<Vec<u8>>> {
        self.shared.alpn.lock().unwrap().clone()
    }

    /// `http://127.0.0.1:port`, its OTLP/HTTP endpoint.
    pub fn http(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `grpc://127.0.0.1:port`, its OTLP/gRPC endpoint.
    pub fn grpc(&self) -> String {
        format!("grpc://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Exported> {
        self.shared.spans.lock().unwrap().clone()
    }

    /// Export requests received (accepted or refused).
    pub fn requests(&self) -> usize {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// Makes every later export wait `d` before it is answered.
    pub fn slow(&self, d: Duration) {
        self.shared
            .delay_ms
            .store(d.as_millis() as u64, Ordering::SeqCst);
    }

    /// Waits (up to 10 s) until `done` holds of the spans received, and returns them.
    pub async fn until(&self, what: &str, done: impl Fn(&[Exported]) -> bool) -> Vec<Exported> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "the collector never saw {what}; it has: {:#?}",
                    summary(&spans)
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the spans of trace `trace` include `n` spans, and returns them.
    pub async fn trace(&self, trace: &str, n: usize) -> Vec<Exported> {
        let spans = self
            .until(&format!("{n} spans of trace {trace}"), |s| {
                s.iter().filter(|e| e.trace() == trace).count() >= n
            })
            .await;
        spans.into_iter().filter(|e| e.trace() == trace).collect()
    }
}

/// Each span's name, kind, ids and attributes, for a failure's message.
pub fn summary(spans: &[Exported]) -> Vec<String> {
    spans
        .iter()
        .map(|e| {
            let attrs: Vec<String> = e
                .span
                .attributes
                .iter()
                .map(|a| {
                    format!(
                        "{}={}",
                        a.key,
                        attr(&e.span.attributes, &a.key).unwrap_or_default()
                    )
                })
                .collect();
            format!(
                "{} kind={} trace={} id={} parent={} [{}]",
                e.span.name,
                e.kind(),
                e.trace(),
                e.id(),
                e.parent(),
                attrs.join(" ")
            )
        })
        .collect()
}

impl Shared {
    async fn take(&self, headers: &HeaderMap, message: &[u8]) -> bool {
        self.requests.fetch_add(1, Ordering::SeqCst);
        let delay = self.delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        if self.refuse.load(Ordering::SeqCst) {
            return false;
        }
        let req = ExportTraceServiceRequest::decode(message).expect("a valid OTLP request");
        let mut spans = self.spans.lock().unwrap();
        for rs in req.resource_spans {
            let resource = rs.resource.map(|r| r.attributes).unwrap_or_default();
            for ss in rs.scope_spans {
                for span in ss.spans {
                    spans.push(Exported {
                        span,
                        resource: resource.clone(),
                        headers: headers.clone(),
                    });
                }
            }
        }
        true
    }
}

async fn http_export(
    State(s): State<Shared>,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    assert_eq!(headers["content-type"], "application/x-protobuf");
    match s.take(&headers, &body).await {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// One unary gRPC call, answered trailers-only (`grpc-status` in the head).
async fn grpc_export(
    State(s): State<Shared>,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    assert_eq!(headers["content-type"], "application/grpc");
    assert_eq!(body[0], 0, "not compressed");
    let len = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
    assert_eq!(body.len(), 5 + len, "one message");
    let status = match s.take(&headers, &body[5..]).await {
        true => "0",
        false => "14",
    };
    (
        StatusCode::OK,
        [
            ("content-type", "application/grpc"),
            ("grpc-status", status),
        ],
    )
}
