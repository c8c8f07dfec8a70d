//! Pure wire types and translations: no async, no I/O, no clocks.
//!
//! Everything the gateway says on a socket is shaped here, so it can be tested and benchmarked
//! without one. Payloads the gateway never needs to read (`params`, `result`, `data`) are kept as
//! [`serde_json::value::RawValue`] and copied through verbatim instead of being parsed into a tree.

pub mod authorization;
pub mod dialect;
pub(crate) mod head_writer;
pub mod jsonrpc;
pub mod legacy;
pub(crate) mod protobuf;
pub mod raw;
pub(crate) mod scan;
pub mod sse;
pub mod translate;

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};

/// A constructor was handed values the protocol forbids.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// JSON-RPC names its methods; an empty name cannot be routed.
    #[error("method must be a non-empty string")]
    EmptyMethod,
    /// Only JSON-RPC 2.0 is spoken.
    #[error("jsonrpc must be \"2.0\", got {0:?}")]
    WrongVersion(String),
    /// A JSON-RPC response holds exactly one of `result` and `error`.
    #[error("a response must hold exactly one of result and error")]
    ResultXorError,
    /// `params` must be a structured value (object or array).
    #[error("params must be an object or an array")]
    ParamsNotStructured,
}

/// Deserialises a member that may be present with a `null` value as `Some(null-ish)`, so an
/// absent member (`None` through `#[serde(default)]`) stays distinguishable from `null`.
pub(crate) fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// Appends `s` as a JSON string. Strings that need no escaping (the usual ids and names) are
/// copied as they are; the rest go through serde_json's escaper.
pub(crate) fn write_json_str(out: &mut Vec<u8>, s: &str) {
    if scan::is_plain(s.as_bytes()) {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(out, s).expect("a str always serialises");
    }
}

/// `s` as a JSON string's contents (no quotes), as [`write_json_str`] writes them: borrowed when
/// nothing needs escaping (the usual ids and names), escaped by serde_json otherwise. For a writer
/// that needs a string's length before its bytes (a frame sized exactly): one scan gives both,
/// where a length of its own and then [`write_json_str`] scanned the string twice.
pub(crate) fn json_str_contents(s: &str) -> Cow<'_, str> {
    if scan::is_plain(s.as_bytes()) {
        Cow::Borrowed(s)
    } else {
        let quoted = serde_json::to_string(s).expect("a str always serialises");
        Cow::Owned(quoted[1..quoted.len() - 1].to_owned())
    }
}

/// Parses JSON from bytes, checking their UTF-8 once up front: serde_json then reads a `str` and
/// does not re-check every string and raw value it meets, as it does reading a byte slice.
pub fn from_json<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> serde_json::Result<T> {
    from_json_scanned(bytes, |_| None)
}

/// [`from_json`], read first by `scanned` (a reader over [`scan`]'s members): what it vouches
/// for is taken, anything else (`None`) is serde_json's to accept or refuse, with its own error.
pub(crate) fn from_json_scanned<'a, T: Deserialize<'a>>(
    bytes: &'a [u8],
    scanned: impl FnOnce(&'a str) -> Option<T>,
) -> serde_json::Result<T> {
    match std::str::from_utf8(bytes) {
        Ok(text) => scanned_or_serde(text, scanned),
        Err(e) => Err(serde::de::Error::custom(format_args!(
            "invalid UTF-8 at byte {}",
            e.valid_up_to()
        ))),
    }
}

/// `text` read by `scanned` when it vouches for it, else by serde_json.
pub(crate) fn scanned_or_serde<'a, T: Deserialize<'a>>(
    text: &'a str,
    scanned: impl FnOnce(&'a str) -> Option<T>,
) -> serde_json::Result<T> {
    scanned(text).map_or_else(|| serde_json::from_str(text), Ok)
}
