//! An OTLP collector that accepts everything, for the benches: `POST /v1/traces` (OTLP/HTTP,
//! protobuf) is decoded with the official definitions and answered 200; `GET /spans` says how
//! many spans it has taken.
//!
//! ```sh
//! cargo run --release --example otlp_sink -- 127.0.0.1:4318
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:4318".into());
    let spans = Arc::new(AtomicU64::new(0));
    let app =
        axum::Router::new()
            .route("/v1/traces", post(take))
            .route(
                "/spans",
                get(|State(n): State<Arc<AtomicU64>>| async move {
                    n.load(Ordering::Relaxed).to_string()
                }),
            )
            .with_state(spans);
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    axum::serve(listener, app).await
}

async fn take(State(n): State<Arc<AtomicU64>>, body: Bytes) -> StatusCode {
    match ExportTraceServiceRequest::decode(body) {
        Ok(req) => {
            let count: usize = req
                .resource_spans
                .iter()
                .flat_map(|r| &r.scope_spans)
                .map(|s| s.spans.len())
                .sum();
            n.fetch_add(count as u64, Ordering::Relaxed);
            StatusCode::OK
        }
        Err(_) => StatusCode::BAD_REQUEST,
    }
}
