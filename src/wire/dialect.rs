//! Telling the two client dialects apart, in one parse of the body.
//!
//! A body whose top-level object has an `operation` member is a legacy envelope; anything else
//! (an array, any other object, a scalar) is JSON-RPC 2.0. Every member either dialect knows is
//! read in the same pass; `params` and `auth` stay raw.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::jsonrpc::{first_byte, ErrorObject, Id, Request, Response, VERSION};
use super::legacy::{self, Auth, LegacyError, LegacyRequest};
use super::present;

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
/// JSON (-32700), is `[]`, or is neither object nor array (-32600).
pub fn parse(body: &[u8]) -> Result<Inbound, Response> {
    match first_byte(body) {
        Some(b'[') => parse_batch(body).map(|m| Inbound::JsonRpc(Message::Batch(m))),
        Some(b'{') => {
            let probe = read_probe(body)?;
            Ok(match probe.operation.is_some() {
                true => Inbound::Legacy(probe.into_legacy()),
                false => Inbound::JsonRpc(Message::Single(probe.into_jsonrpc())),
            })
        }
        _ => match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
            Err(e) => Err(Response::error(Id::Null, ErrorObject::parse_error(e))),
            Ok(_) => Err(Response::error(
                Id::Null,
                ErrorObject::invalid_request("the body must be an object or an array"),
            )),
        },
    }
}

fn parse_batch(body: &[u8]) -> Result<Vec<Entry>, Response> {
    let members: Vec<&RawValue> = serde_json::from_slice(body).map_err(|e| {
        let error = if e.is_data() {
            ErrorObject::invalid_request(e)
        } else {
            ErrorObject::parse_error(e)
        };
        Response::error(Id::Null, error)
    })?;
    if members.is_empty() {
        return Err(Response::error(
            Id::Null,
            ErrorObject::invalid_request("empty batch"),
        ));
    }
    Ok(members
        .into_iter()
        .map(|m| match first_byte(m.get().as_bytes()) {
            Some(b'{') => read_probe(m.get().as_bytes()).and_then(Probe::into_jsonrpc),
            _ => Err(Response::error(
                Id::Null,
                ErrorObject::invalid_request("a batch member must be an object"),
            )),
        })
        .collect())
}

fn read_probe(body: &[u8]) -> Result<Probe, Response> {
    serde_json::from_slice(body).map_err(|e| {
        let error = if e.is_data() {
            ErrorObject::invalid_request(e)
        } else {
            ErrorObject::parse_error(e)
        };
        Response::error(Id::Null, error)
    })
}

/// Every top-level member either dialect defines; unknown members are ignored.
#[derive(Deserialize)]
struct Probe {
    #[serde(default, deserialize_with = "present")]
    jsonrpc: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    method: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    params: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    operation: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    a2a_version: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    request_id: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    auth: Option<Box<RawValue>>,
}

fn is_structured(raw: &RawValue) -> bool {
    matches!(first_byte(raw.get().as_bytes()), Some(b'{' | b'['))
}

impl Probe {
    fn into_jsonrpc(self) -> Entry {
        // The id is answered back whenever it could be read, even on an invalid request.
        let id = match self.id {
            None => None,
            Some(Value::Null) => Some(Id::Null),
            Some(Value::Number(n)) => Some(Id::Number(n)),
            Some(Value::String(s)) => Some(Id::String(s)),
            Some(_) => return Err(invalid(Id::Null, "id must be a string, a number or null")),
        };
        let answer_id = id.clone().unwrap_or(Id::Null);
        match self.jsonrpc {
            Some(Value::String(v)) if v == VERSION => {}
            Some(other) => {
                return Err(invalid(
                    answer_id,
                    format!("jsonrpc must be \"2.0\", got {other}"),
                ))
            }
            None => return Err(invalid(answer_id, "missing member \"jsonrpc\"")),
        }
        let method = match self.method {
            Some(Value::String(m)) if !m.is_empty() => m,
            Some(Value::String(_)) => return Err(invalid(answer_id, "method must not be empty")),
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
        let request_id = match &self.request_id {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => uuid::Uuid::new_v4().to_string(),
        };
        let fault = |code: &str, message: &str| LegacyFault {
            request_id: request_id.clone(),
            error: LegacyError::new(code, message),
        };
        if !matches!(&self.request_id, None | Some(Value::String(_))) {
            return Err(fault(
                legacy::code::VALIDATION_ERROR,
                "request_id must be a string",
            ));
        }
        match &self.a2a_version {
            Some(Value::String(v)) if v == legacy::VERSION => {}
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
        let operation = match &self.operation {
            Some(Value::String(op)) if !op.is_empty() => op.clone(),
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
