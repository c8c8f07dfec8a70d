//! Legacy envelope ⇄ JSON-RPC 2.0, both ways, and the error-code table between them.
//!
//! Ids are never taken from an upstream's echo: the caller's own id is handed in and restored.
//! A legacy error travels as `{code: <table>, message, data: {legacyCode, details}}`, so the way
//! back recovers the original code exactly even where the table maps several codes to one.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};

use super::jsonrpc::{code as rpc, ErrorObject, Id, Outcome, Request, Response};
use super::legacy::{
    self, code as lc, Auth, LegacyBody, LegacyError, LegacyRequest, LegacyResponse,
};

/// Legacy error code ⇄ JSON-RPC error code.
#[derive(Clone, Debug)]
pub struct ErrorTable {
    forward: HashMap<String, i64>,
    reverse: HashMap<i64, String>,
}

/// The table from the legacy server's documentation.
pub const DEFAULT_CODES: &[(&str, i64)] = &[
    (lc::NOT_FOUND, -32001),
    (lc::AUTH_ERROR, -32002),
    (lc::FORBIDDEN, -32003),
    (lc::INVALID_STATE, -32004),
    (lc::DUPLICATE, -32005),
    (lc::BUDGET_EXCEEDED, -32006),
    (lc::VERSION_MISMATCH, -32007),
    (lc::PLAN_ERROR, -32008),
    (lc::CONFIGURATION_ERROR, -32009),
    (lc::VALIDATION_ERROR, rpc::INVALID_PARAMS),
    (lc::OPERATION_NOT_FOUND, rpc::METHOD_NOT_FOUND),
    (lc::INTERNAL_ERROR, rpc::INTERNAL_ERROR),
    (lc::UPSTREAM_UNAVAILABLE, rpc::UPSTREAM_UNREACHABLE),
    (lc::UPSTREAM_TIMEOUT, rpc::UPSTREAM_TIMEOUT),
    (lc::UPSTREAM_BAD_RESPONSE, rpc::UPSTREAM_BAD_ENVELOPE),
    (lc::RATE_LIMITED, rpc::RATE_LIMITED),
];

impl Default for ErrorTable {
    fn default() -> Self {
        Self::with_overrides(&BTreeMap::new())
    }
}

impl ErrorTable {
    /// The default table with `overrides` (legacy code → JSON-RPC code) laid over it.
    pub fn with_overrides(overrides: &BTreeMap<String, i64>) -> Self {
        let mut forward: HashMap<String, i64> = DEFAULT_CODES
            .iter()
            .map(|(k, v)| ((*k).to_owned(), *v))
            .collect();
        forward.extend(overrides.iter().map(|(k, v)| (k.clone(), *v)));
        let mut reverse: HashMap<i64, String> = HashMap::new();
        // Defaults first, then overrides, so a configured code wins the reverse direction too.
        for (k, v) in DEFAULT_CODES
            .iter()
            .map(|(k, v)| ((*k).to_owned(), *v))
            .chain(overrides.iter().map(|(k, v)| (k.clone(), *v)))
        {
            reverse.insert(v, k);
        }
        reverse.insert(rpc::PARSE_ERROR, lc::VALIDATION_ERROR.to_owned());
        reverse.insert(rpc::INVALID_REQUEST, lc::VALIDATION_ERROR.to_owned());
        ErrorTable { forward, reverse }
    }

    /// The JSON-RPC code for a legacy code; unknown codes are internal errors.
    pub fn to_jsonrpc(&self, legacy_code: &str) -> i64 {
        self.forward
            .get(legacy_code)
            .copied()
            .unwrap_or(rpc::INTERNAL_ERROR)
    }

    /// The legacy code for a JSON-RPC code; unknown codes are internal errors.
    pub fn to_legacy(&self, code: i64) -> &str {
        self.reverse
            .get(&code)
            .map_or(lc::INTERNAL_ERROR, String::as_str)
    }
}

/// A legacy error as a JSON-RPC error object.
pub fn error_to_jsonrpc(e: &LegacyError, table: &ErrorTable) -> ErrorObject {
    let mut data = Map::new();
    data.insert("legacyCode".into(), Value::from(e.code.clone()));
    if let Some(d) = &e.details {
        data.insert("details".into(), d.clone());
    }
    ErrorObject {
        code: table.to_jsonrpc(&e.code),
        message: e.message.clone(),
        data: Some(Value::Object(data)),
    }
}

/// A JSON-RPC error object as a legacy error; `data.legacyCode` wins over the table.
pub fn error_to_legacy(e: &ErrorObject, table: &ErrorTable) -> LegacyError {
    let data = e.data.as_ref();
    let code = data
        .and_then(|d| d.get("legacyCode"))
        .and_then(Value::as_str)
        .map_or_else(|| table.to_legacy(e.code).to_owned(), str::to_owned);
    let details = match data {
        Some(Value::Object(m)) if m.contains_key("legacyCode") => m.get("details").cloned(),
        other => other.cloned(),
    };
    LegacyError {
        code,
        message: e.message.clone(),
        details,
    }
}

/// A JSON-RPC call as a legacy request, moving its method and params (the proxied call writes the
/// same envelope from its borrowed parts: `legacy::request_bytes`, the params by [`named_params`]).
/// Legacy params are named, so positional (array) params are refused with -32602.
pub fn request_to_legacy(
    req: Request,
    request_id: String,
    auth: Option<Auth>,
) -> Result<LegacyRequest, ErrorObject> {
    let params = match req.params {
        None => super::dialect::empty_object(),
        Some(p) => {
            named_params(&p)?;
            p
        }
    };
    Ok(LegacyRequest {
        a2a_version: legacy::VERSION.into(),
        request_id,
        operation: req.method,
        params,
        auth,
    })
}

/// Whether `params` can go to a legacy upstream: its params are named (an object), so positional
/// (array) params are refused with -32602.
pub fn named_params(params: &serde_json::value::RawValue) -> Result<(), ErrorObject> {
    match params.get().trim_start().starts_with('{') {
        true => Ok(()),
        false => Err(ErrorObject::new(
            rpc::INVALID_PARAMS,
            "Invalid params: the legacy upstream takes named params (an object)",
        )),
    }
}

/// A legacy answer as the JSON-RPC response to the caller's `id`.
pub fn response_to_jsonrpc(resp: LegacyResponse, id: Id, table: &ErrorTable) -> Response {
    match resp.body {
        LegacyBody::Success(Some(data)) => Response::result(id, data),
        LegacyBody::Success(None) => Response::result(id, super::jsonrpc::null_raw()),
        LegacyBody::Error(e) => Response::error(id, error_to_jsonrpc(&e, table)),
    }
}

/// A legacy request as a JSON-RPC call with `id`; its auth object is returned apart, since it
/// travels as an `Authorization` header.
pub fn legacy_to_request(req: LegacyRequest, id: Id) -> (Request, Option<Auth>) {
    (
        Request {
            method: req.operation,
            params: Some(req.params),
            id: Some(id),
        },
        req.auth,
    )
}

/// A JSON-RPC response as the legacy answer to the caller's `request_id`.
pub fn response_to_legacy(
    resp: Response,
    request_id: String,
    table: &ErrorTable,
) -> LegacyResponse {
    match resp.outcome {
        Outcome::Result(r) if r.get() == "null" => LegacyResponse::success(request_id, None),
        Outcome::Result(r) => LegacyResponse::success(request_id, Some(r)),
        Outcome::Error(e) => LegacyResponse::error(request_id, error_to_legacy(&e, table)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_row_of_the_table() {
        let t = ErrorTable::default();
        for (legacy, code) in DEFAULT_CODES {
            assert_eq!(t.to_jsonrpc(legacy), *code, "{legacy}");
            assert_eq!(t.to_legacy(*code), *legacy, "{code}");
        }
        assert_eq!(t.to_jsonrpc("SOMETHING_ELSE"), rpc::INTERNAL_ERROR);
        assert_eq!(t.to_legacy(-1), lc::INTERNAL_ERROR);
    }

    #[test]
    fn overrides_apply_both_ways() {
        let t = ErrorTable::with_overrides(&BTreeMap::from([("QUOTA".to_owned(), -32099)]));
        assert_eq!(t.to_jsonrpc("QUOTA"), -32099);
        assert_eq!(t.to_legacy(-32099), "QUOTA");
    }

    #[test]
    fn unknown_legacy_code_is_kept_in_data() {
        let e = LegacyError::new("WEIRD", "odd");
        let j = error_to_jsonrpc(&e, &ErrorTable::default());
        assert_eq!(j.code, rpc::INTERNAL_ERROR);
        assert_eq!(j.data.unwrap()["legacyCode"], "WEIRD");
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[a-z ]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map("[a-z]{1,5}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn legacy_error_survives_the_round_trip(
            code in prop_oneof![
                prop::sample::select(DEFAULT_CODES.iter().map(|(c, _)| (*c).to_owned()).collect::<Vec<_>>()),
                "[A-Z_]{1,12}",
            ],
            message in ".{0,40}",
            details in prop::option::of(any_json()),
        ) {
            let table = ErrorTable::default();
            let original = LegacyError { code, message, details };
            let resp = LegacyResponse::error("r".into(), original.clone());
            let rpc = response_to_jsonrpc(resp, Id::from(7), &table);
            let wire = serde_json::to_vec(&rpc).unwrap();
            let back: Response = serde_json::from_slice(&wire).unwrap();
            let legacy = response_to_legacy(back, "r".into(), &table);
            match legacy.body {
                LegacyBody::Error(e) => prop_assert_eq!(e, original),
                LegacyBody::Success(_) => prop_assert!(false, "became a success"),
            }
        }
    }
}
