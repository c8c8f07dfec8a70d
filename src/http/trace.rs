//! W3C Trace Context (`traceparent`, `tracestate`): a call keeps its trace id across the
//! gateway, and each hop gets a span id of its own. A client that sent none starts a trace here.

use axum::http::{HeaderMap, HeaderName, HeaderValue};

use crate::util::hex;

/// `traceparent`.
pub(crate) const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
/// `tracestate`, passed on unchanged with a valid `traceparent`.
pub(crate) const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// One hop's trace context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TraceContext {
    /// The trace, kept from the client's `traceparent` or new.
    pub trace_id: [u8; 16],
    /// This hop's span, new for every call.
    pub span_id: [u8; 8],
    /// The client's flags (sampled), or sampled when the trace starts here (with tracing on,
    /// by `tracing.sample_ratio`).
    pub flags: u8,
    /// The client's span, this hop's parent; all zeros when the trace starts here.
    pub parent_id: [u8; 8],
}

/// A new span id: random, never all zeros.
pub(crate) fn new_span_id() -> [u8; 8] {
    let mut span_id = crate::util::ids::random_u64().to_le_bytes();
    if span_id == [0; 8] {
        span_id[7] = 1;
    }
    span_id
}

impl TraceContext {
    /// The context for a call that arrived with `headers` (a map, or a head the HTTP/1 loop
    /// read): the client's trace continued with a new span, or a new trace.
    pub(crate) fn for_call<'a>(headers: impl Into<crate::http::headers::Headers<'a>>) -> Self {
        Self::for_parent(headers.into().get(&TRACEPARENT)).0
    }

    /// The same, and the client's `tracestate` to pass upstream with it: only with a valid
    /// `traceparent` (the rule of [`copied`]), and only when it came as one line. Several lines
    /// would have to be joined into one (W3C), a buffer per call; they are dropped instead, as
    /// a `tracestate` may be. No length cap: W3C asks for at least 512 bytes to be passed and
    /// allows more, the pass-through passes any, and the client's head limit bounds it.
    /// `headers` are read in one scan for both names.
    pub(crate) fn for_call_with_state<'a>(
        headers: impl Into<crate::http::headers::Headers<'a>>,
    ) -> (Self, Option<HeaderValue>) {
        let (parent, state) = headers.into().get_and_sole(&TRACEPARENT, &TRACESTATE);
        let (ctx, valid) = Self::for_parent(parent);
        (ctx, state.filter(|_| valid))
    }

    /// The same from the client's `traceparent` value, if it sent one; also whether it was a
    /// valid one (its `tracestate` goes on only then).
    pub(crate) fn for_parent(traceparent: Option<&[u8]>) -> (Self, bool) {
        let span_id = new_span_id();
        let parent = traceparent
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(parse);
        let valid = parent.is_some();
        let ctx = match parent {
            Some((trace_id, parent_id, flags)) => TraceContext {
                trace_id,
                span_id,
                flags,
                parent_id,
            },
            None => {
                let mut trace_id = crate::util::ids::random_bytes();
                trace_id[0] |= 1; // never all zeros
                TraceContext {
                    trace_id,
                    span_id,
                    flags: 1,
                    parent_id: [0; 8],
                }
            }
        };
        (ctx, valid)
    }

    /// Whether the trace is sampled (flag `01`): its spans are recorded.
    pub(crate) fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// The same context with `span_id` for the hop: what an upstream try's `traceparent`
    /// carries when the try is a span of its own.
    pub(crate) fn with_span(self, span_id: [u8; 8]) -> Self {
        TraceContext { span_id, ..self }
    }

    /// The trace id as 32 lowercase hex digits (what logs show).
    pub(crate) fn trace_id_hex(&self) -> String {
        hex::encode(&self.trace_id)
    }

    /// The `traceparent` value sent upstream: this trace, this hop's span (as a header value,
    /// for the tests; the RPC path writes [`Self::traceparent_bytes`]).
    #[cfg(test)]
    fn traceparent(&self) -> HeaderValue {
        HeaderValue::from_bytes(&self.traceparent_bytes()).expect("hex is a valid header value")
    }

    /// The same, laid out on the stack: what the RPC path writes into its request, allocating
    /// nothing. The ids' digits eight bytes at a time ([`crate::util::hex`]; a byte at a time, by
    /// unrolled loops, measured dearer: docs/performance.md).
    pub(crate) fn traceparent_bytes(&self) -> [u8; 55] {
        let mut out = *b"00-00000000000000000000000000000000-0000000000000000-00";
        out[3..35].copy_from_slice(&hex::hex16(self.trace_id));
        out[36..52].copy_from_slice(&hex::hex8(self.span_id));
        out[53..].copy_from_slice(&hex::byte(self.flags));
        out
    }
}

/// `version-traceid-parentid-flags`, version `00` (or a later one, read the same way as the
/// spec asks); all-zero ids are invalid.
fn parse(v: &str) -> Option<([u8; 16], [u8; 8], u8)> {
    let v = v.trim();
    let mut parts = v.split('-');
    let (version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version.len() != 2 || version == "ff" || (version == "00" && parts.next().is_some()) {
        return None;
    }
    let trace = hex::decode::<16>(trace, false)?;
    let parent = hex::decode::<8>(parent, false)?;
    let flags = hex::decode::<1>(flags, false)?[0];
    if trace == [0; 16] || parent == [0; 8] {
        return None;
    }
    Some((trace, parent, flags))
}

/// Whether a request's trace header goes upstream as the client sent it: `traceparent` never
/// (each hop writes its own, see [`TraceContext::traceparent_bytes`]), `tracestate` only with a
/// valid `traceparent` (`client_valid`).
pub(crate) fn copied(name: &HeaderName, client_valid: bool) -> bool {
    *name != TRACEPARENT && (client_valid || *name != TRACESTATE)
}

/// Whether `headers` carry a valid `traceparent`.
pub(crate) fn has_valid_parent(headers: &HeaderMap) -> bool {
    headers
        .get(&TRACEPARENT)
        .and_then(|v| v.to_str().ok())
        .and_then(parse)
        .is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn continues_a_valid_trace_with_a_new_span() {
        let mut h = HeaderMap::new();
        h.insert(TRACEPARENT, SAMPLE.parse().unwrap());
        let ctx = TraceContext::for_call(&h);
        assert_eq!(ctx.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        let out = ctx.traceparent();
        let out = out.to_str().unwrap();
        assert_eq!(out.as_bytes(), &ctx.traceparent_bytes()[..]);
        assert!(out.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
        assert!(out.ends_with("-01"));
        assert_ne!(&out[36..52], "00f067aa0ba902b7");
    }

    #[test]
    fn starts_a_trace_for_missing_or_invalid_parents() {
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            let mut h = HeaderMap::new();
            if !bad.is_empty() {
                h.insert(TRACEPARENT, bad.parse().unwrap());
            }
            assert!(!has_valid_parent(&h), "{bad}");
            let ctx = TraceContext::for_call(&h);
            assert_ne!(ctx.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
            assert_eq!(ctx.traceparent().len(), 55);
        }
    }

    #[test]
    fn tracestate_goes_on_with_a_valid_parent_sent_once() {
        let with = |lines: &[(&str, &str)]| {
            let mut h = HeaderMap::new();
            for (n, v) in lines {
                h.append(
                    HeaderName::from_bytes(n.as_bytes()).unwrap(),
                    v.parse().unwrap(),
                );
            }
            TraceContext::for_call_with_state(&h)
        };
        let (ctx, state) = with(&[("traceparent", SAMPLE), ("tracestate", "a=1,b=2")]);
        assert_eq!(ctx.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(state.unwrap(), "a=1,b=2");
        let long = format!("a={}", "x".repeat(600));
        let (_, state) = with(&[("traceparent", SAMPLE), ("tracestate", &long)]);
        assert_eq!(state.unwrap(), long.as_str(), "no length cap");
        for lines in [
            &[("tracestate", "a=1")][..],
            &[("traceparent", "00-bad"), ("tracestate", "a=1")],
            &[
                ("traceparent", SAMPLE),
                ("tracestate", "a=1"),
                ("tracestate", "b=2"),
            ],
        ] {
            assert_eq!(with(lines).1, None, "{lines:?}");
        }
    }

    #[test]
    fn traceparent_lays_out_every_digit() {
        let ctx = TraceContext {
            trace_id: [
                0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e,
                0x47, 0x36,
            ],
            span_id: [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7],
            flags: 0x1f,
            parent_id: [0; 8],
        };
        assert_eq!(
            &ctx.traceparent_bytes()[..],
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1f"
        );
    }

    #[test]
    fn every_call_gets_its_own_span_and_every_new_trace_its_own_id() {
        let mut h = HeaderMap::new();
        let fresh: Vec<TraceContext> = (0..1000).map(|_| TraceContext::for_call(&h)).collect();
        h.insert(TRACEPARENT, SAMPLE.parse().unwrap());
        let continued: Vec<TraceContext> = (0..1000).map(|_| TraceContext::for_call(&h)).collect();
        let traces: std::collections::HashSet<_> = fresh.iter().map(|c| c.trace_id).collect();
        assert_eq!(traces.len(), 1000);
        let spans: std::collections::HashSet<_> =
            fresh.iter().chain(&continued).map(|c| c.span_id).collect();
        assert_eq!(spans.len(), 2000);
        assert!(fresh.iter().chain(&continued).all(|c| c.span_id != [0; 8]));
    }

    #[test]
    fn later_versions_are_read_by_their_known_fields() {
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-follows";
        assert!(parse(later).is_some());
    }
}
