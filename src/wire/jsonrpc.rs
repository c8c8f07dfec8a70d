//! JSON-RPC 2.0 message types, kept to the letter of the specification.
//!
//! Ids keep the type the caller gave them (string, number or null). A request with no `id`
//! member is a notification, which is not the same thing as a call with `"id": null`: the first
//! gets no answer, the second does. `params` and `result` stay raw JSON text, so the gateway
//! forwards them without building a tree.

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

use super::{present, ValidationError};

/// The only protocol version spoken.
pub const VERSION: &str = "2.0";

/// Error codes defined by the specification and by this gateway.
pub mod code {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON sent is not a valid Request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist or is not available.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameters.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal JSON-RPC error.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// The upstream refused or reset the connection.
    pub const UPSTREAM_UNREACHABLE: i64 = -32050;
    /// The upstream did not answer in time.
    pub const UPSTREAM_TIMEOUT: i64 = -32051;
    /// The upstream answered something that is not a valid envelope of its dialect.
    pub const UPSTREAM_BAD_ENVELOPE: i64 = -32052;
    /// A2A TaskNotFound.
    pub const TASK_NOT_FOUND: i64 = -32001;
    /// A2A TaskNotCancelable.
    pub const TASK_NOT_CANCELABLE: i64 = -32002;
    /// A2A PushNotificationNotSupported.
    pub const PUSH_NOTIFICATION_NOT_SUPPORTED: i64 = -32003;
    /// A2A UnsupportedOperation.
    pub const UNSUPPORTED_OPERATION: i64 = -32004;
    /// A2A ContentTypeNotSupported.
    pub const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
    /// A2A ExtendedAgentCardNotConfigured.
    pub const EXTENDED_CARD_NOT_CONFIGURED: i64 = -32007;
    /// A2A VersionNotSupported.
    pub const VERSION_NOT_SUPPORTED: i64 = -32009;
    /// sid answered `busy` (waiting for a prompt answer, or streaming another request).
    pub const SID_BUSY: i64 = -32060;
    /// sid answered `stale_prompt`.
    pub const SID_STALE_PROMPT: i64 = -32061;
    /// sid failed without a code the gateway knows.
    pub const SID_FAILED: i64 = -32062;
    /// Every sid context is in use.
    pub const SID_CAPACITY: i64 = -32063;
    /// sid is not running or not reachable.
    pub const SID_UNAVAILABLE: i64 = -32064;
    /// A bearer token is required.
    pub const UNAUTHORIZED: i64 = -32065;
    /// The replicas' shared store (Redis) is unreachable: sid calls and streams cannot be served
    /// without losing events.
    pub const CLUSTER_UNAVAILABLE: i64 = -32066;
    /// No valid credential where `[auth]` requires one, or a bad one sent (HTTP 401).
    pub const UNAUTHENTICATED: i64 = -32070;
    /// The caller is known, and an `allow` rule does not let it call the method (HTTP 403).
    pub const FORBIDDEN: i64 = -32071;
    /// A rate limit is spent; `data.retryAfterMs` says when to try again (HTTP 429).
    pub const RATE_LIMITED: i64 = -32072;
}

/// A request id: string, number or null, kept exactly as the caller wrote it.
///
/// A number keeps its JSON text, not a parsed value: `123456789012345678901234567890`, `1e2`,
/// `1.50` and `-0` go back as written, which no `f64` or `i64` could promise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Id {
    /// `"id": null` — a call, answered with `null`.
    Null,
    /// A number, as its JSON text.
    Number(IdNumber),
    /// A string.
    String(String),
}

/// A numeric id's JSON text. The usual small integer is held as one, without an allocation
/// (its text is exactly what writing it gives back); any other number as its text.
#[derive(Clone, Debug)]
pub struct IdNumber(NumberText);

#[derive(Clone, Debug)]
enum NumberText {
    Int(i64),
    Raw(Box<RawValue>),
}

impl IdNumber {
    /// The number's JSON text, validated by the parser that read it. `None` when `text` is not
    /// a JSON number.
    fn from_text(text: &str) -> Option<Self> {
        let digits = text.strip_prefix('-').unwrap_or(text);
        let canonical_int = !digits.is_empty()
            && digits.len() <= 18
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'))
            && text != "-0";
        if canonical_int {
            return text.parse().ok().map(|n| IdNumber(NumberText::Int(n)));
        }
        serde_json::from_str::<&RawValue>(text)
            .ok()
            .filter(|raw| matches!(raw.get().as_bytes().first(), Some(b'-' | b'0'..=b'9')))
            .map(|raw| IdNumber(NumberText::Raw(raw.to_owned())))
    }

    /// The number's text, an integer written with `itoa` (`core::fmt` measured dearer per
    /// proxied call here: docs/performance.md).
    fn text(&self) -> String {
        match &self.0 {
            NumberText::Int(n) => itoa::Buffer::new().format(*n).to_owned(),
            NumberText::Raw(r) => r.get().to_owned(),
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        match &self.0 {
            NumberText::Int(n) => out.extend_from_slice(itoa::Buffer::new().format(*n).as_bytes()),
            NumberText::Raw(r) => out.extend_from_slice(r.get().as_bytes()),
        }
    }
}

impl std::fmt::Display for IdNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            NumberText::Int(n) => write!(f, "{n}"),
            NumberText::Raw(r) => f.write_str(r.get()),
        }
    }
}

impl PartialEq for IdNumber {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (NumberText::Int(a), NumberText::Int(b)) => a == b,
            _ => self.to_string() == other.to_string(),
        }
    }
}

impl Eq for IdNumber {}

impl Serialize for IdNumber {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            NumberText::Int(n) => s.serialize_i64(*n),
            NumberText::Raw(r) => r.serialize(s),
        }
    }
}

impl Id {
    /// A fresh, unique string id.
    pub fn fresh() -> Self {
        Id::String(crate::util::ids::uuid_v4().to_string())
    }

    /// The id as plain text, for upstreams (legacy `request_id`) that only know strings.
    pub fn as_text(&self) -> Option<String> {
        match self {
            Id::Null => None,
            Id::Number(n) => Some(n.text()),
            Id::String(s) => Some(s.clone()),
        }
    }

    /// `f` of the id's text ([`Id::as_text`]) without a copy of it: `None` for a null id.
    pub(crate) fn with_text<T>(&self, f: impl FnOnce(&str) -> T) -> Option<T> {
        match self {
            Id::Null => None,
            Id::Number(IdNumber(NumberText::Int(n))) => Some(f(itoa::Buffer::new().format(*n))),
            Id::Number(IdNumber(NumberText::Raw(r))) => Some(f(r.get())),
            Id::String(s) => Some(f(s)),
        }
    }

    /// The id of a member read as raw JSON: `None` when it is not a string, a number or null.
    pub fn from_raw(raw: &RawValue) -> Option<Self> {
        Self::from_text(raw.get())
    }

    /// [`Id::from_raw`] of a value's text, when it is known to be one JSON value.
    pub(crate) fn from_text(text: &str) -> Option<Self> {
        match text.as_bytes().first()? {
            b'n' => Some(Id::Null),
            // Most string ids hold no escape: their text between the quotes is the string.
            b'"' if !text.contains('\\') => Some(Id::String(text[1..text.len() - 1].to_owned())),
            b'"' => serde_json::from_str(text).ok().map(Id::String),
            b'-' | b'0'..=b'9' => IdNumber::from_text(text).map(Id::Number),
            _ => None,
        }
    }

    /// The length of what [`write_json`](Self::write_json) writes, when it is known without
    /// writing it (a string that needs escaping is not).
    fn json_len(&self) -> Option<usize> {
        match self {
            Id::Null => Some(4),
            Id::Number(IdNumber(NumberText::Int(n))) => Some(itoa::Buffer::new().format(*n).len()),
            Id::Number(IdNumber(NumberText::Raw(r))) => Some(r.get().len()),
            Id::String(s) => super::scan::is_plain(s.as_bytes()).then_some(s.len() + 2),
        }
    }

    /// Writes the id as JSON.
    pub(crate) fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Id::Null => out.extend_from_slice(b"null"),
            Id::Number(n) => n.write(out),
            Id::String(s) => super::write_json_str(out, s),
        }
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Id::Null => s.serialize_unit(),
            Id::Number(n) => n.serialize(s),
            Id::String(t) => s.serialize_str(t),
        }
    }
}

/// Read through the raw text, so a number keeps every digit the caller sent.
impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        Id::from_raw(&raw)
            .ok_or_else(|| serde::de::Error::custom("id must be a string, a number or null"))
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        Id::String(s.to_owned())
    }
}

impl From<i64> for Id {
    fn from(n: i64) -> Self {
        Id::Number(IdNumber(NumberText::Int(n)))
    }
}

/// A JSON-RPC 2.0 request or notification.
#[derive(Clone, Debug)]
pub struct Request {
    /// Method name; never empty.
    pub method: String,
    /// Structured parameters (object or array), kept as raw JSON.
    pub params: Option<Box<RawValue>>,
    /// `None` for a notification (no `id` member).
    pub id: Option<Id>,
}

impl Request {
    /// Starts a request for `method`; see [`RequestBuilder::build`] for the rules.
    pub fn builder(method: impl Into<String>) -> RequestBuilder {
        RequestBuilder {
            jsonrpc: VERSION.to_owned(),
            method: method.into(),
            params: None,
            id: None,
            notification: false,
        }
    }

    /// Always `"2.0"`: a request of any other version cannot be constructed.
    pub fn jsonrpc(&self) -> &'static str {
        VERSION
    }

    /// A notification has no `id` member and gets no response.
    pub fn is_notification(&self) -> bool {
        self.id.is_none()
    }

    /// `params` as text, `{}` when absent.
    pub fn params_text(&self) -> &str {
        self.params.as_deref().map_or("{}", RawValue::get)
    }
}

impl Serialize for Request {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("jsonrpc", VERSION)?;
        map.serialize_entry("method", &self.method)?;
        if let Some(params) = &self.params {
            map.serialize_entry("params", params)?;
        }
        if let Some(id) = &self.id {
            map.serialize_entry("id", id)?;
        }
        map.end()
    }
}

/// A request's bytes from its parts, borrowed, a string id (or none, a notification): what
/// [`Request`]'s `Serialize` writes, for a caller that holds the parts without a `Request` (the
/// proxied call, whose method outlives the exchange in its figures).
pub(crate) fn request_bytes(method: &str, params: Option<&RawValue>, id: Option<&str>) -> Vec<u8> {
    let hint = params.map_or(0, |p| p.get().len()) + method.len() + id.map_or(0, str::len) + 48;
    let mut out = Vec::with_capacity(hint);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":");
    super::write_json_str(&mut out, method);
    if let Some(p) = params {
        out.extend_from_slice(b",\"params\":");
        out.extend_from_slice(p.get().as_bytes());
    }
    if let Some(id) = id {
        out.extend_from_slice(b",\"id\":");
        super::write_json_str(&mut out, id);
    }
    out.push(b'}');
    out
}

/// Builds a [`Request`], validating what the protocol demands.
#[derive(Debug)]
pub struct RequestBuilder {
    jsonrpc: String,
    method: String,
    params: Option<Value>,
    id: Option<Id>,
    notification: bool,
}

impl RequestBuilder {
    /// Sets the version string; anything but `"2.0"` fails at [`build`](Self::build).
    pub fn jsonrpc(mut self, version: impl Into<String>) -> Self {
        self.jsonrpc = version.into();
        self
    }

    /// Sets structured params.
    pub fn params(mut self, params: Value) -> Self {
        self.params = Some(params);
        self
    }

    /// Sets an explicit id.
    pub fn id(mut self, id: impl Into<Id>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Makes the request a notification (no id member at all).
    pub fn notification(mut self) -> Self {
        self.notification = true;
        self
    }

    /// Validates and builds; a call built without an id gets a fresh one.
    pub fn build(self) -> Result<Request, ValidationError> {
        if self.jsonrpc != VERSION {
            return Err(ValidationError::WrongVersion(self.jsonrpc));
        }
        if self.method.is_empty() {
            return Err(ValidationError::EmptyMethod);
        }
        let params = match self.params {
            None => None,
            Some(v @ (Value::Object(_) | Value::Array(_))) => Some(to_raw(&v)),
            Some(_) => return Err(ValidationError::ParamsNotStructured),
        };
        let id = if self.notification {
            None
        } else {
            Some(self.id.unwrap_or_else(Id::fresh))
        };
        Ok(Request {
            method: self.method,
            params,
            id,
        })
    }
}

/// The error member of a response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// Integer error code.
    pub code: i64,
    /// Short description.
    pub message: String,
    /// Additional information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error with no data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Attaches data.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// -32700: the body is not JSON.
    pub fn parse_error(detail: impl std::fmt::Display) -> Self {
        Self::new(code::PARSE_ERROR, format!("Parse error: {detail}"))
    }

    /// -32600: JSON, but not a valid Request object.
    pub fn invalid_request(detail: impl std::fmt::Display) -> Self {
        Self::new(code::INVALID_REQUEST, format!("Invalid Request: {detail}"))
    }

    /// -32601: nothing serves this method.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            code::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        )
    }
}

/// Whether a response carries a result or an error.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// Success; the raw result text (may be `null`).
    Result(Box<RawValue>),
    /// Failure.
    Error(ErrorObject),
}

/// A JSON-RPC 2.0 response: exactly one of result and error, by construction.
#[derive(Clone, Debug, Deserialize)]
#[serde(try_from = "ResponseWire")]
pub struct Response {
    /// The caller's id, or null when it could not be read.
    pub id: Id,
    /// Result or error.
    pub outcome: Outcome,
}

impl Response {
    /// A success response.
    pub fn result(id: Id, result: Box<RawValue>) -> Self {
        Response {
            id,
            outcome: Outcome::Result(result),
        }
    }

    /// A success response from a JSON value.
    pub fn result_value(id: Id, result: &Value) -> Self {
        Self::result(id, to_raw(result))
    }

    /// An error response.
    pub fn error(id: Id, error: ErrorObject) -> Self {
        Response {
            id,
            outcome: Outcome::Error(error),
        }
    }

    /// Builds a response from optional parts, as a deserialiser would: exactly one must be set.
    pub fn from_parts(
        id: Id,
        result: Option<Value>,
        error: Option<ErrorObject>,
    ) -> Result<Self, ValidationError> {
        match (result, error) {
            (Some(r), None) => Ok(Self::result_value(id, &r)),
            (None, Some(e)) => Ok(Self::error(id, e)),
            _ => Err(ValidationError::ResultXorError),
        }
    }

    /// Always `"2.0"`.
    pub fn jsonrpc(&self) -> &'static str {
        VERSION
    }

    /// The result, when the call succeeded.
    pub fn result_raw(&self) -> Option<&RawValue> {
        match &self.outcome {
            Outcome::Result(r) => Some(r),
            Outcome::Error(_) => None,
        }
    }

    /// The error, when the call failed.
    pub fn error_object(&self) -> Option<&ErrorObject> {
        match &self.outcome {
            Outcome::Result(_) => None,
            Outcome::Error(e) => Some(e),
        }
    }

    /// The response as JSON (the same bytes as its `Serialize`), in a buffer sized up front. A
    /// result, the proxy's hot path, is written by hand around its raw bytes, in a buffer of
    /// exactly its length when the id's is known: a `Bytes` made of a full `Vec` takes it over
    /// as it is, where one with room to spare allocates a shared header besides.
    pub fn to_vec(&self) -> Vec<u8> {
        const FRAME: usize = r#"{"jsonrpc":"2.0","result":,"id":}"#.len();
        match &self.outcome {
            Outcome::Result(r) => {
                let len = self.id.json_len().map_or(64, |n| FRAME + n) + r.get().len();
                let mut out = Vec::with_capacity(len);
                out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"result\":");
                out.extend_from_slice(r.get().as_bytes());
                out.extend_from_slice(b",\"id\":");
                self.id.write_json(&mut out);
                out.push(b'}');
                out
            }
            Outcome::Error(_) => serde_json::to_vec(self).expect("a response always serialises"),
        }
    }
}

impl Serialize for Response {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("jsonrpc", VERSION)?;
        match &self.outcome {
            Outcome::Result(r) => map.serialize_entry("result", r)?,
            Outcome::Error(e) => map.serialize_entry("error", e)?,
        }
        map.serialize_entry("id", &self.id)?;
        map.end()
    }
}

/// The loose shape a response is read through before its invariants are checked.
#[derive(Deserialize)]
struct ResponseWire {
    jsonrpc: String,
    id: Id,
    #[serde(default, deserialize_with = "present")]
    result: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<ErrorObject>,
}

impl TryFrom<ResponseWire> for Response {
    type Error = ValidationError;

    fn try_from(w: ResponseWire) -> Result<Self, Self::Error> {
        if w.jsonrpc != VERSION {
            return Err(ValidationError::WrongVersion(w.jsonrpc));
        }
        let outcome = match (w.result, w.error) {
            (Some(r), None) => Outcome::Result(r),
            (None, Some(e)) => Outcome::Error(e),
            _ => return Err(ValidationError::ResultXorError),
        };
        Ok(Response { id: w.id, outcome })
    }
}

impl Response {
    /// Reads an upstream's answer to one call: by the strict scanner ([`super::scan`]) when it
    /// can vouch for the object (what nearly every answer is), else by serde_json, which accepts
    /// or refuses it with its own error, so an answer reads the same with the scanner as without.
    pub fn from_json(bytes: &[u8]) -> serde_json::Result<Self> {
        super::from_json_scanned(bytes, Self::scanned)
    }

    /// The response `text` is, read by the scanner: `None` when it cannot vouch for it, when a
    /// member comes twice, or when one is not of its type (serde's errors to give). `error` is
    /// read by serde_json on its own text, as the whole would.
    fn scanned(text: &str) -> Option<Self> {
        let (mut version, mut id, mut result, mut error) = (None, None, None, None);
        super::scan::members_deferring(
            text,
            |name| matches!(name, "result" | "error"),
            |name, raw, escaped| match name {
                "jsonrpc" => super::scan::once(
                    &mut version,
                    super::scan::string(raw, escaped).map(std::borrow::Cow::into_owned),
                ),
                "id" => super::scan::once(&mut id, Id::from_text(raw)),
                "result" => {
                    super::scan::once(&mut result, RawValue::from_string(raw.to_owned()).ok())
                }
                "error" => super::scan::once(&mut error, serde_json::from_str(raw).ok()),
                _ => Some(()),
            },
        )?;
        Response::try_from(ResponseWire {
            jsonrpc: version?,
            id: id?,
            result,
            error: error.flatten(),
        })
        .ok()
    }
}

/// Serialises a value we built ourselves into raw JSON text.
pub fn to_raw(v: &Value) -> Box<RawValue> {
    // A `Value` always serialises; the fallback is unreachable but keeps this total.
    serde_json::value::to_raw_value(v).unwrap_or_else(|_| null_raw())
}

/// `null` as raw JSON.
pub fn null_raw() -> Box<RawValue> {
    RawValue::from_string("null".to_owned()).expect("null is JSON")
}

/// Parses one JSON-RPC response body as an upstream sent it: a single response or a batch.
pub fn parse_responses(body: &[u8]) -> Result<Vec<Response>, serde_json::Error> {
    match first_byte(body) {
        Some(b'[') => serde_json::from_slice(body),
        _ => serde_json::from_slice(body).map(|r| vec![r]),
    }
}

/// The first byte that is not JSON whitespace.
pub(crate) fn first_byte(body: &[u8]) -> Option<u8> {
    body.iter()
        .copied()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// An answer as an upstream might write it: a response's members (some twice, some of the
    /// wrong type), spaced at random, sometimes with text after it.
    fn answer() -> impl Strategy<Value = String> {
        crate::wire::scan::envelopes::object(prop_oneof![
            6 => Just(r#""jsonrpc":"2.0""#.to_owned()),
            1 => Just(r#""jsonrpc":"1.0""#.to_owned()),
            1 => Just(r#""jsonrpc":2"#.to_owned()),
            4 => prop_oneof![
                Just("1"), Just("\"a\\\"b\""), Just("null"), Just("-0"), Just("1.5"),
                Just("1e999"), Just("{}"), Just("\"x\""),
            ]
            .prop_map(|t| format!(r#""id":{t}"#)),
            4 => Just(r#""result":{"plan_id":"P1","n":[1,2.5,null]}"#.to_owned()),
            1 => Just(r#""result":null"#.to_owned()),
            1 => any::<String>().prop_map(|s| format!(r#""result":{}"#, json!(s))),
            1 => Just(r#""error":{"code":-32001,"message":"no","data":{"a":1}}"#.to_owned()),
            1 => Just(r#""error":{"code":"X"}"#.to_owned()),
            1 => Just(r#""error":null"#.to_owned()),
            1 => Just(r#""other":[{}]"#.to_owned()),
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// The scanner's reading of an answer is serde_json's: the same response when both take
        /// it, and serde_json's own answer (its error included) for one the scanner leaves.
        #[test]
        fn an_answer_is_read_as_serde_reads_it(text in answer()) {
            crate::wire::scan::envelopes::read_alike(
                &text,
                Response::scanned(&text),
                Response::from_json(text.as_bytes()),
                crate::wire::from_json::<Response>(text.as_bytes()),
            )?;
        }
    }

    fn any_id() -> impl Strategy<Value = Id> {
        prop_oneof![
            Just(Id::Null),
            any::<i64>().prop_map(Id::from),
            "-?(0|[1-9][0-9]{0,40})(\\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?"
                .prop_map(|n| Id::from_raw(&RawValue::from_string(n).unwrap()).unwrap()),
            "\\PC*|[\"\\\\\u{0}-\u{1f}a]*".prop_map(Id::String),
        ]
    }

    proptest! {
        /// The hand-written result response is byte for byte what `Serialize` writes.
        #[test]
        fn to_vec_is_serialize(id in any_id(), text in ".*") {
            let r = Response::result_value(id.clone(), &json!({"text": text, "n": [1, 2.5]}));
            let v = r.to_vec();
            prop_assert_eq!(&v, &serde_json::to_vec(&r).unwrap());
            // Sized exactly whenever the id's length is known up front.
            if id.json_len().is_some() {
                prop_assert_eq!(v.len(), v.capacity());
            }
            let e = Response::error(id, ErrorObject::new(-32000, text));
            prop_assert_eq!(e.to_vec(), serde_json::to_vec(&e).unwrap());
        }

        /// The request written from borrowed parts is byte for byte what `Serialize` writes,
        /// with params or without, a string id or none, whatever the strings hold.
        #[test]
        fn request_bytes_is_serialize(
            method in "\\PC*|[\"\\\\\u{0}-\u{1f}a]*",
            id in proptest::option::of("\\PC*|[\"\\\\\u{0}-\u{1f}a]*"),
            with_params in any::<bool>(),
        ) {
            let params = with_params.then(|| RawValue::from_string(r#"{"a": [1, "x\"y"]}"#.to_owned()).unwrap());
            let bytes = request_bytes(&method, params.as_deref(), id.as_deref());
            let req = Request { method, params, id: id.map(Id::String) };
            prop_assert_eq!(bytes, serde_json::to_vec(&req).unwrap());
        }
    }

    #[test]
    fn builder_rejects_empty_method_and_wrong_version() {
        assert_eq!(
            Request::builder("").build().unwrap_err(),
            ValidationError::EmptyMethod
        );
        assert_eq!(
            Request::builder("m").jsonrpc("1.0").build().unwrap_err(),
            ValidationError::WrongVersion("1.0".into())
        );
    }

    #[test]
    fn builder_generates_distinct_ids_and_notifications_have_none() {
        let a = Request::builder("m").build().unwrap();
        let b = Request::builder("m").build().unwrap();
        assert_ne!(a.id, b.id);
        assert!(Request::builder("m")
            .notification()
            .build()
            .unwrap()
            .is_notification());
    }

    #[test]
    fn response_serialises_exactly_one_member() {
        let ok = Response::result_value(Id::from(1), &json!({"a": 1}));
        assert_eq!(
            serde_json::to_value(&ok).unwrap(),
            json!({"jsonrpc": "2.0", "result": {"a": 1}, "id": 1})
        );
        let err = Response::error(Id::Null, ErrorObject::new(-32600, "x"));
        assert_eq!(
            serde_json::to_value(&err).unwrap(),
            json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": "x"}, "id": null})
        );
    }

    #[test]
    fn response_deserialise_checks_invariants() {
        let both = br#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}"#;
        assert!(serde_json::from_slice::<Response>(both).is_err());
        let neither = br#"{"jsonrpc":"2.0","id":1}"#;
        assert!(serde_json::from_slice::<Response>(neither).is_err());
        let null_result = br#"{"jsonrpc":"2.0","id":1,"result":null}"#;
        let r: Response = serde_json::from_slice(null_result).unwrap();
        assert_eq!(r.result_raw().unwrap().get(), "null");
    }

    #[test]
    fn ids_keep_every_digit() {
        for text in [
            "123456789012345678901234567890",
            "18446744073709551616",
            "1e2",
            "1.50",
            "-0",
            "-1.0E+400",
        ] {
            let id: Id = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&id).unwrap(), text);
            let mut out = Vec::new();
            id.write_json(&mut out);
            assert_eq!(out, text.as_bytes());
            assert_eq!(
                id.as_text().as_deref(),
                Some(text),
                "the upstream's text keeps it too"
            );
        }
        for (text, upstream) in [("0", "0"), ("-42", "-42"), ("\"a\"", "a"), ("null", "")] {
            let id: Id = serde_json::from_str(text).unwrap();
            assert_eq!(id.as_text().unwrap_or_default(), upstream, "{text}");
        }
        for bad in ["true", "[1]", "{}"] {
            assert!(serde_json::from_str::<Id>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ids_keep_their_type() {
        for id in [json!(1), json!(-7), json!(1.5), json!("x"), json!(null)] {
            let parsed: Id = serde_json::from_value(id.clone()).unwrap();
            assert_eq!(serde_json::to_value(&parsed).unwrap(), id);
        }
    }
}
