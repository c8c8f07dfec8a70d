//! The access log: one line per request (`[log] access = true`), written when its answer's
//! body has been sent or dropped, so a stream's line tells its whole length. Credentials never
//! appear: the line names the method, path (no query), the client's address, status, bytes,
//! duration, the client's dialect, the upstreams and the trace id.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use bytes::Bytes;
use hyper::body::{Frame, SizeHint};

use crate::http::scope::Note;
use crate::http::trace::TraceContext;

/// What the access line takes from a request as it arrives: its method, its path (no query),
/// when, and from which client.
#[derive(Debug)]
pub(crate) struct Arrival {
    pub method: Method,
    pub path: String,
    pub started: Instant,
    pub client: Option<std::net::IpAddr>,
}

impl Arrival {
    /// The line of this request, answered with `status`, in the trace `trace`, its calls
    /// having noted `note`.
    pub(crate) fn answered(self, status: StatusCode, trace: &TraceContext, note: Note) -> Line {
        Line {
            method: self.method,
            path: self.path,
            client: self.client,
            status,
            started: self.started,
            trace_id: trace.trace_id_hex(),
            note,
        }
    }
}

/// What is known of a request when its answer starts.
#[derive(Debug)]
pub(crate) struct Line {
    /// Request method.
    pub method: Method,
    /// Request path, without the query (which may carry a token).
    pub path: String,
    /// The client's address: the peer, or what a trusted proxy says of it.
    pub client: Option<std::net::IpAddr>,
    /// Answer status.
    pub status: StatusCode,
    /// When the request arrived.
    pub started: Instant,
    /// The trace id (32 hex digits).
    pub trace_id: String,
    /// What the request's calls noted (dialect, upstreams).
    pub note: Note,
}

impl Line {
    /// Writes the line, with the body's byte count.
    pub(crate) fn emit(&self, bytes: u64) {
        tracing::info!(
            target: "wiregate::server::access",
            method = %self.method,
            path = %self.path,
            client = self.client.map(tracing::field::display),
            status = self.status.as_u16(),
            bytes,
            duration_ms = self.started.elapsed().as_secs_f64() * 1e3,
            dialect = self.note.dialect,
            upstream = %self.note.upstreams,
            endpoints = %self.note.endpoints,
            trace_id = %self.trace_id,
            "access"
        );
    }
}

/// An answer body that counts what it sends and writes its access line at the end.
pub(crate) struct Counted {
    inner: Body,
    bytes: u64,
    line: Option<Line>,
}

impl Counted {
    /// Wraps `inner`; `line` is written once, when the body ends or is dropped.
    pub(crate) fn new(inner: Body, line: Line) -> Self {
        Counted {
            inner,
            bytes: 0,
            line: Some(line),
        }
    }

    fn finish(&mut self) {
        if let Some(line) = self.line.take() {
            line.emit(self.bytes);
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.finish();
    }
}

impl hyper::body::Body for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    self.bytes += d.len() as u64;
                }
            }
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => self.finish(),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
