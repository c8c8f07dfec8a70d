//! Server-sent events from the gateway: a reader over a real SSE parser (eventsource-stream),
//! and the calls that open a stream.

use std::time::Duration;

use serde_json::Value;

use super::gateway::TestGateway;

/// One parsed SSE event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    /// `event:`.
    pub event: String,
    /// `id:`.
    pub id: String,
    /// `data:` as JSON.
    pub data: Value,
}

/// Reads an SSE response with a real SSE parser (eventsource-stream).
pub struct SseReader {
    inner: std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<eventsource_stream::Event, String>> + Send>,
    >,
    /// The response's headers.
    pub headers: reqwest::header::HeaderMap,
}

impl std::fmt::Debug for SseReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SseReader")
    }
}

impl SseReader {
    /// Wraps a streaming response.
    pub fn new(resp: reqwest::Response) -> Self {
        use eventsource_stream::Eventsource;
        use futures::StreamExt;
        let headers = resp.headers().clone();
        let inner = resp
            .bytes_stream()
            .eventsource()
            .map(|r| r.map_err(|e| e.to_string()));
        SseReader {
            inner: Box::pin(inner),
            headers,
        }
    }

    /// The next event, `None` when the stream ended; panics after `timeout` of silence.
    pub async fn next(&mut self, timeout: Duration) -> Option<SseEvent> {
        use futures::StreamExt;
        let ev = tokio::time::timeout(timeout, self.inner.next())
            .await
            .expect("an SSE event or the end of the stream in time")?
            .expect("a well-formed SSE stream");
        Some(SseEvent {
            event: ev.event,
            id: ev.id,
            data: serde_json::from_str(&ev.data).unwrap_or(Value::String(ev.data)),
        })
    }

    /// Events up to and including the next one with `params.final == true`.
    pub async fn until_final(&mut self, timeout: Duration) -> Vec<SseEvent> {
        let mut out = Vec::new();
        while let Some(e) = self.next(timeout).await {
            let last = e.data["params"]["final"] == true;
            out.push(e);
            if last {
                break;
            }
        }
        out
    }

    /// Every event until the stream ends.
    pub async fn collect(&mut self, timeout: Duration) -> Vec<SseEvent> {
        let mut out = Vec::new();
        while let Some(e) = self.next(timeout).await {
            out.push(e);
        }
        out
    }

    /// The next `n` events.
    pub async fn take(&mut self, n: usize, timeout: Duration) -> Vec<SseEvent> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            out.push(self.next(timeout).await.expect("the stream stays open"));
        }
        out
    }
}

impl TestGateway {
    /// Opens an SSE stream with a GET.
    pub async fn sse_get(&self, path: &str, last_event_id: Option<&str>) -> SseReader {
        let mut req = self.http.get(format!("{}{path}", self.base()));
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        SseReader::new(resp)
    }

    /// Opens an SSE stream with a JSON-RPC POST (message/stream, tasks/resubscribe).
    pub async fn sse_post(&self, body: &Value, last_event_id: Option<&str>) -> SseReader {
        let mut req = self
            .http
            .post(format!("{}/rpc", self.base()))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        SseReader::new(resp)
    }

    /// Starts a turn with `message/stream` and returns its SSE stream.
    pub async fn stream_message(&self, params: Value) -> SseReader {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": params});
        self.sse_post(&body, None).await
    }

    /// Opens a spec A2A stream: a JSON-RPC POST with `A2A-Version` when given.
    pub async fn a2a_stream(&self, body: &Value, version: Option<&str>) -> SseReader {
        let mut req = self
            .http
            .post(format!("{}/rpc", self.base()))
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .body(body.to_string());
        if let Some(v) = version {
            req = req.header("a2a-version", v);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        SseReader::new(resp)
    }
}
