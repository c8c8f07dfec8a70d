//! Telling the two client dialects apart, in one parse of the body.
//!
//! A body whose top-level object has an `operation` member is a legacy envelope; anything else
//! (an array, any other object, a scalar) is JSON-RPC 2.0. Every member either dialect knows is
//! read in the same pass; `params` and `auth` stay raw.
//!
//! The pass is the strict scanner's ([`super::scan`]) when it can vouch for the object (what
//! nearly every request is: members named without escapes, each once, the string members
//! strings), with no serde machinery between the bytes and the members; serde_json reads every
//! other body, so whatever it refuses is refused with its own error, scanner or no scanner.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::Value;

use super::jsonrpc::{first_byte, ErrorObject, Id, Request, Response, VERSION};
use super::legacy::{self, Auth, LegacyError, LegacyRequest};
use super::{present, scan};

/// A parsed request body, in the dialect it was written in.
#[derive(Debug)]
pub enum Inbound {
    /// A legacy envelope, or the legacy error it earns.
    Legacy(Result<LegacyRequest, LegacyFault>),
    /// A JSON-RPC single request or batch.
    JsonRpc(Message),
}

/// A JSON-RPC body: one request or a non-empty batch.
#[derive(Debug)]
pub enum Message {
    /// One request object.
    Single(Entry),
    /// A batch; each member parsed on its own.
    Batch(Vec<Entry>),
}

/// A request, or the error response its malformed member earns.
pub type Entry = Result<Request, Response>;

/// A malformed legacy envelope: the error to answer, and the id to answer it under.
#[derive(Debug, Clone, PartialEq)]
pub struct LegacyFault {
    /// The caller's `request_id` when it could be read, else a generated one.
    pub request_id: String,
    /// What was wrong.
    pub error: LegacyError,
}

/// Parses a request body. `Err` is the single JSON-RPC error response a body earns when it is not
/// JSON (-32700, invalid UTF-8 included), is `[]`, or is neither object nor array (-32600).
///
/// The body's UTF-8 is checked once, up front (as [`super::from_json`] does, but answered as a
/// parse error); the JSON parser then reads a `str` and re-checks neither its strings nor the raw
/// `params` it keeps.
pub fn parse(body: &[u8]) -> Result<Inbound, Response> {
    parse_bounded(body, usize::MAX)
}

/// [`parse`], with a batch of more than `max_batch_len` members refused (-32600) as soon as its
/// members are counted, before any of them is parsed or answered.
pub fn parse_bounded(body: &[u8], max_batch_len: usize) -> Result<Inbound, Response> {
    let body = std::str::from_utf8(body).map_err(|e| {
        Response::error(
            Id::Null,
            ErrorObject::parse_error(format!(
                "the body is not UTF-8 (at byte {})",
                e.valid_up_to()
            )),
        )
    })?;
    match first_byte(body.as_bytes()) {
        Some(b'[') => parse_batch(body, max_batch_len).map(|m| Inbound::JsonRpc(Message::Batch(m))),
        Some(b'{') => {
            let probe = read_probe(body).map_err(unreadable)?;
            Ok(match probe.operation.is_some() {
                true => Inbound::Legacy(probe.into_legacy()),
                false => Inbound::JsonRpc(Message::Single(probe.into_jsonrpc())),
            })
        }
        _ => match serde_json::from_str::<serde::de::IgnoredAny>(body) {
            Err(e) => Err(Response::error(Id::Null, ErrorObject::parse_error(e))),
            Ok(_) => Err(Response::error(
                Id::Null,
                ErrorObject::invalid_request("the body must be an object or an array"),
            )),
        },
    }
}

fn parse_batch(body: &str, max: usize) -> Result<Vec<Entry>, Response> {
    let mut de = serde_json::Deserializer::from_str(body);
    let members = match de::DeserializeSeed::deserialize(Members(max), &mut de)
        .and_then(|m| de.end().map(|()| m))
    {
        Ok(Some(m)) => m,
        Ok(None) => {
            return Err(Response::error(
                Id::Null,
                ErrorObject::invalid_request(format!(
                    "a batch of more than {max} members exceeds server.max_batch_len ({max})"
                )),
            ))
        }
        Err(e) => return Err(unreadable(e)),
    };
    if members.is_empty() {
        return Err(Response::error(
            Id::Null,
            ErrorObject::invalid_request("empty batch"),
        ));
    }
    Ok(members
        .into_iter()
        .map(|m| match first_byte(m.get().as_bytes()) {
            // The batch was read as JSON, so a member that cannot be decoded (a lone surrogate in
            // a member name, a number out of range) is an invalid request, not a parse error.
            Some(b'{') => read_probe(m.get())
                .map_err(|e| invalid(Id::Null, e))
                .and_then(Probe::into_jsonrpc),
            _ => Err(Response::error(
                Id::Null,
                ErrorObject::invalid_request("a batch member must be an object"),
            )),
        })
        .collect())
}

/// A batch's members as raw text, at most this many: counted as they are read, so a 1 MB batch
/// of `{}` is refused before 300 000 members become entries and answers. `None` when there are
/// more (the rest of the array is still read, to tell a long batch from malformed JSON).
struct Members(usize);

impl<'de> de::DeserializeSeed<'de> for Members {
    type Value = Option<Vec<&'de RawValue>>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Members {
    type Value = Option<Vec<&'de RawValue>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array")
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(m) = a.next_element::<&'de RawValue>()? {
            if out.len() == self.0 {
                while a.next_element::<de::IgnoredAny>()?.is_some() {}
                return Ok(None);
            }
            out.push(m);
        }
        Ok(Some(out))
    }
}

/// The probe of the object `body` is: the scanner's reading, else serde_json's.
fn read_probe(body: &str) -> serde_json::Result<Probe<'_>> {
    super::scanned_or_serde(body, scan_probe)
}

/// The probe of the object `body` is, read by the strict scanner: `None` when it cannot vouch
/// for it, when a member the probe knows comes twice (serde's "duplicate field" to answer), or
/// when one that should be a string is not (serde's to keep as it was sent, for the error).
/// Raw members are validated by serde_json as `Box<RawValue>`s are, and copied as they are.
fn scan_probe(body: &str) -> Option<Probe<'_>> {
    fn loose(raw: &str, escaped: bool) -> Option<Loose<'_>> {
        scan::string(raw, escaped).map(Loose::Str)
    }
    fn boxed(raw: &str) -> Option<Box<RawValue>> {
        RawValue::from_string(raw.to_owned()).ok()
    }
    let mut p = Probe::default();
    scan::members_deferring(
        body,
        |name| matches!(name, "params" | "auth"),
        |name, raw, escaped| match name {
            "jsonrpc" => scan::once(&mut p.jsonrpc, loose(raw, escaped)),
            "method" => scan::once(&mut p.method, loose(raw, escaped)),
            "params" => scan::once(&mut p.params, boxed(raw)),
            "id" => scan::once(&mut p.id, Some(raw)),
            "operation" => scan::once(&mut p.operation, loose(raw, escaped)),
            "a2a_version" => scan::once(&mut p.a2a_version, loose(raw, escaped)),
            "request_id" => scan::once(&mut p.request_id, loose(raw, escaped)),
            "auth" => scan::once(&mut p.auth, boxed(raw)),
            _ => Some(()),
        },
    )?;
    Some(p)
}

/// The error a body that could not be read earns: JSON of the wrong shape is an invalid request,
/// anything else (bad syntax, bad UTF-8) a parse error.
fn unreadable(e: serde_json::Error) -> Response {
    let error = if e.is_data() {
        ErrorObject::invalid_request(e)
    } else {
        ErrorObject::parse_error(e)
    };
    Response::error(Id::Null, error)
}

/// Every top-level member either dialect defines; unknown members are ignored. The members that
/// should be strings are borrowed from the body when they hold no escapes, as is the id's text.
#[derive(Default, Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct Probe<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    jsonrpc: Option<Loose<'a>>,
    #[serde(default, borrow, deserialize_with = "present")]
    method: Option<Loose<'a>>,
    #[serde(default, deserialize_with = "present")]
    params: Option<Box<RawValue>>,
    #[serde(default, borrow, deserialize_with = "raw_text")]
    id: Option<&'a str>,
    #[serde(default, borrow, deserialize_with = "present")]
    operation: Option<Loose<'a>>,
    #[serde(default, borrow, deserialize_with = "present")]
    a2a_version: Option<Loose<'a>>,
    #[serde(default, borrow, deserialize_with = "present")]
    request_id: Option<Loose<'a>>,
    #[serde(default, deserialize_with = "present")]
    auth: Option<Box<RawValue>>,
}

/// A value's text as it was sent (serde_json's `RawValue`, borrowed).
fn raw_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de str>, D::Error> {
    <&'de RawValue>::deserialize(d).map(|r| Some(r.get()))
}

/// A member that ought to be a string: the string (borrowed when it has no escapes), or whatever
/// else was sent, kept for the error message.
#[cfg_attr(test, derive(Debug, PartialEq))]
enum Loose<'a> {
    Str(Cow<'a, str>),
    Other(Value),
}

impl Loose<'_> {
    fn as_str(&self) -> Option<&str> {
        match self {
            Loose::Str(s) => Some(s),
            Loose::Other(_) => None,
        }
    }
}

/// As JSON, the way the caller wrote it.
impl fmt::Display for Loose<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Loose::Str(s) => write!(f, "{}", Value::from(s.as_ref())),
            Loose::Other(v) => write!(f, "{v}"),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Loose<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Loose<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Loose::Str(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Loose::Str(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
                Ok(Loose::Str(Cow::Owned(s)))
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<Self::Value, E> {
                Ok(Loose::Other(Value::Bool(b)))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
                Ok(Loose::Other(Value::from(n)))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
                Ok(Loose::Other(Value::from(n)))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<Self::Value, E> {
                Ok(Loose::Other(Value::from(n)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Loose::Other(Value::Null))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, a: A) -> Result<Self::Value, A::Error> {
                Value::deserialize(de::value::SeqAccessDeserializer::new(a)).map(Loose::Other)
            }
            fn visit_map<A: de::MapAccess<'de>>(self, a: A) -> Result<Self::Value, A::Error> {
                Value::deserialize(de::value::MapAccessDeserializer::new(a)).map(Loose::Other)
            }
        }
        d.deserialize_any(V)
    }
}

fn is_structured(raw: &RawValue) -> bool {
    matches!(first_byte(raw.get().as_bytes()), Some(b'{' | b'['))
}

impl Probe<'_> {
    fn into_jsonrpc(self) -> Entry {
        // The id is answered back whenever it could be read, even on an invalid request.
        let id = match self.id {
            None => None,
            Some(raw) => match Id::from_text(raw) {
                Some(id) => Some(id),
                None => return Err(invalid(Id::Null, "id must be a string, a number or null")),
            },
        };
        let answer_id = id.clone().unwrap_or(Id::Null);
        match self.jsonrpc {
            Some(Loose::Str(v)) if v == VERSION => {}
            Some(other) => {
                return Err(invalid(
                    answer_id,
                    format!("jsonrpc must be \"2.0\", got {other}"),
                ))
            }
            None => return Err(invalid(answer_id, "missing member \"jsonrpc\"")),
        }
        let method = match self.method {
            Some(Loose::Str(m)) if !m.is_empty() => m.into_owned(),
            Some(Loose::Str(_)) => return Err(invalid(answer_id, "method must not be empty")),
            Some(_) => return Err(invalid(answer_id, "method must be a string")),
            None => return Err(invalid(answer_id, "missing member \"method\"")),
        };
        if let Some(p) = &self.params {
            if !is_structured(p) {
                return Err(invalid(answer_id, "params must be an object or an array"));
            }
        }
        Ok(Request {
            method,
            params: self.params,
            id,
        })
    }

    fn into_legacy(self) -> Result<LegacyRequest, LegacyFault> {
        let request_id = match self.request_id.as_ref().and_then(Loose::as_str) {
            Some(s) if !s.is_empty() => s.to_owned(),
            _ => crate::util::ids::uuid_v4().to_string(),
        };
        let fault = |code: &str, message: &str| LegacyFault {
            request_id: request_id.clone(),
            error: LegacyError::new(code, message),
        };
        if matches!(&self.request_id, Some(Loose::Other(_))) {
            return Err(fault(
                legacy::code::VALIDATION_ERROR,
                "request_id must be a string",
            ));
        }
        match &self.a2a_version {
            Some(Loose::Str(v)) if v == legacy::VERSION => {}
            Some(v) => {
                return Err(fault(
                    legacy::code::VERSION_MISMATCH,
                    &format!("a2a_version {v} is not supported; this gateway speaks \"1.0\""),
                ))
            }
            None => {
                return Err(fault(
                    legacy::code::VERSION_MISMATCH,
                    "a2a_version is missing; this gateway speaks \"1.0\"",
                ))
            }
        }
        let operation = match self.operation.as_ref().and_then(Loose::as_str) {
            Some(op) if !op.is_empty() => op.to_owned(),
            _ => {
                return Err(fault(
                    legacy::code::VALIDATION_ERROR,
                    "operation must be a non-empty string",
                ))
            }
        };
        let params = match self.params {
            Some(p) if p.get() == "null" => empty_object(),
            Some(p) if first_byte(p.get().as_bytes()) == Some(b'{') => p,
            Some(_) => {
                return Err(fault(
                    legacy::code::VALIDATION_ERROR,
                    "params must be an object",
                ))
            }
            None => empty_object(),
        };
        let auth = match self.auth {
            None => None,
            Some(a) if a.get() == "null" => None,
            Some(a) => match serde_json::from_str::<Auth>(a.get()) {
                Ok(auth) => Some(auth),
                Err(_) => {
                    return Err(fault(
                        legacy::code::VALIDATION_ERROR,
                        "auth must be an object or null",
                    ))
                }
            },
        };
        Ok(LegacyRequest {
            a2a_version: legacy::VERSION.into(),
            request_id,
            operation,
            params,
            auth,
        })
    }
}

fn invalid(id: Id, detail: impl std::fmt::Display) -> Response {
    Response::error(id, ErrorObject::invalid_request(detail))
}

/// `{}` as raw JSON.
pub fn empty_object() -> Box<RawValue> {
    RawValue::from_string("{}".to_owned()).expect("{} is JSON")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::jsonrpc::code;
    use proptest::prelude::*;

    /// serde's reading alone, for the tests that hold the scanner's to it.
    fn probe_by_serde(body: &str) -> Option<Probe<'_>> {
        serde_json::from_str(body).ok()
    }

    /// A member's value as a client might write it: strings with and without escapes, numbers
    /// (some not JSON), literals, nested values, broken text.
    fn value() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            4 => "[a-zA-Z0-9 ._/-]{0,10}".prop_map(|s| format!("\"{s}\"")),
            1 => any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap()),
            1 => "[a-z0-9 ./\\\\\"]{0,12}".prop_map(|s| format!("\"{s}\"")),
            3 => Just("\"2.0\"".to_owned()),
            2 => Just("\"1.0\"".to_owned()),
            1 => Just("\"m\\u00e9\"".to_owned()),
            1 => prop_oneof![Just("1"), Just("-0"), Just("1.5e3"), Just("01"), Just("1e999"), Just("-"), Just("2.")]
                .prop_map(str::to_owned),
            1 => prop_oneof![Just("null"), Just("true"), Just("false"), Just("tru"), Just("nul")]
                .prop_map(str::to_owned),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec(("[a-z]{1,3}", inner), 0..4).prop_map(|v| {
                    let m: Vec<String> = v.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
                    format!("{{{}}}", m.join(","))
                }),
                Just("[1,]".to_owned()),
            ]
        })
    }

    /// An object of members of the names either dialect knows (some twice, some escaped),
    /// spaced at random, sometimes with text after it.
    fn body() -> impl Strategy<Value = String> {
        const NAMES: [&str; 11] = [
            "jsonrpc",
            "method",
            "params",
            "id",
            "operation",
            "a2a_version",
            "request_id",
            "auth",
            "other",
            "metho\\u0064",
            "\\\"q",
        ];
        let space = prop_oneof![Just(""), Just(" "), Just("\n\t ")];
        // Each name at most once (a call as clients write it), or any names, repeats included.
        let names = prop_oneof![
            prop::sample::subsequence(NAMES[..9].to_vec(), 0..7).prop_shuffle(),
            prop::collection::vec(prop::sample::select(NAMES.to_vec()), 0..5),
        ];
        let members = names.prop_flat_map(move |names| {
            let n = names.len();
            (
                Just(names),
                prop::collection::vec((value(), space.clone()), n),
            )
        });
        (
            members,
            prop_oneof![Just(""), Just(" "), Just("\n\t ")],
            prop_oneof![8 => Just(""), 1 => Just(" x"), 1 => Just("}")],
        )
            .prop_map(|((names, values), sp, tail)| {
                let m: Vec<String> = names
                    .iter()
                    .zip(&values)
                    .map(|(k, (v, s))| format!("{s}\"{k}\"{s}:{s}{v}{s}"))
                    .collect();
                format!("{sp}{{{}}}{sp}{tail}", m.join(","))
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Whatever the scanner reads, serde_json reads too, to the same members; and a body
        /// it leaves to serde_json is parsed as serde_json alone would.
        #[test]
        fn the_scanner_reads_what_serde_reads(body in body()) {
            let scanned = scan_probe(&body).map(|p| format!("{p:?}"));
            let by_serde = probe_by_serde(&body).map(|p| format!("{p:?}"));
            if scanned.is_some() {
                prop_assert_eq!(scanned, by_serde, "{}", body);
            }
        }
    }

    #[test]
    fn the_scanner_takes_the_usual_calls_and_leaves_the_rest() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"echo","params":{"plan_id":"P1","n":1}}"#,
            r#" {"a2a_version": "1.0", "request_id": "r\"1", "operation": "op", "auth": null} "#,
            r#"{"jsonrpc":"2.0","method":"n","params":[1,{"a":null}],"other":{"x":[]}}"#,
        ] {
            let (a, b) = (scan_probe(body), probe_by_serde(body));
            assert!(a.is_some(), "{body}");
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{body}");
        }
        for body in [
            r#"{"jsonrpc":"2.0","method":"a","method":"b"}"#,
            r#"{"jsonrpc":2.0,"method":"a"}"#,
            r#"{"metho\u0064":"a"}"#,
            r#"{"method":"\u00e9"}"#,
            r#"{"method":"a"} x"#,
        ] {
            assert!(scan_probe(body).is_none(), "{body}");
        }
    }

    fn err_code(r: &Response) -> i64 {
        r.error_object().expect("an error").code
    }

    #[test]
    fn scalars_arrays_and_garbage() {
        assert_eq!(err_code(&parse(b"{bad").unwrap_err()), code::PARSE_ERROR);
        assert_eq!(err_code(&parse(b"").unwrap_err()), code::PARSE_ERROR);
        assert_eq!(err_code(&parse(b"1").unwrap_err()), code::INVALID_REQUEST);
        assert_eq!(err_code(&parse(b"[]").unwrap_err()), code::INVALID_REQUEST);
        let Inbound::JsonRpc(Message::Batch(b)) = parse(b"[1,2,3]").unwrap() else {
            panic!("expected a batch")
        };
        assert_eq!(b.len(), 3);
        assert!(b.iter().all(|e| e.is_err()));
    }

    #[test]
    fn invalid_utf8_is_a_parse_error_and_escapes_are_read() {
        let bad = b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\",\"id\":1}";
        assert_eq!(err_code(&parse(bad).unwrap_err()), code::PARSE_ERROR);
        let Inbound::JsonRpc(Message::Single(Ok(r))) =
            parse(br#"{"jsonrpc":"2.\u0030","method":"m\u00e9","id":1}"#).unwrap()
        else {
            panic!("escaped members are read like plain ones")
        };
        assert_eq!(r.method, "m\u{e9}");
        let Inbound::JsonRpc(Message::Single(Err(e))) =
            parse(br#"{"jsonrpc":2.0,"method":"m","id":1}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            e.error_object().unwrap().message,
            "Invalid Request: jsonrpc must be \"2.0\", got 2.0"
        );
    }

    #[test]
    fn notification_differs_from_null_id() {
        let Inbound::JsonRpc(Message::Single(Ok(n))) =
            parse(br#"{"jsonrpc":"2.0","method":"m"}"#).unwrap()
        else {
            panic!()
        };
        assert!(n.is_notification());
        let Inbound::JsonRpc(Message::Single(Ok(c))) =
            parse(br#"{"jsonrpc":"2.0","method":"m","id":null}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(c.id, Some(Id::Null));
    }

    #[test]
    fn operation_member_selects_legacy() {
        let body = br#"{"a2a_version":"1.0","request_id":"","operation":"x","auth":null}"#;
        let Inbound::Legacy(Ok(r)) = parse(body).unwrap() else {
            panic!()
        };
        assert!(!r.request_id.is_empty(), "empty request_id gets generated");
        assert_eq!(r.params.get(), "{}");
        let body = br#"{"a2a_version":"0.9","request_id":"r","operation":"x"}"#;
        let Inbound::Legacy(Err(f)) = parse(body).unwrap() else {
            panic!()
        };
        assert_eq!(f.error.code, legacy::code::VERSION_MISMATCH);
        assert_eq!(f.request_id, "r");
    }
}
