//! The legacy agent server's envelope.
//!
//! Request: `{a2a_version, request_id, operation, params, auth}`; response: `{a2a_version,
//! request_id, status, data | error, timing_ms}`. The `auth` object carries credentials, so its
//! `Debug` is redacted: a request can be logged whole without leaking a token.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The only envelope version the legacy server speaks.
pub const VERSION: &str = "1.0";

/// Error codes from the legacy server's documentation.
pub mod code {
    /// The addressed object does not exist.
    pub const NOT_FOUND: &str = "NOT_FOUND";
    /// Credentials missing or wrong.
    pub const AUTH_ERROR: &str = "AUTH_ERROR";
    /// Credentials valid but not allowed.
    pub const FORBIDDEN: &str = "FORBIDDEN";
    /// Too many calls: a rate limit is spent (the gateway's `[[rate_limits]]`).
    pub const RATE_LIMITED: &str = "RATE_LIMITED";
    /// The object is in the wrong state for the operation.
    pub const INVALID_STATE: &str = "INVALID_STATE";
    /// The object exists already.
    pub const DUPLICATE: &str = "DUPLICATE";
    /// A spend limit was hit.
    pub const BUDGET_EXCEEDED: &str = "BUDGET_EXCEEDED";
    /// The envelope version is not `"1.0"`.
    pub const VERSION_MISMATCH: &str = "VERSION_MISMATCH";
    /// A plan could not be made.
    pub const PLAN_ERROR: &str = "PLAN_ERROR";
    /// The server is misconfigured.
    pub const CONFIGURATION_ERROR: &str = "CONFIGURATION_ERROR";
    /// The params are malformed.
    pub const VALIDATION_ERROR: &str = "VALIDATION_ERROR";
    /// No such operation.
    pub const OPERATION_NOT_FOUND: &str = "OPERATION_NOT_FOUND";
    /// Anything else.
    pub const INTERNAL_ERROR: &str = "INTERNAL_ERROR";
    /// Gateway: the upstream could not be reached.
    pub const UPSTREAM_UNAVAILABLE: &str = "UPSTREAM_UNAVAILABLE";
    /// Gateway: the upstream did not answer in time.
    pub const UPSTREAM_TIMEOUT: &str = "UPSTREAM_TIMEOUT";
    /// Gateway: the upstream answered something unreadable.
    pub const UPSTREAM_BAD_RESPONSE: &str = "UPSTREAM_BAD_RESPONSE";
}

/// Credentials carried in the envelope; never printed.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Auth(pub Map<String, Value>);

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Auth(<redacted>)")
    }
}

impl Auth {
    /// `{"scheme": "bearer", "token": T}`.
    pub fn bearer(token: &str) -> Self {
        let mut m = Map::new();
        m.insert("scheme".into(), Value::from("bearer"));
        m.insert("token".into(), Value::from(token));
        Auth(m)
    }

    /// From an `Authorization` header value: `Scheme credentials` becomes
    /// `{"scheme": "scheme", "token": "credentials"}`.
    pub fn from_header(value: &str) -> Option<Self> {
        let c = super::authorization::parse(value.as_bytes())?;
        // Both parts are slices of `value`'s text at ASCII spaces: still UTF-8.
        let scheme = std::str::from_utf8(c.scheme).ok()?;
        let token = std::str::from_utf8(c.token).ok()?;
        let mut m = Map::new();
        m.insert("scheme".into(), Value::from(scheme.to_ascii_lowercase()));
        m.insert("token".into(), Value::from(token));
        Some(Auth(m))
    }

    /// The `Authorization` header value this auth object stands for, when it has a scheme and a
    /// token (`bearer` is written `Bearer`, as RFC 6750 spells it).
    pub fn to_header(&self) -> Option<String> {
        let scheme = self.0.get("scheme")?.as_str()?;
        let token = self.0.get("token")?.as_str()?;
        let scheme = if scheme.eq_ignore_ascii_case("bearer") {
            "Bearer"
        } else {
            scheme
        };
        Some(format!("{scheme} {token}"))
    }
}

/// A legacy request envelope.
#[derive(Clone, Serialize, Deserialize)]
pub struct LegacyRequest {
    /// Always `"1.0"` on the wire.
    pub a2a_version: Cow<'static, str>,
    /// Caller-chosen id; may be empty, in which case the gateway generates one.
    pub request_id: String,
    /// The operation (JSON-RPC's method).
    pub operation: String,
    /// Parameters object, `{}` when absent.
    pub params: Box<RawValue>,
    /// Credentials, or null.
    #[serde(default)]
    pub auth: Option<Auth>,
}

impl LegacyRequest {
    /// The envelope as JSON (the same bytes as its `Serialize`), written by hand into a buffer
    /// sized for it up front: the member names are constants, `params` is copied raw, and only
    /// the strings are escaped (this is the request path's hot loop).
    pub fn to_vec(&self) -> Vec<u8> {
        request_bytes(
            &self.a2a_version,
            &self.request_id,
            &self.operation,
            &self.params,
            self.auth.as_ref(),
        )
    }
}

/// [`LegacyRequest::to_vec`] from the envelope's parts, borrowed: for a caller that holds them
/// without a `LegacyRequest` (the proxied call, whose method outlives the exchange in its
/// figures: moving it into a request would mean a copy kept back: docs/performance.md).
pub(crate) fn request_bytes(
    a2a_version: &str,
    request_id: &str,
    operation: &str,
    params: &RawValue,
    auth: Option<&Auth>,
) -> Vec<u8> {
    let hint = params.get().len() + operation.len() + request_id.len() + 96;
    let mut out = Vec::with_capacity(hint);
    out.extend_from_slice(b"{\"a2a_version\":");
    super::write_json_str(&mut out, a2a_version);
    out.extend_from_slice(b",\"request_id\":");
    super::write_json_str(&mut out, request_id);
    out.extend_from_slice(b",\"operation\":");
    super::write_json_str(&mut out, operation);
    out.extend_from_slice(b",\"params\":");
    out.extend_from_slice(params.get().as_bytes());
    out.extend_from_slice(b",\"auth\":");
    match auth {
        None => out.extend_from_slice(b"null"),
        Some(a) => serde_json::to_writer(&mut out, a).expect("a JSON map always serialises"),
    }
    out.push(b'}');
    out
}

impl fmt::Debug for LegacyRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LegacyRequest")
            .field("request_id", &self.request_id)
            .field("operation", &self.operation)
            .field("auth", &self.auth.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

/// `status` of a legacy response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// `data` holds the answer.
    Success,
    /// `error` says what went wrong.
    Error,
}

/// The error member of a legacy response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LegacyError {
    /// A code from [`code`], or the server's own.
    pub code: String,
    /// Human-readable text.
    pub message: String,
    /// Anything else the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl LegacyError {
    /// An error without details.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        LegacyError {
            code: code.into(),
            message: message.into(),
            details: None,
        }
    }
}

/// A legacy response envelope; `data` xor `error` according to `status`.
#[derive(Clone, Debug, Deserialize)]
#[serde(try_from = "LegacyResponseWire")]
pub struct LegacyResponse {
    /// The request id this answers.
    pub request_id: String,
    /// The answer.
    pub body: LegacyBody,
    /// Server time spent, in milliseconds.
    pub timing_ms: Option<f64>,
}

/// Success data or an error.
#[derive(Clone, Debug)]
pub enum LegacyBody {
    /// `status: "success"`; `data` raw (absent → `None`).
    Success(Option<Box<RawValue>>),
    /// `status: "error"`.
    Error(LegacyError),
}

impl LegacyResponse {
    /// A success answer.
    pub fn success(request_id: String, data: Option<Box<RawValue>>) -> Self {
        LegacyResponse {
            request_id,
            body: LegacyBody::Success(data),
            timing_ms: None,
        }
    }

    /// An error answer.
    pub fn error(request_id: String, error: LegacyError) -> Self {
        LegacyResponse {
            request_id,
            body: LegacyBody::Error(error),
            timing_ms: None,
        }
    }

    /// Reads an upstream's answer body: by the strict scanner ([`super::scan`]) when it can
    /// vouch for the envelope (what nearly every answer is), else by serde_json, which accepts
    /// or refuses it with its own error, so an answer reads the same with the scanner as without.
    pub fn from_json(bytes: &[u8]) -> serde_json::Result<Self> {
        super::from_json_scanned(bytes, Self::scanned)
    }

    /// The envelope `text` is, read by the scanner: `None` when it cannot vouch for it, when a
    /// member comes twice, or when one is not of its type (serde's errors to give). `error`,
    /// `data` and `timing_ms` are read by serde_json on their own text, as the whole would.
    fn scanned(text: &str) -> Option<Self> {
        let (mut id, mut status, mut data, mut error, mut timing) = (None, None, None, None, None);
        super::scan::members_deferring(
            text,
            |name| matches!(name, "data" | "error"),
            |name, raw, escaped| match name {
                "request_id" => super::scan::once(
                    &mut id,
                    super::scan::string(raw, escaped).map(Cow::into_owned),
                ),
                "status" => super::scan::once(
                    &mut status,
                    match raw {
                        "\"success\"" => Some(Status::Success),
                        "\"error\"" => Some(Status::Error),
                        _ => None,
                    },
                ),
                "data" => super::scan::once(&mut data, serde_json::from_str(raw).ok()),
                "error" => super::scan::once(&mut error, serde_json::from_str(raw).ok()),
                "timing_ms" => super::scan::once(&mut timing, serde_json::from_str(raw).ok()),
                _ => Some(()),
            },
        )?;
        LegacyResponse::try_from(LegacyResponseWire {
            request_id: id.unwrap_or_default(),
            status: status?,
            data: data.flatten(),
            error: error.flatten(),
            timing_ms: timing.flatten(),
        })
        .ok()
    }
}

impl Serialize for LegacyResponse {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("a2a_version", VERSION)?;
        map.serialize_entry("request_id", &self.request_id)?;
        match &self.body {
            LegacyBody::Success(data) => {
                map.serialize_entry("status", &Status::Success)?;
                if let Some(data) = data {
                    map.serialize_entry("data", data)?;
                }
            }
            LegacyBody::Error(e) => {
                map.serialize_entry("status", &Status::Error)?;
                map.serialize_entry("error", e)?;
            }
        }
        if let Some(t) = self.timing_ms {
            map.serialize_entry("timing_ms", &t)?;
        }
        map.end()
    }
}

#[derive(Deserialize)]
struct LegacyResponseWire {
    #[serde(default)]
    request_id: String,
    status: Status,
    #[serde(default)]
    data: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<LegacyError>,
    #[serde(default)]
    timing_ms: Option<f64>,
}

/// Why an upstream's legacy answer was not a valid envelope.
#[derive(Debug, thiserror::Error)]
#[error("status \"error\" without an error object")]
pub struct MissingError;

impl TryFrom<LegacyResponseWire> for LegacyResponse {
    type Error = MissingError;

    fn try_from(w: LegacyResponseWire) -> Result<Self, MissingError> {
        let body = match w.status {
            Status::Success => LegacyBody::Success(w.data),
            Status::Error => LegacyBody::Error(w.error.ok_or(MissingError)?),
        };
        Ok(LegacyResponse {
            request_id: w.request_id,
            body,
            timing_ms: w.timing_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    proptest! {
        /// The hand-written envelope is byte for byte what `Serialize` writes, whatever the
        /// strings hold (quotes, backslashes, control characters, non-ASCII).
        #[test]
        fn to_vec_is_serialize(id in "\\PC*|[\"\\\\\u{0}-\u{1f}a]*", op in ".*", token in proptest::option::of(".*")) {
            let r = LegacyRequest {
                a2a_version: VERSION.into(),
                request_id: id,
                operation: op,
                params: RawValue::from_string(r#"{"a": [1, "x\"y"]}"#.to_owned()).unwrap(),
                auth: token.as_deref().map(Auth::bearer),
            };
            prop_assert_eq!(r.to_vec(), serde_json::to_vec(&r).unwrap());
        }
    }

    #[test]
    fn auth_debug_is_redacted() {
        let a = Auth::bearer("s3cret");
        assert!(!format!("{a:?}").contains("s3cret"));
        let req = LegacyRequest {
            a2a_version: VERSION.into(),
            request_id: "r".into(),
            operation: "op".into(),
            params: RawValue::from_string("{}".into()).unwrap(),
            auth: Some(a),
        };
        assert!(!format!("{req:?}").contains("s3cret"));
    }

    #[test]
    fn auth_header_round_trip() {
        let a = Auth::from_header("Bearer abc").unwrap();
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            json!({"scheme": "bearer", "token": "abc"})
        );
        assert_eq!(a.to_header().unwrap(), "Bearer abc");
    }

    /// An answer as an upstream might write it: the envelope's members (some twice, some of
    /// the wrong type) spaced at random, sometimes with text after it.
    fn answer() -> impl Strategy<Value = String> {
        crate::wire::scan::envelopes::object(prop_oneof![
            6 => Just(r#""status":"success""#.to_owned()),
            1 => Just(r#""a2a_version":"1.0""#.to_owned()),
            1 => any::<String>().prop_map(|s| format!(r#""request_id":{}"#, json!(s))),
            1 => Just(r#""request_id":null"#.to_owned()),
            1 => Just(r#""status":"success""#.to_owned()),
            1 => Just(r#""status":"error""#.to_owned()),
            1 => Just(r#""status":"maybe""#.to_owned()),
            1 => Just(r#""status":"succ\u0065ss""#.to_owned()),
            1 => Just(r#""data":{"plan_id":"P1","n":[1,2.5,null]}"#.to_owned()),
            1 => Just(r#""data":null"#.to_owned()),
            1 => Just(r#""data":"text""#.to_owned()),
            1 => Just(r#""error":{"code":"NOT_FOUND","message":"no","details":{"a":1}}"#.to_owned()),
            1 => Just(r#""error":{"code":"X"}"#.to_owned()),
            1 => Just(r#""error":null"#.to_owned()),
            1 => prop_oneof![Just("0.01"), Just("12"), Just("1e400"), Just("null"), Just("\"1\"")]
                .prop_map(|t| format!(r#""timing_ms":{t}"#)),
            1 => Just(r#""other":[{}]"#.to_owned()),
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// The scanner's reading of an answer is serde_json's: the same envelope when both take
        /// it, and serde_json's own answer (its error included) for one the scanner leaves.
        #[test]
        fn an_answer_is_read_as_serde_reads_it(text in answer()) {
            crate::wire::scan::envelopes::read_alike(
                &text,
                LegacyResponse::scanned(&text),
                LegacyResponse::from_json(text.as_bytes()),
                crate::wire::from_json::<LegacyResponse>(text.as_bytes()),
            )?;
        }
    }

    #[test]
    fn the_usual_answers_are_scanned() {
        for text in [
            r#"{"a2a_version":"1.0","request_id":"r-1","status":"success","data":{"plan_id":"P1","n":1},"timing_ms":0.01}"#,
            r#"{"request_id":"r","status":"error","error":{"code":"NOT_FOUND","message":"m"}}"#,
        ] {
            assert!(LegacyResponse::scanned(text).is_some(), "{text}");
        }
    }

    #[test]
    fn error_status_requires_error_object() {
        let bad = br#"{"request_id":"r","status":"error"}"#;
        assert!(serde_json::from_slice::<LegacyResponse>(bad).is_err());
        let odd = br#"{"request_id":"r","status":"maybe"}"#;
        assert!(serde_json::from_slice::<LegacyResponse>(odd).is_err());
    }

    #[test]
    fn response_serialises_like_the_server() {
        let mut r = LegacyResponse::success(
            "r1".into(),
            Some(RawValue::from_string(r#"{"x":1}"#.into()).unwrap()),
        );
        r.timing_ms = Some(12.0);
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"a2a_version": "1.0", "request_id": "r1", "status": "success",
                   "data": {"x": 1}, "timing_ms": 12.0})
        );
    }
}
