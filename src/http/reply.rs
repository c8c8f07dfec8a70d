//! What `POST /rpc` answers: status, extra headers and body, and the functions that shape them.
//!
//! [`crate::gateway`] decides what to answer; this module only says how an answer is laid out, so
//! the status rules (spec calls, parse errors) and the `Server-Timing` header live in one place.

use std::convert::Infallible;
use std::pin::Pin;

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use bytes::Bytes;
use futures_util::Stream;

use crate::model::error::GatewayError;
use crate::wire::jsonrpc::Response;

/// The HTTP answer to one body.
#[derive(Debug)]
pub struct Reply {
    /// Status.
    pub status: StatusCode,
    /// Extra headers (`Deprecation`, `Sunset`), `None` for the calls that have none (nearly
    /// all). Boxed: a reply is moved through the call's futures several times over, and an
    /// empty map inline (96 bytes) made each move a `memcpy` call and each reply a map to drop.
    pub headers: Option<Box<HeaderMap>>,
    /// What the upstream reported of its own time, in milliseconds: sent as `Server-Timing`
    /// (see [`write_server_timing`]). A field rather than a header: the HTTP/1 loop writes it
    /// straight into the answer's head, and most calls carry one.
    pub timing_ms: Option<f64>,
    /// What to send.
    pub body: ReplyBody,
}

/// The body of a [`Reply`].
pub enum ReplyBody {
    /// Nothing (204).
    Empty,
    /// A JSON document.
    Json(Bytes),
    /// A server-sent event stream.
    Stream(Pin<Box<dyn Stream<Item = Result<Bytes, Infallible>> + Send>>),
}

impl std::fmt::Debug for ReplyBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplyBody::Empty => f.write_str("Empty"),
            ReplyBody::Json(b) => f.debug_tuple("Json").field(b).finish(),
            ReplyBody::Stream(_) => f.write_str("Stream"),
        }
    }
}

/// The answer to a body of one JSON-RPC entry, with `Server-Timing`.
pub(crate) fn single_reply(answer: Option<(StatusCode, Response, Option<f64>)>) -> Reply {
    match answer {
        None => empty_reply(),
        Some((status, resp, timing)) => Reply {
            status,
            headers: None,
            timing_ms: timing,
            body: ReplyBody::Json(Bytes::from(resp.to_vec())),
        },
    }
}

/// The status of a call's error. A spec (A2A) call's is 200, as A2A's JSON-RPC binding (and its
/// clients, which read the error code only from a successful HTTP answer) expect; 401, 403 and
/// 429 stay transport answers. Other calls keep the status the error maps to.
pub(crate) fn error_status(e: &GatewayError, spec: bool) -> StatusCode {
    match (spec, e) {
        (false, _) => e.status(),
        (
            true,
            GatewayError::Unauthorized
            | GatewayError::Unauthenticated { .. }
            | GatewayError::Forbidden(_)
            | GatewayError::RateLimited { .. },
        ) => e.status(),
        (true, _) => StatusCode::OK,
    }
}

/// The status a single JSON-RPC error response is sent with.
pub(crate) fn status_of(resp: &Response) -> StatusCode {
    match resp.error_object().map(|e| e.code) {
        Some(
            crate::wire::jsonrpc::code::PARSE_ERROR | crate::wire::jsonrpc::code::INVALID_REQUEST,
        ) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// `Server-Timing: upstream;dur=<timing_ms>` in a header map (what a response object carries).
pub(crate) fn add_server_timing(headers: &mut HeaderMap, timing_ms: Option<f64>) {
    let mut v = Vec::with_capacity(32);
    if !write_server_timing(&mut v, timing_ms) {
        return;
    }
    if let Ok(v) = HeaderValue::from_maybe_shared(Bytes::from(v)) {
        headers.insert(HeaderName::from_static("server-timing"), v);
    }
}

/// Appends the `Server-Timing` value `upstream;dur=<timing_ms>` to `out`, written with
/// `itoa`/`ryu` (`core::fmt`'s float formatting cost more than everything else the header
/// takes); `false`, nothing written, when there is no finite, non-negative time.
pub(crate) fn write_server_timing(out: &mut Vec<u8>, timing_ms: Option<f64>) -> bool {
    let Some(t) = timing_ms.filter(|t| t.is_finite() && *t >= 0.0) else {
        return false;
    };
    out.extend_from_slice(b"upstream;dur=");
    if t.fract() == 0.0 && t < 1e15 {
        out.extend_from_slice(itoa::Buffer::new().format(t as u64).as_bytes());
    } else if !write_millis(out, t) {
        out.extend_from_slice(ryu::Buffer::new().format_finite(t).as_bytes());
    }
    true
}

/// Writes `t` (not whole) as `ryu` would when it is a whole number of thousandths from 0.001
/// to 10^12 (what upstreams report, `0.01` say: `ryu`'s general algorithm was a tenth of a
/// proxied call's cost of writing its answer); `false`, nothing written, otherwise.
///
/// Why the output is `ryu`'s: `t` is the double nearest the decimal `k / 1000` (checked: the
/// division of two exact doubles rounds correctly), a decimal of at most 15 significant
/// digits, and no other decimal of at most 15 digits has the same nearest double, so `k / 1000`
/// without its trailing zeros is the shortest decimal that reads back as `t`, which is what
/// `ryu` writes, in plain notation for values from 10^-5 to 10^16 (tested against it).
fn write_millis(out: &mut Vec<u8>, t: f64) -> bool {
    if !(0.001..1e12).contains(&t) {
        return false;
    }
    let k = (t * 1000.0).round();
    if k / 1000.0 != t {
        return false;
    }
    let k = k as u64;
    let (whole, mut frac) = (k / 1000, k % 1000);
    out.extend_from_slice(itoa::Buffer::new().format(whole).as_bytes());
    out.push(b'.');
    let mut digits = 3;
    while frac % 10 == 0 {
        frac /= 10;
        digits -= 1;
    }
    let text = itoa::Buffer::new().format(frac).len();
    out.extend(std::iter::repeat_n(b'0', digits - text));
    out.extend_from_slice(itoa::Buffer::new().format(frac).as_bytes());
    true
}

pub(crate) fn json_reply<T: serde::Serialize>(status: StatusCode, body: &T) -> Reply {
    Reply {
        status,
        headers: None,
        timing_ms: None,
        body: ReplyBody::Json(Bytes::from(
            serde_json::to_vec(body).expect("wire types always serialise"),
        )),
    }
}

pub(crate) fn empty_reply() -> Reply {
    Reply {
        status: StatusCode::NO_CONTENT,
        headers: None,
        timing_ms: None,
        body: ReplyBody::Empty,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_timing_whole_and_fractional_milliseconds() {
        let timing = |t| {
            let mut h = HeaderMap::new();
            add_server_timing(&mut h, t);
            h.get("server-timing")
                .map(|v| v.to_str().unwrap().to_owned())
        };
        assert_eq!(timing(Some(7.0)).as_deref(), Some("upstream;dur=7"));
        assert_eq!(timing(Some(2.5)).as_deref(), Some("upstream;dur=2.5"));
        assert_eq!(timing(Some(0.0)).as_deref(), Some("upstream;dur=0"));
        assert_eq!(timing(Some(-1.0)), None);
        assert_eq!(timing(Some(f64::NAN)), None);
        assert_eq!(timing(None), None);
        assert_eq!(timing(Some(0.01)).as_deref(), Some("upstream;dur=0.01"));
        assert_eq!(timing(Some(0.001)).as_deref(), Some("upstream;dur=0.001"));
        assert_eq!(timing(Some(12.34)).as_deref(), Some("upstream;dur=12.34"));
        assert_eq!(timing(Some(1e-4)).as_deref(), Some("upstream;dur=0.0001"));
    }

    fn written(t: f64) -> String {
        let mut v = Vec::new();
        write_server_timing(&mut v, Some(t));
        String::from_utf8(v).unwrap()
    }

    fn by_ryu(t: f64) -> String {
        match t.fract() == 0.0 && t < 1e15 {
            true => format!("upstream;dur={}", t as u64),
            false => format!("upstream;dur={}", ryu::Buffer::new().format_finite(t)),
        }
    }

    proptest::proptest! {
        /// Thousandths (what upstreams report) are written as `ryu` writes them.
        #[test]
        fn thousandths_are_written_as_ryu_writes_them(k in 0u64..2_000_000_000_000_000) {
            let t = k as f64 / 1000.0;
            proptest::prop_assert_eq!(written(t), by_ryu(t));
        }

        /// So is any other time (the shortcut declines what it cannot vouch for).
        #[test]
        fn any_time_is_written_as_ryu_writes_it(t in 0.0f64..1e13, scale in 0i32..12) {
            let t = t / 10f64.powi(scale);
            proptest::prop_assert_eq!(written(t), by_ryu(t));
        }
    }
}
