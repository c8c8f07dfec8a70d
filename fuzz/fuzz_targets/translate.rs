//! `wire::translate`, both ways, on requests read from any body and answers read from any
//! upstream body.
//!
//! Asserts, besides "no panic":
//! - JSON-RPC call → legacy envelope → JSON-RPC call keeps the method, params text and id (the
//!   legacy `request_id` is the id's text, and the caller's id comes back exactly);
//!   positional params are refused with -32602 and nothing else is;
//! - legacy envelope → JSON-RPC call → legacy envelope keeps request_id, operation, params and
//!   auth (auth via the `Authorization` header form when it is a bearer token);
//! - a legacy answer → JSON-RPC response (written and read back) → legacy answer keeps its error
//!   (code and message exactly, numbers in details to a few ulps) or its data text exactly, and the response carries the caller's id,
//!   never the upstream's;
//! - a JSON-RPC answer → legacy answer → JSON-RPC → legacy is stable after the first step.
#![no_main]
#![forbid(unsafe_code)]

use libfuzzer_sys::fuzz_target;
use wiregate::wire::dialect::{parse, Inbound, Message};
use wiregate::wire::jsonrpc::{code, parse_responses, Id, Request, Response};
use wiregate::wire::legacy::{Auth, LegacyBody, LegacyError, LegacyRequest, LegacyResponse};
use wiregate::wire::translate::{
    legacy_to_request, request_to_legacy, response_to_jsonrpc, response_to_legacy, ErrorTable,
};

#[path = "common/json.rs"]
mod json;
use json::same_json;

fuzz_target!(|data: &[u8]| {
    let table = ErrorTable::default();
    match parse(data) {
        Ok(Inbound::JsonRpc(Message::Single(Ok(req)))) => rpc_round_trip(req),
        Ok(Inbound::JsonRpc(Message::Batch(b))) => b.into_iter().flatten().for_each(rpc_round_trip),
        Ok(Inbound::Legacy(Ok(req))) => legacy_round_trip(req),
        _ => {}
    }
    // The same bytes as an upstream's answer, in either dialect.
    if let Ok(resp) = serde_json::from_slice::<LegacyResponse>(data) {
        legacy_answer(resp, &table);
    }
    if let Ok(resps) = parse_responses(data) {
        for r in resps {
            rpc_answer(r, &table);
        }
    }
});

fn id_text(id: &Id) -> String {
    serde_json::to_string(id).unwrap()
}

fn rpc_round_trip(req: Request) {
    let id = req.id.clone().unwrap_or(Id::Null);
    let request_id = id.as_text().unwrap_or_else(|| "generated".to_owned());
    let positional = req
        .params
        .as_ref()
        .is_some_and(|p| !p.get().trim_start().starts_with('{'));
    let (method, params) = (
        req.method.clone(),
        req.params.as_ref().map(|p| p.get().to_owned()),
    );
    let legacy = match request_to_legacy(req, request_id.clone(), Some(Auth::bearer("t"))) {
        Ok(l) => l,
        Err(e) => {
            assert!(positional, "refused a call with named params");
            assert_eq!(e.code, code::INVALID_PARAMS);
            return;
        }
    };
    assert!(!positional, "accepted positional params");
    assert_eq!(legacy.request_id, request_id);
    assert_eq!(legacy.operation, method);
    assert_eq!(legacy.params.get(), params.as_deref().unwrap_or("{}"));
    // On the wire and back, as the legacy upstream would read it.
    let wire = legacy.to_vec();
    let Ok(Inbound::Legacy(Ok(read))) = parse(&wire) else {
        panic!(
            "the envelope does not read back: {}",
            String::from_utf8_lossy(&wire)
        )
    };
    let (back, auth) = legacy_to_request(read, id.clone());
    assert_eq!(back.method, method);
    assert_eq!(
        back.params.as_ref().map(|p| p.get()),
        Some(params.as_deref().unwrap_or("{}"))
    );
    assert_eq!(back.id.as_ref().map(id_text), Some(id_text(&id)));
    assert_eq!(
        auth.and_then(|a| a.to_header()).as_deref(),
        Some("Bearer t")
    );
}

fn legacy_round_trip(req: LegacyRequest) {
    let original = req.clone();
    let id = Id::String(req.request_id.clone());
    let (call, auth) = legacy_to_request(req, id.clone());
    assert_eq!(call.id.as_ref(), Some(&id));
    // The call travels as JSON-RPC, the auth object as a header when it is one.
    let wire = serde_json::to_vec(&call).unwrap();
    let Ok(Inbound::JsonRpc(Message::Single(Ok(read)))) = parse(&wire) else {
        panic!(
            "the call does not read back: {}",
            String::from_utf8_lossy(&wire)
        )
    };
    let header = auth.as_ref().and_then(Auth::to_header);
    let auth_back = header.as_deref().and_then(Auth::from_header);
    let rid = read.id.as_ref().and_then(Id::as_text).expect("a string id");
    let back = request_to_legacy(read, rid, auth_back.clone()).expect("named params");
    assert_eq!(back.request_id, original.request_id);
    assert_eq!(back.operation, original.operation);
    assert_eq!(back.params.get(), original.params.get());
    if let Some(a) = &auth_back {
        // A bearer token survives the header form exactly (token trimmed, scheme lower-cased).
        let round = a.to_header().and_then(|h| Auth::from_header(&h));
        assert!(round.as_ref() == Some(a), "auth changed through the header");
    }
}

fn legacy_answer(resp: LegacyResponse, table: &ErrorTable) {
    let caller = Id::String("caller".into());
    let original = resp.body.clone();
    let rpc = response_to_jsonrpc(resp, caller.clone(), table);
    assert_eq!(rpc.id, caller, "the upstream's id leaked");
    let wire = rpc.to_vec();
    assert_eq!(
        wire,
        serde_json::to_vec(&rpc).unwrap(),
        "to_vec differs from Serialize"
    );
    let read = parse_responses(&wire).expect("the response reads back");
    assert_eq!(read.len(), 1);
    let read = read.into_iter().next().unwrap();
    assert_eq!(read.id, caller);
    let back = response_to_legacy(read, "r".into(), table);
    assert_eq!(back.request_id, "r");
    match (original, back.body) {
        (LegacyBody::Error(a), LegacyBody::Error(b)) => assert_same_error(&a, &b),
        (LegacyBody::Success(a), LegacyBody::Success(b)) => {
            let a = a.as_ref().map(|r| r.get()).filter(|t| *t != "null");
            assert_eq!(a, b.as_ref().map(|r| r.get()), "the data changed");
        }
        (a, b) => panic!("the outcome changed: {a:?} became {b:?}"),
    }
}

fn rpc_answer(resp: Response, table: &ErrorTable) {
    let first = response_to_legacy(resp, "r".into(), table);
    // Written and read as the legacy client would read it, then back again.
    let wire = serde_json::to_vec(&first).unwrap();
    let read: LegacyResponse = serde_json::from_slice(&wire).expect("the legacy answer reads back");
    let rpc = response_to_jsonrpc(read, Id::from(1), table);
    assert_eq!(id_text(&rpc.id), "1");
    let second = response_to_legacy(rpc, "r".into(), table);
    match (first.body, second.body) {
        (LegacyBody::Error(mut a), LegacyBody::Error(b)) => {
            // `details: null` reads back as no details.
            a.details = a.details.filter(|d| !d.is_null());
            assert_same_error(&a, &b)
        }
        (LegacyBody::Success(a), LegacyBody::Success(b)) => {
            assert_eq!(a.as_ref().map(|r| r.get()), b.as_ref().map(|r| r.get()))
        }
        (a, b) => panic!("the outcome changed: {a:?} became {b:?}"),
    }
}

/// Code and message exactly, details as JSON (numbers to a few ulps, see `same_json`).
fn assert_same_error(a: &LegacyError, b: &LegacyError) {
    assert_eq!(
        (&a.code, &a.message),
        (&b.code, &b.message),
        "the legacy error changed"
    );
    let same = match (&a.details, &b.details) {
        (Some(x), Some(y)) => same_json(x, y),
        (x, y) => x == y,
    };
    assert!(
        same,
        "the legacy error's details changed: {a:?} became {b:?}"
    );
}
