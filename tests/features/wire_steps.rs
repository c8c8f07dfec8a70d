//! Steps for `features/wire_format.feature` (seed 000).

use cucumber::{given, then, when};
use serde_json::{json, Value};
use wiregate::wire::dialect::{self, Inbound, Message};
use wiregate::wire::jsonrpc::{Id, Request, Response};
use wiregate::wire::legacy::LegacyError;
use wiregate::wire::translate::{error_to_jsonrpc, ErrorTable};
use wiregate::Facade;

use crate::World;

fn json_arg(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("step argument {s:?} is not JSON: {e}"))
}

#[given(regex = r#"^a valid A2aRequest with method "([^"]*)" and params (.+)$"#)]
fn valid_request(w: &mut World, method: String, params: String) {
    let req = Request::builder(method)
        .params(json_arg(&params))
        .build()
        .expect("a valid request builds");
    w.request = Some(req);
}

#[given(expr = "an A2aRequest with method {string} and id {string}")]
fn request_with_id(w: &mut World, method: String, id: String) {
    w.request = Some(Request::builder(method).id(id.as_str()).build().unwrap());
}

#[when("I serialise the request to a dict")]
fn serialise_request(w: &mut World) {
    w.dict = Some(serde_json::to_value(w.request.as_ref().unwrap()).unwrap());
}

#[when("I serialise the response to a dict")]
fn serialise_response(w: &mut World) {
    w.dict = Some(serde_json::to_value(w.response.as_ref().unwrap()).unwrap());
}

#[then(expr = "the serialised dict should contain key {string} with value {string}")]
fn dict_has_value(w: &mut World, key: String, value: String) {
    assert_eq!(
        w.dict.as_ref().unwrap().get(&key),
        Some(&Value::from(value))
    );
}

#[then(expr = "the serialised dict should contain key {string}")]
fn dict_has_key(w: &mut World, key: String) {
    let dict = w.dict.as_ref().unwrap();
    assert!(dict.get(&key).is_some(), "{key} missing from {dict}");
}

#[then(expr = "the serialised dict should not contain key {string}")]
fn dict_lacks_key(w: &mut World, key: String) {
    let dict = w.dict.as_ref().unwrap();
    assert!(dict.get(&key).is_none(), "{key} present in {dict}");
}

fn id_text(id: &Option<Id>) -> String {
    id.as_ref().and_then(Id::as_text).unwrap_or_default()
}

#[then("the request id should be non-empty")]
fn request_id_non_empty(w: &mut World) {
    assert!(!id_text(&w.request.as_ref().unwrap().id).is_empty());
}

#[then(expr = "the request id should equal {string}")]
fn request_id_equals(w: &mut World, id: String) {
    assert_eq!(w.request.as_ref().unwrap().id, Some(Id::String(id)));
}

#[when("I try to create an A2aRequest with empty method")]
fn try_empty_method(w: &mut World) {
    w.validation = Some(Request::builder("").build().map(drop));
}

#[when(expr = "I try to create an A2aRequest with jsonrpc {string}")]
fn try_version(w: &mut World, version: String) {
    w.validation = Some(Request::builder("m").jsonrpc(version).build().map(drop));
}

#[when("I try to create an A2aResponse with neither result nor error")]
fn try_neither(w: &mut World) {
    w.validation = Some(Response::from_parts(Id::from("r"), None, None).map(drop));
}

#[when("I try to create an A2aResponse with both result and error")]
fn try_both(w: &mut World) {
    let err = error_to_jsonrpc(&LegacyError::new("NOT_FOUND", "x"), &ErrorTable::default());
    w.validation = Some(Response::from_parts(Id::from("r"), Some(json!({})), Some(err)).map(drop));
}

#[then("a wire format ValidationError should be raised")]
fn validation_raised(w: &mut World) {
    let outcome = w.validation.as_ref().expect("an attempt was made");
    assert!(outcome.is_err(), "no ValidationError: {outcome:?}");
}

#[given(regex = r#"^a successful A2aResponse with id "([^"]*)" and result (.+)$"#)]
fn success_response(w: &mut World, id: String, result: String) {
    w.response = Some(Response::from_parts(Id::String(id), Some(json_arg(&result)), None).unwrap());
}

#[given(expr = "an error A2aResponse with id {string} and error code {string}")]
fn error_response(w: &mut World, id: String, code: String) {
    let err = error_to_jsonrpc(&LegacyError::new(code, "not found"), &ErrorTable::default());
    w.response = Some(Response::from_parts(Id::String(id), None, Some(err)).unwrap());
}

#[given(expr = "a JSON-RPC 2.0 request dict with method {string} and id {string}")]
fn request_dict(w: &mut World, method: String, id: String) {
    w.dict = Some(json!({"jsonrpc": "2.0", "method": method, "id": id, "params": {}}));
}

#[given(regex = r#"^a JSON-RPC 2.0 success response dict with id "([^"]*)" and result (.+)$"#)]
fn success_dict(w: &mut World, id: String, result: String) {
    w.dict = Some(json!({"jsonrpc": "2.0", "id": id, "result": json_arg(&result)}));
}

#[given(expr = "a JSON-RPC 2.0 error response dict with id {string} and error code {string}")]
fn error_dict(w: &mut World, id: String, code: String) {
    let table = ErrorTable::default();
    w.dict = Some(json!({"jsonrpc": "2.0", "id": id,
        "error": {"code": table.to_jsonrpc(&code), "message": "not found", "data": {"legacyCode": code}}}));
}

#[when("I deserialise the dict into an A2aRequest")]
fn deserialise_request(w: &mut World) {
    let body = serde_json::to_vec(w.dict.as_ref().unwrap()).unwrap();
    match dialect::parse(&body) {
        Ok(Inbound::JsonRpc(Message::Single(Ok(req)))) => w.request = Some(req),
        other => panic!("not a JSON-RPC request: {other:?}"),
    }
    w.body = Some(body);
}

#[when("I deserialise the dict into an A2aResponse")]
fn deserialise_response(w: &mut World) {
    let dict = w.dict.clone().unwrap();
    w.response = Some(serde_json::from_value(dict).expect("a valid response"));
}

#[then(expr = "the request method should equal {string}")]
fn request_method(w: &mut World, method: String) {
    assert_eq!(w.request.as_ref().unwrap().method, method);
}

/// `Request::jsonrpc()` is a constant, so the step reads what the parsed body carried, and checks
/// that the parser's acceptance hangs on it: the same body with any other version (or none) is
/// refused with -32600.
#[then(expr = "the request jsonrpc should equal {string}")]
fn request_jsonrpc(w: &mut World, v: String) {
    assert!(w.request.is_some(), "the body was parsed into a request");
    let body: Value = serde_json::from_slice(w.body.as_ref().expect("a parsed body")).unwrap();
    assert_eq!(
        body["jsonrpc"],
        Value::from(v),
        "what the parsed body carried"
    );
    for other in [json!("1.0"), json!(2.0), json!(null)] {
        let mut altered = body.clone();
        altered["jsonrpc"] = other.clone();
        refused_as_invalid(&serde_json::to_vec(&altered).unwrap(), &other);
    }
    let mut missing = body.clone();
    missing.as_object_mut().unwrap().remove("jsonrpc");
    refused_as_invalid(&serde_json::to_vec(&missing).unwrap(), &json!("(absent)"));
}

fn refused_as_invalid(body: &[u8], version: &Value) {
    match dialect::parse(body) {
        Ok(Inbound::JsonRpc(Message::Single(Err(resp)))) => {
            let code = resp.error_object().map(|e| e.code);
            assert_eq!(code, Some(-32600), "jsonrpc {version}: {resp:?}");
        }
        other => panic!("jsonrpc {version} was not refused: {other:?}"),
    }
}

#[then(expr = "the response result should contain key {string}")]
fn response_result_key(w: &mut World, key: String) {
    let raw = w.response.as_ref().unwrap().result_raw().expect("a result");
    let v: Value = serde_json::from_str(raw.get()).unwrap();
    assert!(v.get(&key).is_some(), "{key} missing from {v}");
}

#[then(regex = r"^the (response|wire-format response) (result|error) should (not )?be None$")]
fn response_member_none(w: &mut World, _which: String, member: String, not: String) {
    let r = w.response.as_ref().unwrap();
    let is_some = match member.as_str() {
        "result" => r.result_raw().is_some(),
        _ => r.error_object().is_some(),
    };
    assert_eq!(is_some, !not.is_empty(), "{member} in {r:?}");
}

#[given("a wire-format facade with no services")]
fn facade(w: &mut World) {
    w.facade = Some(Facade::new());
}

#[when(regex = r#"^I dispatch wire-format method "([^"]*)" with params (.+)$"#)]
fn dispatch(w: &mut World, method: String, params: String) {
    let req = Request::builder(method)
        .params(json_arg(&params))
        .build()
        .unwrap();
    w.response = Some(w.facade.as_ref().unwrap().dispatch(&req));
}

#[when(regex = r#"^I dispatch wire-format method "([^"]*)" with id "([^"]*)" and params (.+)$"#)]
fn dispatch_with_id(w: &mut World, method: String, id: String, params: String) {
    let req = Request::builder(method)
        .id(id.as_str())
        .params(json_arg(&params))
        .build()
        .unwrap();
    let resp = w.facade.as_ref().unwrap().dispatch(&req);
    assert_eq!(
        resp.id,
        req.id.unwrap(),
        "the response keeps the request's id"
    );
    w.response = Some(resp);
}

#[then(expr = "the wire-format response jsonrpc should equal {string}")]
fn response_jsonrpc(w: &mut World, v: String) {
    let wire = serde_json::to_value(w.response.as_ref().unwrap()).unwrap();
    assert_eq!(wire["jsonrpc"], Value::from(v));
}

#[then(expr = "the wire-format response id should equal {string}")]
fn response_id(w: &mut World, id: String) {
    let wire = serde_json::to_value(w.response.as_ref().unwrap()).unwrap();
    assert_eq!(wire["id"], Value::from(id));
}
