//! `wire::dialect::parse` on any body: telling the dialects apart and reading either one.
//!
//! Asserts, besides "no panic":
//! - a body that is not UTF-8 is a -32700; every whole-body error is -32700 or -32600 with id null;
//! - a top-level object with an `operation` member is legacy, any other object JSON-RPC;
//! - an accepted legacy envelope is `"1.0"`, has a non-empty `request_id` and `operation`, object
//!   `params`; its hand-written `to_vec` is byte for byte its `Serialize`, and parses back to the
//!   same envelope (numbers in `auth` to a few ulps: serde_json's default float parsing);
//! - an accepted JSON-RPC call has a non-empty method and structured params, and written back out
//!   it parses to the same method, params text and id (the id's text kept exactly);
//! - every error response serialises (`to_vec` == `Serialize`) and reads back as a response;
//! - `parse_bounded(body, 2)` refuses a batch of more than 2 members whole (-32600) and reads
//!   every other body as `parse` does.
#![no_main]
#![forbid(unsafe_code)]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use wiregate::wire::dialect::{parse, parse_bounded, Inbound, Message};
use wiregate::wire::jsonrpc::{code, parse_responses, Id, Request, Response};
use wiregate::wire::legacy::{self, LegacyRequest};

#[path = "common/json.rs"]
mod json;
use json::same_json;

fuzz_target!(|data: &[u8]| {
    let parsed = parse(data);
    check_bounded(&parsed, parse_bounded(data, 2));
    let text = std::str::from_utf8(data);
    if text.is_err() {
        let e = parsed
            .as_ref()
            .expect_err("a body that is not UTF-8 is refused");
        assert_eq!(e.error_object().unwrap().code, code::PARSE_ERROR);
    }
    // What serde_json makes of the body on its own, for the dialect rule.
    let value: Option<Value> = text.ok().and_then(|t| serde_json::from_str(t).ok());
    match parsed {
        Err(resp) => {
            let e = resp
                .error_object()
                .expect("a whole-body failure is an error response");
            assert!(
                e.code == code::PARSE_ERROR || e.code == code::INVALID_REQUEST,
                "{}",
                e.code
            );
            assert_eq!(resp.id, Id::Null);
            check_response(&resp);
        }
        Ok(Inbound::Legacy(r)) => {
            if let Some(v) = &value {
                let obj = v.as_object().expect("only an object is told to be legacy");
                assert!(obj.contains_key("operation"));
            }
            match r {
                Ok(req) => check_legacy(&req),
                Err(fault) => {
                    assert!(!fault.request_id.is_empty());
                    assert!(
                        fault.error.code == legacy::code::VALIDATION_ERROR
                            || fault.error.code == legacy::code::VERSION_MISMATCH,
                        "{}",
                        fault.error.code
                    );
                }
            }
        }
        Ok(Inbound::JsonRpc(m)) => {
            if let Some(Value::Object(obj)) = &value {
                assert!(
                    !obj.contains_key("operation"),
                    "an operation member is legacy"
                );
            }
            match m {
                Message::Single(e) => {
                    assert!(matches!(value, None | Some(Value::Object(_))));
                    check_entry(e);
                }
                Message::Batch(b) => {
                    assert!(!b.is_empty(), "an empty batch is refused whole");
                    if let Some(Value::Array(a)) = &value {
                        assert_eq!(a.len(), b.len());
                    }
                    b.into_iter().for_each(check_entry);
                }
            }
        }
    }
});

fn check_entry(e: Result<Request, Response>) {
    match e {
        Ok(req) => check_request(&req),
        Err(resp) => {
            assert_eq!(
                resp.error_object().expect("an error").code,
                code::INVALID_REQUEST
            );
            check_response(&resp);
        }
    }
}

fn check_request(req: &Request) {
    assert!(!req.method.is_empty());
    if let Some(p) = &req.params {
        let t = p.get().trim_start();
        assert!(t.starts_with('{') || t.starts_with('['), "{t}");
    }
    let wire = serde_json::to_vec(req).expect("a request serialises");
    let Ok(Inbound::JsonRpc(Message::Single(Ok(back)))) = parse(&wire) else {
        panic!(
            "a request written out does not read back: {}",
            String::from_utf8_lossy(&wire)
        )
    };
    assert_eq!(back.method, req.method);
    assert_eq!(
        back.params.as_ref().map(|p| p.get()),
        req.params.as_ref().map(|p| p.get())
    );
    assert_eq!(back.id, req.id, "the id changed on the way through");
    assert_eq!(
        back.id.as_ref().map(|i| serde_json::to_string(i).unwrap()),
        req.id.as_ref().map(|i| serde_json::to_string(i).unwrap())
    );
}

fn check_legacy(req: &LegacyRequest) {
    assert_eq!(req.a2a_version, legacy::VERSION);
    assert!(!req.request_id.is_empty());
    assert!(!req.operation.is_empty());
    assert!(
        req.params.get().trim_start().starts_with('{'),
        "{}",
        req.params.get()
    );
    let wire = req.to_vec();
    assert_eq!(
        wire,
        serde_json::to_vec(req).unwrap(),
        "to_vec differs from Serialize"
    );
    let Ok(Inbound::Legacy(Ok(back))) = parse(&wire) else {
        panic!(
            "an envelope written out does not read back: {}",
            String::from_utf8_lossy(&wire)
        )
    };
    assert_eq!(back.request_id, req.request_id);
    assert_eq!(back.operation, req.operation);
    assert_eq!(back.params.get(), req.params.get());
    let auth = |r: &LegacyRequest| r.auth.as_ref().map(|a| Value::Object(a.0.clone()));
    let same = match (auth(&back), auth(req)) {
        (Some(a), Some(b)) => same_json(&a, &b),
        (a, b) => a == b,
    };
    assert!(same, "auth changed on the way through");
}

fn check_response(resp: &Response) {
    let wire = resp.to_vec();
    assert_eq!(
        wire,
        serde_json::to_vec(resp).unwrap(),
        "to_vec differs from Serialize"
    );
    let back = parse_responses(&wire).expect("a response reads back");
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].id, resp.id);
    assert_eq!(back[0].error_object(), resp.error_object());
}

/// What a body reads as, without the generated parts (a legacy fault's fresh request_id).
fn shape(r: &Result<Inbound, Response>) -> String {
    match r {
        Err(resp) => format!("error {}", resp.error_object().unwrap().code),
        Ok(Inbound::Legacy(Ok(req))) => format!("legacy {:?} {}", req.operation, req.params.get()),
        Ok(Inbound::Legacy(Err(f))) => format!("legacy fault {:?}", f.error),
        Ok(Inbound::JsonRpc(m)) => format!("{m:?}"),
    }
}

fn check_bounded(parsed: &Result<Inbound, Response>, bounded: Result<Inbound, Response>) {
    match parsed {
        Ok(Inbound::JsonRpc(Message::Batch(b))) if b.len() > 2 => {
            let e = bounded.expect_err("a batch over the bound is refused whole");
            assert_eq!(e.error_object().unwrap().code, code::INVALID_REQUEST);
            assert_eq!(e.id, Id::Null);
        }
        _ => assert_eq!(shape(parsed), shape(&bounded)),
    }
}
