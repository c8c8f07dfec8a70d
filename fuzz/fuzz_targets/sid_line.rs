//! `wire::raw::ServerMessage::parse`, the one-pass reader of a line sid printed (JSONL v5).
//!
//! Asserts, besides "no panic":
//! - the fast path and the derived `Deserialize` agree: both refuse the line, or both read the
//!   same message (what the module promises), except that `parse` also refuses a line of another
//!   protocol version than 5, which the derived parser reads;
//! - a message read, written back out with `Serialize`, reads back equal (`result` data compared
//!   as text, since a float in it may move by an ulp through serde_json's default parser).
#![no_main]
#![forbid(unsafe_code)]

use libfuzzer_sys::fuzz_target;
use wiregate::wire::raw::{ServerMessage, PROTOCOL_VERSION};

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    let fast = ServerMessage::parse(line);
    let derived = serde_json::from_str::<ServerMessage>(line);
    match (&fast, &derived) {
        (Ok(f), Ok(d)) => assert_eq!(f, d, "the two parsers read {line:?} differently"),
        (Err(_), Err(_)) => {}
        (Err(_), Ok(d)) if d.protocol_version() != PROTOCOL_VERSION => {}
        (f, d) => panic!("the parsers disagree on {line:?}: fast {f:?}, derived {d:?}"),
    }
    let Ok(msg) = fast else { return };
    assert_eq!(msg.protocol_version(), PROTOCOL_VERSION);
    let wire = serde_json::to_string(&msg).expect("a message serialises");
    let back =
        ServerMessage::parse(&wire).unwrap_or_else(|e| panic!("{wire} does not read back: {e}"));
    assert_eq!(back.sequence(), msg.sequence());
    assert_eq!(back.request_id(), msg.request_id());
    match (&back, &msg) {
        (ServerMessage::Result(a), ServerMessage::Result(b)) => {
            assert_eq!(
                (a.ok, &a.error, &a.request_id),
                (b.ok, &b.error, &b.request_id)
            );
            assert_eq!(a.data.is_some(), b.data.is_some());
        }
        (a, b) => assert_eq!(a, b, "{wire} reads back differently"),
    }
});
