//! Requests other than the `POST` of JSON the call path sends: a key set's `GET`, the event
//! feed's long `GET`, a span batch's `POST`, the command line's admin requests, an active
//! health check. Their heads are laid out here; they go over the destination's pooled
//! connections, and their answers are read by [`h1`]'s reader, bounded by the pool's
//! [`Options`](super::Options).

use std::pin::Pin;
use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use bytes::Bytes;
use futures_util::Stream;

use super::h1::{self, Conn};
use super::{answer, Error, Pool};

/// One request: its method, target, headers and body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request<'a> {
    /// `GET`, `POST`, ….
    pub(crate) method: &'a str,
    /// The request target (origin form); `None`: the path of the pool's URL.
    pub(crate) target: Option<&'a str>,
    /// Headers besides `Host` and `Content-Length`; one whose value is no valid header value is
    /// left out.
    pub(crate) headers: &'a [(&'a str, &'a str)],
    /// The body (none for an empty `GET`).
    pub(crate) body: &'a [u8],
}

impl<'a> Request<'a> {
    /// A `GET` of the pool's URL with `headers`.
    pub(crate) fn get(headers: &'a [(&'a str, &'a str)]) -> Self {
        Request {
            method: "GET",
            target: None,
            headers,
            body: &[],
        }
    }
}

/// An answer read whole.
#[derive(Debug)]
pub(crate) struct Response {
    /// Its status.
    pub(crate) status: StatusCode,
    /// Its body, at most the pool's `max_answer` bytes.
    pub(crate) body: Bytes,
}

/// An answer whose body is read as it arrives (the event feed's).
pub(crate) struct Opened {
    /// Its status.
    pub(crate) status: StatusCode,
    /// Its headers.
    pub(crate) headers: HeaderMap,
    /// Its body, unbounded: its reader bounds what it holds.
    pub(crate) body: Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send>>,
}

impl Pool {
    /// Sends `req` and reads the whole answer: connecting within the connect timeout, the
    /// answer within the read timeout once the request is written, all of it within the total,
    /// its body at most `max_answer` bytes.
    pub(crate) async fn fetch(&self, req: &Request<'_>) -> Result<Response, Error> {
        let exchange = async {
            let mut conn = self.send(req).await?;
            let read = conn.read_answer(self.max_body, None);
            let answer = match tokio::time::timeout(self.read_timeout, read).await {
                Ok(answer) => answer?,
                Err(_) => return Err(Error::TimedOut { sent: true }),
            };
            if answer.reusable {
                self.checkin(conn);
            }
            Ok(Response {
                status: answer.status,
                body: answer.body,
            })
        };
        match tokio::time::timeout(self.total, exchange).await {
            Ok(done) => done,
            Err(_) => Err(Error::TimedOut { sent: true }),
        }
    }

    /// Sends `req` and reads the answer's head (connecting within the connect timeout, the head
    /// within the read timeout); its body is passed on as it arrives, for as long as it lasts.
    pub(crate) async fn open(self: &Arc<Self>, req: &Request<'_>) -> Result<Opened, Error> {
        let mut conn = self.send(req).await?;
        let mut headers = HeaderMap::new();
        let head = conn.read_head(false, Some(&mut headers));
        let parsed = match tokio::time::timeout(self.read_timeout, head).await {
            Ok(parsed) => parsed?,
            Err(_) => return Err(Error::TimedOut { sent: true }),
        };
        let body = answer::stream_answer(self.clone(), conn, parsed.framing, parsed.keep_alive);
        Ok(Opened {
            status: parsed.status,
            headers,
            body: Box::pin(body),
        })
    }

    /// Writes `req` on an idle connection, or on a fresh one (opened within the connect
    /// timeout) when there is none or the idle one turns out dead.
    async fn send(&self, req: &Request<'_>) -> Result<Conn, Error> {
        let head = self.lay_out(req);
        if let Some(mut conn) = self.checkout() {
            match conn.send(&head).await {
                Ok(()) => return Ok(conn),
                Err(h1::Error::NotSent(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let mut conn = self.connect_timed().await?;
        conn.send(&head).await?;
        Ok(conn)
    }

    /// The request's bytes: its line, `Host`, its headers, `Content-Length` when it has a body
    /// or is no `GET`, and the body.
    fn lay_out(&self, req: &Request<'_>) -> Vec<u8> {
        let mut w = Vec::with_capacity(256 + req.body.len());
        let target = req.target.unwrap_or(self.path());
        for part in [
            req.method,
            " ",
            target,
            " HTTP/1.1\r\nhost: ",
            self.label(),
            "\r\n",
        ] {
            w.extend_from_slice(part.as_bytes());
        }
        for (name, value) in req.headers {
            if h1::is_header_value(value) {
                for part in [*name, ": ", *value, "\r\n"] {
                    w.extend_from_slice(part.as_bytes());
                }
            }
        }
        if !req.body.is_empty() || req.method != "GET" {
            w.extend_from_slice(b"content-length: ");
            w.extend_from_slice(itoa::Buffer::new().format(req.body.len()).as_bytes());
            w.extend_from_slice(b"\r\n");
        }
        w.extend_from_slice(b"\r\n");
        w.extend_from_slice(req.body);
        w
    }
}

impl Pool {
    /// POSTs a JSON body (with `authorization` when it is a valid header value) within the
    /// total timeout, off the call path: a webhook's notification, a call carried to another
    /// replica. When the running request records spans, the `POST` is a CLIENT span of it,
    /// which the `traceparent` sent names.
    pub(crate) async fn post_json(
        &self,
        body: &[u8],
        authorization: Option<&str>,
    ) -> Result<h1::Answer, Error> {
        use crate::http::span::Kind;
        let parent = crate::http::scope::parent();
        let mut span = parent.as_ref().map(|p| p.child(Kind::Client, "POST"));
        let (traceparent, tracestate) = match crate::http::scope::upstream_trace() {
            Some((t, state)) => {
                let t = span.as_ref().map_or(t, |s| t.with_span(s.span_id));
                (Some(t.traceparent_bytes()), state)
            }
            None => (None, None),
        };
        let head = h1::Head {
            path: self.path(),
            host: self.label(),
            authorization: authorization.filter(|a| h1::is_header_value(a)),
            traceparent: traceparent.as_ref(),
            tracestate: tracestate.as_ref().map(|v| v.as_bytes()),
            identity: None,
        };
        let answer = self.post(&head, body, self.total).await;
        if let (Some(p), Some(mut s)) = (&parent, span.take()) {
            s.set("http.request.method", "POST");
            s.set_server(self.peer(), self.label());
            // The path alone: a query may carry a token (a webhook's often does).
            s.set(
                "url.path",
                self.path().split(['?', '#']).next().unwrap_or("/"),
            );
            match &answer {
                Ok(a) => s.set_status(a.status.as_u16()),
                Err(Error::TimedOut { .. }) => s.fail("upstream_timeout"),
                Err(_) => s.fail("upstream_unreachable"),
            }
            p.submit(s);
        }
        answer
    }
}
