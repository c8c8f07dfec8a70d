//! A programmable legacy event feed (NDJSON or SSE, over TLS too) and the records it serves.

use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use serde_json::Value;

use super::pki;

/// How a test event feed speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedMode {
    /// `application/x-ndjson`, one record a line.
    Ndjson,
    /// `text/event-stream`, `id:` and `data:` per record.
    Sse,
}

/// Each feed request's query string and `Last-Event-ID`.
pub type FeedRequests = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A programmable legacy event feed.
#[derive(Clone, Debug)]
pub struct FeedServer {
    /// Bound address.
    pub addr: SocketAddr,
    /// Each request's query string and `Last-Event-ID`.
    pub requests: FeedRequests,
    /// Connections accepted (counted for TLS feeds only).
    pub accepted: Arc<AtomicUsize>,
    /// The SNI name of each TLS handshake (TLS feeds only).
    pub sni: pki::Sni,
    /// Served over TLS (reached as `https://localhost`).
    tls: bool,
}

impl FeedServer {
    /// The source URL.
    pub fn url(&self) -> String {
        match self.tls {
            true => format!("https://localhost:{}/events", self.addr.port()),
            false => format!("http://{}/events", self.addr),
        }
    }
}

#[derive(Clone)]
struct FeedState {
    records: Arc<Vec<String>>,
    mode: FeedMode,
    drop_after: Option<usize>,
    honour_resume: bool,
    requests: FeedRequests,
}

/// Serves `records` (raw lines). The first connection ends after `drop_after` records when set;
/// later ones resume after the requested id (unless `honour_resume` is false) and stay open.
pub async fn feed_server(
    records: Vec<String>,
    mode: FeedMode,
    drop_after: Option<usize>,
    honour_resume: bool,
) -> FeedServer {
    serve_feed_records(records, mode, drop_after, honour_resume, None).await
}

/// Serves `records` as [`feed_server`] does, over TLS with `config`, the connection kept open.
pub async fn feed_server_tls(
    records: Vec<String>,
    mode: FeedMode,
    config: Arc<rustls::ServerConfig>,
) -> FeedServer {
    serve_feed_records(records, mode, None, true, Some(config)).await
}

async fn serve_feed_records(
    records: Vec<String>,
    mode: FeedMode,
    drop_after: Option<usize>,
    honour_resume: bool,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> FeedServer {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let state = FeedState {
        records: Arc::new(records),
        mode,
        drop_after,
        honour_resume,
        requests: requests.clone(),
    };
    let app = axum::Router::new()
        .route("/events", axum::routing::get(serve_feed))
        .with_state(state);
    let (addr, accepted, sni, tls) = match tls {
        Some(cfg) => {
            let s = pki::serve_tls(app, cfg).await;
            (s.addr, s.accepted, s.sni, true)
        }
        None => {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
            (addr, Arc::default(), Arc::default(), false)
        }
    };
    FeedServer {
        addr,
        requests,
        accepted,
        sni,
        tls,
    }
}

async fn serve_feed(
    State(s): State<FeedState>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> axum::response::Response {
    let query = uri.query().unwrap_or("").to_owned();
    let last = headers
        .get("last-event-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let first = {
        let mut r = s.requests.lock().unwrap();
        r.push((query.clone(), last.clone()));
        r.len() == 1
    };
    let after = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("after="))
        .map(str::to_owned)
        .or(last);
    let start = match (&after, s.honour_resume) {
        (Some(id), true) => s
            .records
            .iter()
            .position(|r| {
                serde_json::from_str::<Value>(r)
                    .ok()
                    .is_some_and(|v| v["event_id"].to_string().trim_matches('"') == id)
            })
            .map_or(0, |i| i + 1),
        _ => 0,
    };
    let end = match (first, s.drop_after) {
        (true, Some(k)) => k.min(s.records.len()),
        _ => s.records.len(),
    };
    let lines: Vec<String> = s.records[start.min(end)..end]
        .iter()
        .map(|r| match s.mode {
            FeedMode::Ndjson => format!("{r}\n"),
            FeedMode::Sse => {
                let id = serde_json::from_str::<Value>(r)
                    .ok()
                    .map(|v| v["event_id"].to_string().trim_matches('"').to_owned())
                    .unwrap_or_default();
                format!("id: {id}\ndata: {r}\n\n")
            }
        })
        .collect();
    let stay_open = !(first && s.drop_after.is_some());
    let body = async_stream::stream! {
        for l in lines {
            yield Ok::<_, std::convert::Infallible>(l);
        }
        if stay_open {
            std::future::pending::<()>().await;
        }
    };
    let ct = match s.mode {
        FeedMode::Ndjson => "application/x-ndjson",
        FeedMode::Sse => "text/event-stream",
    };
    ([("content-type", ct)], axum::body::Body::from_stream(body)).into_response()
}

/// One domain-event record as the legacy server writes it.
pub fn domain_record(id: u64, event_type: &str, plan: &str, data: Value) -> String {
    serde_json::json!({"event_id": id, "event_type": event_type, "plan_id": plan, "data": data,
                       "timestamp": "2026-11-29T20:00:00Z"})
    .to_string()
}
