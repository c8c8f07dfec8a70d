//! A legacy event feed the cluster tests write to as they go.

use serde_json::json;

use crate::support;

/// A legacy event feed the test writes to as it goes: `GET /events?after=N` answers every
/// record after N, then each new one as it is added.
pub(crate) struct LiveFeed {
    addr: std::net::SocketAddr,
    records: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    added: std::sync::Arc<tokio::sync::Notify>,
    /// Each request's query string.
    requests: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl LiveFeed {
    pub(crate) async fn start() -> Self {
        use std::sync::{Arc, Mutex};
        let records: Arc<Mutex<Vec<String>>> = Arc::default();
        let added = Arc::new(tokio::sync::Notify::new());
        let requests: Arc<Mutex<Vec<String>>> = Arc::default();
        let state = (records.clone(), added.clone(), requests.clone());
        let app = axum::Router::new().route(
            "/events",
            axum::routing::get(move |uri: axum::http::Uri| {
                let (records, added, requests) = state.clone();
                async move {
                    let query = uri.query().unwrap_or("").to_owned();
                    requests.lock().unwrap().push(query.clone());
                    let mut next: usize = query
                        .split('&')
                        .find_map(|kv| kv.strip_prefix("after="))
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0);
                    let body = async_stream::stream! {
                        loop {
                            let notified = added.notified();
                            let more: Vec<String> =
                                records.lock().unwrap().iter().skip(next).cloned().collect();
                            next += more.len();
                            for r in more {
                                yield Ok::<_, std::convert::Infallible>(format!("{r}\n"));
                            }
                            notified.await;
                        }
                    };
                    (
                        [("content-type", "application/x-ndjson")],
                        axum::body::Body::from_stream(body),
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        LiveFeed {
            addr,
            records,
            added,
            requests,
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/events", self.addr)
    }

    /// Adds records up to event id `to` (ids are 1, 2, 3, …).
    pub(crate) fn add_up_to(&self, to: u64) {
        let mut records = self.records.lock().unwrap();
        while (records.len() as u64) < to {
            let i = records.len() as u64 + 1;
            records.push(support::domain_record(
                i,
                "plan.created",
                &format!("plan-{i}"),
                json!({"n": i}),
            ));
        }
        drop(records);
        self.added.notify_waiters();
    }

    pub(crate) fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}
