//! Steps for `features/raw_protocol.feature` (seed 004's own checks, and sid's recordings).

use cucumber::{given, then, when};
use serde_json::Value;
use wiregate::wire::raw::{
    AcceptedRequest, ClientLine, Event, EventLine, ResultLine, ServerMessage, PROTOCOL_VERSION,
};

use crate::World;

#[given(regex = r"^the raw (?:client|server) line (\{.*\})$")]
fn raw_line(w: &mut World, line: String) {
    w.raw_line = Some(line);
}

#[when("I parse it as a client request and serialise it again")]
fn client_round_trip(w: &mut World) {
    let line: ClientLine = serde_json::from_str(w.raw_line.as_ref().unwrap()).expect("parses");
    w.reserialised = Some(serde_json::to_value(&line).unwrap());
}

#[when("I parse it as a server message and serialise it again")]
fn server_round_trip(w: &mut World) {
    let msg: ServerMessage = serde_json::from_str(w.raw_line.as_ref().unwrap()).expect("parses");
    w.reserialised = Some(serde_json::to_value(&msg).unwrap());
}

#[when("I parse it as a server message")]
fn server_parse(w: &mut World) {
    w.server_message = Some(serde_json::from_str(w.raw_line.as_ref().unwrap()).expect("parses"));
}

#[when(expr = "I stamp it with sequence {int}")]
fn stamp(w: &mut World, n: u64) {
    w.server_message = Some(w.server_message.take().unwrap().with_sequence(n));
}

#[then(expr = "its sequence is {int}")]
fn sequence_is(w: &mut World, n: u64) {
    assert_eq!(w.server_message.as_ref().unwrap().sequence(), n);
}

#[then("the JSON value is unchanged")]
fn unchanged(w: &mut World) {
    let original: Value = serde_json::from_str(w.raw_line.as_ref().unwrap()).unwrap();
    assert_eq!(w.reserialised.as_ref().unwrap(), &original);
}

#[then(expr = "the serialised line has {string} equal to {string}")]
fn member_equals(w: &mut World, key: String, value: String) {
    assert_eq!(w.reserialised.as_ref().unwrap()[&key], Value::from(value));
}

#[then(expr = "the serialised line has no member {string}")]
fn member_absent(w: &mut World, key: String) {
    let v = w.reserialised.as_ref().unwrap();
    assert!(v.get(&key).is_none(), "{key} in {v}");
}

#[given(expr = "a tool_output event with text {string} and no data_b64")]
fn tool_output(w: &mut World, text: String) {
    w.server_message = Some(ServerMessage::Event(EventLine {
        protocol_version: PROTOCOL_VERSION,
        sequence: 0,
        request_id: "tool-req".into(),
        event: Event::ToolOutput {
            tool_name: "bash".into(),
            tool_use_id: "toolu_1".into(),
            stream: "stdout".into(),
            text: Some(text),
            data_b64: None,
        },
    }));
}

#[given(expr = "an ok result for request {string} with no data")]
fn ok_result(w: &mut World, id: String) {
    w.server_message = Some(ServerMessage::Result(ResultLine {
        protocol_version: PROTOCOL_VERSION,
        sequence: 0,
        request_id: id,
        ok: true,
        data: None,
        error: None,
    }));
}

#[when("I serialise the server message")]
fn serialise_message(w: &mut World) {
    w.reserialised = Some(serde_json::to_value(w.server_message.as_ref().unwrap()).unwrap());
}

#[when("I build the accepted-request marker")]
fn build_marker(w: &mut World) {
    let line: ClientLine = serde_json::from_str(w.raw_line.as_ref().unwrap()).unwrap();
    w.marker = Some(AcceptedRequest::for_request(&line).map(|m| {
        assert_eq!(m.op, line.op, "the marker keeps the request's payload");
        m.request_id
    }));
}

#[then(regex = r#"^a marker (exists|is not built) for request "([^"]*)"$"#)]
fn marker(w: &mut World, exists: String, id: String) {
    let marker = w.marker.clone().unwrap();
    match exists.as_str() {
        "exists" => assert_eq!(marker, Some(id)),
        _ => assert_eq!(marker, None),
    }
}

#[given(expr = "the recorded transcript {string}")]
fn transcript(w: &mut World, file: String) {
    let path = format!(
        "{}/tests/data/sid-raw-v5/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    w.transcript = Some(std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")));
}

#[then("every line parses as a server message and re-serialises to the same JSON value")]
fn every_line(w: &mut World) {
    let text = w.transcript.as_ref().unwrap();
    let mut n = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let original: Value = serde_json::from_str(line).unwrap();
        let msg: ServerMessage =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(serde_json::to_value(&msg).unwrap(), original, "{line}");
        n += 1;
    }
    assert!(n > 0, "the transcript has lines");
}
