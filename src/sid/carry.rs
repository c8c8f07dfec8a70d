//! Calls carried whole to the replica that runs their context (`[cluster]`): a streaming call
//! (`message/stream`, A2A's `SendStreamingMessage`) or an A2A call that must run where sid runs
//! (`SendMessage`, `CancelTask`) goes, as the client sent it, to the owner's `advertise` URL, and
//! the owner's answer comes back unchanged: its SSE bytes as they arrive, or its JSON document.
//!
//! Over HTTP rather than through Redis: the owner already answers exactly this request, with
//! its own stream writer, keep-alives and errors; relaying its bytes keeps one implementation of
//! each call, adds no Redis round trip per event, and a replica that cannot reach the owner
//! says so at once (the client can resume on any replica with `Last-Event-ID`).
//!
//! The exchange is the pass-through's ([`crate::passthrough::exchange`]) on the owner's pool of
//! the outbound client ([`crate::outbound`]), the one [`Bridge::forward`] uses.

use std::convert::Infallible;

use axum::body::Body;
use axum::http::{StatusCode, Uri};

use crate::http::headers::Headers;
use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::BodyExt;

use super::shared::{Place, FORWARD_TIMEOUT_MS, MAX_ANSWER};
use super::Bridge;
use crate::http::reply::{Reply, ReplyBody};
use crate::http::span::Kind;
use crate::model::error::GatewayError;
use crate::outbound::h1;
use crate::passthrough::exchange::{self, Delivered, Sending};

/// Marks a request already carried once: the replica receiving it runs it or refuses it, and
/// never carries it on (two replicas that disagree on a lease cannot bounce a call).
pub(super) const CARRIED: &str = "x-wiregate-carried";

/// The request headers a carried call keeps (the owner checks the same token and dialect).
const KEPT: [&str; 6] = [
    "authorization",
    "a2a-version",
    "last-event-id",
    "accept",
    "traceparent",
    "x-request-id",
];

impl Bridge {
    /// The context and task a seed call must run beside, for
    /// [`carry_if_elsewhere`](Self::carry_if_elsewhere): `message/stream`'s. (`message/send`,
    /// `tasks/cancel` and `_sid/` ops are carried by [`call`](Self::call), in batches too.)
    pub fn runs_beside(
        &self,
        method: &str,
        p: Option<&serde_json::value::RawValue>,
    ) -> Option<(Option<String>, Option<String>)> {
        (method == super::STREAM)
            .then(|| super::params::<super::SendParams>(p).ok()?.into_turn().ok())
            .flatten()
            .map(|t| (t.context_id, t.task_id))
    }

    /// When the call naming `context_id` or `task_id` runs on another replica, carries the
    /// request (`body` as sent to `path`) there and returns its answer unchanged; `None` when
    /// it runs here (this replica runs the context, took a lost one over, or nobody runs it).
    pub async fn carry_if_elsewhere(
        &self,
        context_id: Option<&str>,
        task_id: Option<&str>,
        path: &str,
        body: &[u8],
        headers: Option<Headers<'_>>,
    ) -> Result<Option<Reply>, GatewayError> {
        if self.cluster.is_none() || (context_id.is_none() && task_id.is_none()) {
            return Ok(None);
        }
        if headers.is_some_and(|h| h.contains(CARRIED)) {
            return Ok(None);
        }
        match self.place(context_id, task_id).await? {
            Place::Here => Ok(None),
            there => self.carry(there, path, body, headers).await.map(Some),
        }
    }

    /// Sends the request to the owner and relays its answer.
    async fn carry(
        &self,
        to: Place,
        path: &str,
        body: &[u8],
        headers: Option<Headers<'_>>,
    ) -> Result<Reply, GatewayError> {
        let Place::There { node, advertise } = to else {
            return Err(GatewayError::SidUnavailable(
                "no replica to carry to".into(),
            ));
        };
        let client = self.owner_client(&node, &advertise)?;
        let me = self
            .cluster
            .as_ref()
            .map_or("", |sh| sh.link.node_id.as_str());
        // The carry is a CLIENT span of the call's, when the call records spans: the owner's
        // `traceparent` then names it.
        let mut traced = crate::http::scope::parent().map(|p| {
            let mut span = p.child(Kind::Client, "POST");
            span.set("http.request.method", "POST");
            span.set("url.path", path);
            span.set("wiregate.cluster.owner", &*node);
            span.set(
                "wiregate.endpoint",
                &*crate::util::redact::url(&advertise).to_string(),
            );
            (p, span)
        });
        let traceparent = match (&traced, crate::http::scope::trace()) {
            (Some((_, span)), Some(t)) => Some(t.with_span(span.span_id).traceparent_bytes()),
            _ => None,
        };
        let head = request_head(&advertise, path, body.len(), headers, me, traceparent)?;
        let lost = |e: &dyn std::fmt::Display| {
            GatewayError::SidUnavailable(format!(
                "this context runs on replica {node}, which did not answer: {e}"
            ))
        };
        metrics::counter!("wiregate_cluster_forwarded_total").increment(1);
        // The body is in hand, so the whole exchange is timed at once (the steps too).
        let forward = std::time::Duration::from_millis(FORWARD_TIMEOUT_MS);
        let timeouts = exchange::Timeouts {
            upstream: forward,
            client_body: forward,
        };
        let answer = tokio::time::timeout(
            forward,
            exchange::exchange(
                &client,
                head,
                Body::from(Bytes::copy_from_slice(body)),
                Sending::Length,
                false,
                false,
                timeouts,
            ),
        )
        .await
        .map_err(|_| "no answer in time".to_owned())
        .and_then(|r| r.map_err(|e| e.to_string()));
        // The span ends with the owner's answer head: a stream's events are the owner's spans.
        if let Some((parent, mut span)) = traced.take() {
            match &answer {
                Ok(a) => span.set_status(a.status.as_u16()),
                Err(_) => span.fail("owner_unreachable"),
            }
            parent.submit(span);
        }
        let answer = answer.map_err(|e| lost(&e))?;
        let Delivered::Body(answer_body) = answer.body else {
            return Err(lost(&"it switched protocols"));
        };
        let is_sse = answer
            .headers
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        let body = match is_sse {
            // Relayed as it arrives; a break on the owner's side ends the client's stream,
            // which resumes anywhere with Last-Event-ID.
            true => ReplyBody::Stream(Box::pin(
                answer_body
                    .into_data_stream()
                    .take_while(|r| std::future::ready(r.is_ok()))
                    .filter_map(|r| std::future::ready(r.ok().map(Ok::<_, Infallible>))),
            )),
            false => {
                let limited = http_body_util::Limited::new(answer_body, MAX_ANSWER);
                let bytes = limited.collect().await.map_err(|e| lost(&e))?.to_bytes();
                ReplyBody::Json(bytes)
            }
        };
        Ok(Reply {
            status: match is_sse {
                true => StatusCode::OK,
                false => answer.status,
            },
            headers: None,
            timing_ms: None,
            body,
        })
    }
}

/// The request line and headers of a carried call (pure): the client's headers that matter to
/// the owner, the owner's `Host`, and the [`CARRIED`] mark naming this replica.
fn request_head(
    advertise: &str,
    path: &str,
    len: usize,
    headers: Option<Headers<'_>>,
    me: &str,
    traceparent: Option<[u8; 55]>,
) -> Result<Vec<u8>, GatewayError> {
    let uri: Uri = advertise.parse().map_err(|e| {
        GatewayError::SidUnavailable(format!(
            "cluster.advertise \"{}\": {e}",
            crate::util::redact::url(advertise)
        ))
    })?;
    let host = uri.authority().map_or("", |a| a.as_str());
    let base = uri.path().trim_end_matches('/');
    let mut head = format!(
        "POST {base}{path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n\
         content-length: {len}\r\n"
    );
    for name in KEPT {
        if name == "traceparent" && traceparent.is_some() {
            continue;
        }
        for v in headers.into_iter().flat_map(|h| h.get_all(name)) {
            if let Some(v) = crate::http::headers::visible(v).filter(|v| h1::is_header_value(v)) {
                head.push_str(&format!("{name}: {v}\r\n"));
            }
        }
    }
    if let Some(t) = traceparent {
        head.push_str("traceparent: ");
        head.push_str(std::str::from_utf8(&t).expect("hex digits"));
        head.push_str("\r\n");
    }
    if h1::is_header_value(me) {
        head.push_str(&format!("{CARRIED}: {me}\r\n"));
    }
    head.push_str("\r\n");
    Ok(head.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_carried_head_keeps_the_client_s_token_and_dialect_and_marks_the_hop() {
        let mut h = axum::http::HeaderMap::new();
        h.insert("authorization", "Bearer t".parse().unwrap());
        h.insert("a2a-version", "1.0".parse().unwrap());
        h.insert("cookie", "secret=1".parse().unwrap());
        let head = request_head(
            "http://10.0.0.2:8080/",
            "/rpc",
            12,
            Some(Headers::Map(&h)),
            "b",
            None,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "POST /rpc HTTP/1.1\r\nhost: 10.0.0.2:8080\r\ncontent-type: application/json\r\n\
             content-length: 12\r\nauthorization: Bearer t\r\na2a-version: 1.0\r\n\
             x-wiregate-carried: b\r\n\r\n"
        );
    }

    #[test]
    fn a_traced_carry_names_its_own_span_instead_of_the_client_s() {
        let mut h = axum::http::HeaderMap::new();
        h.insert(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                .parse()
                .unwrap(),
        );
        let ours = *b"00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01";
        let head = request_head(
            "http://b:1",
            "/rpc",
            2,
            Some(Headers::Map(&h)),
            "a",
            Some(ours),
        )
        .unwrap();
        let text = String::from_utf8(head).unwrap();
        assert!(text
            .contains("traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01\r\n"));
        assert_eq!(text.matches("traceparent").count(), 1, "{text}");
    }
}
