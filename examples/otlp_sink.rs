//! An OTLP collector that accepts everything, for the benches: `POST /v1/traces` (OTLP/HTTP,
//! protobuf) is checked and answered 200 (400 when it is not a well-formed request); `GET
//! /spans` says how many spans it has taken.
//!
//! ```sh
//! cargo run --release --example otlp_sink -- 127.0.0.1:4318            # walks the request
//! cargo run --release --example otlp_sink -- 127.0.0.1:4318 --decode   # decodes it whole
//! ```
//!
//! By default a request is walked field by field down to each span's fields (every tag and
//! length checked, the spans counted) without building its messages: on the benches' 2-core
//! machine the sink shares the cores with the load and the gateway, and decoding every span's
//! attributes into the official structs costs it more than the gateway spends exporting them.
//! `--decode` decodes each request with the official definitions (`opentelemetry-proto`), as a
//! collector would; the tests' receiver always does.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::encoding::decode_varint;
use prost::Message;

/// What the sink has taken, and how it reads requests.
struct Sink {
    spans: AtomicU64,
    /// Decoded whole (`--decode`), else walked.
    decode: bool,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let mut addr = "127.0.0.1:4318".to_owned();
    let mut decode = false;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--decode" => decode = true,
            _ => addr = a,
        }
    }
    let sink = Arc::new(Sink {
        spans: AtomicU64::new(0),
        decode,
    });
    let app = axum::Router::new()
        .route("/v1/traces", post(take))
        .route(
            "/spans",
            get(|State(sink): State<Arc<Sink>>| async move {
                sink.spans.load(Ordering::Relaxed).to_string()
            }),
        )
        .with_state(sink);
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    axum::serve(listener, app).await
}

async fn take(State(sink): State<Arc<Sink>>, body: Bytes) -> StatusCode {
    let count = match sink.decode {
        true => decoded(body),
        false => walked(&body),
    };
    match count {
        Some(count) => {
            sink.spans.fetch_add(count as u64, Ordering::Relaxed);
            StatusCode::OK
        }
        None => StatusCode::BAD_REQUEST,
    }
}

/// The spans of a request decoded with the official definitions.
fn decoded(body: Bytes) -> Option<usize> {
    let req = ExportTraceServiceRequest::decode(body).ok()?;
    Some(
        req.resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum(),
    )
}

/// The spans of a request walked: `resource_spans` (1) → `scope_spans` (2) → `spans` (2),
/// each span's own fields walked too.
fn walked(body: &[u8]) -> Option<usize> {
    let mut n = 0;
    each(body, 1, &mut |resource| {
        each(resource, 2, &mut |scope| {
            each(scope, 2, &mut |span| {
                n += 1;
                each(span, 0, &mut |_| Some(()))
            })
        })
    })?;
    Some(n)
}

/// Walks the fields of the message `b`, calling `f` with the bytes of each length-delimited
/// field numbered `want`; `None` when a tag, a varint or a length is not well formed.
fn each(mut b: &[u8], want: u64, f: &mut dyn FnMut(&[u8]) -> Option<()>) -> Option<()> {
    while !b.is_empty() {
        let key = decode_varint(&mut b).ok()?;
        match key & 7 {
            0 => {
                decode_varint(&mut b).ok()?;
            }
            1 => b = b.get(8..)?,
            5 => b = b.get(4..)?,
            2 => {
                let len = usize::try_from(decode_varint(&mut b).ok()?).ok()?;
                let value = b.get(..len)?;
                if key >> 3 == want {
                    f(value)?;
                }
                b = &b[len..];
            }
            _ => return None,
        }
    }
    Some(())
}
