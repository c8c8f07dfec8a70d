//! An upstream's answer read both ways: `LegacyResponse::from_json` and `Response::from_json`
//! (the member scanner, serde_json for what it leaves) against serde_json alone.
//!
//! Asserts, besides "no panic": for any body, each reads to the same envelope (compared by its
//! `Debug`) or to the same error message as `wiregate::wire::from_json`.
#![no_main]
#![forbid(unsafe_code)]

use libfuzzer_sys::fuzz_target;
use wiregate::wire::from_json;
use wiregate::wire::jsonrpc::Response;
use wiregate::wire::legacy::LegacyResponse;

fuzz_target!(|data: &[u8]| {
    let shown = |r: Result<String, serde_json::Error>| r.map_err(|e| e.to_string());
    assert_eq!(
        shown(LegacyResponse::from_json(data).map(|r| format!("{r:?}"))),
        shown(from_json::<LegacyResponse>(data).map(|r| format!("{r:?}"))),
    );
    assert_eq!(
        shown(Response::from_json(data).map(|r| format!("{r:?}"))),
        shown(from_json::<Response>(data).map(|r| format!("{r:?}"))),
    );
});
