//! What the fuzz targets (`fuzz/`, see `fuzz/README.md`) found, and a few nasty inputs from their
//! corpora, fed through the same public entry points, so CI exercises those entry points without
//! running a fuzzer. Each test asserts the proper answer (an error, not a panic).
#![forbid(unsafe_code)]

use std::convert::Infallible;
use std::sync::Arc;

use axum::http::StatusCode;
use bytes::Bytes;
use futures::executor::block_on;
use wiregate::config::{Unmapped, DEFAULT_ARTIFACT, DEFAULT_STATUS};
use wiregate::events::domain::{Bridge, EventMap};
use wiregate::events::feed::{Reader, RecentIds};
use wiregate::events::ReplayLog;
use wiregate::http::request_head::{self as h1_head, Parsed};
use wiregate::outbound::h1::{parse_head, Chunked, Error, Framing};
use wiregate::passthrough::raw::{plain_target, Request};
use wiregate::passthrough::{upstream_request, Origin};
use wiregate::wire::dialect::{parse, parse_bounded, Inbound, Message};
use wiregate::wire::jsonrpc::{code, parse_responses, Id, Response};
use wiregate::wire::legacy::{self, LegacyBody, LegacyResponse};
use wiregate::wire::raw::ServerMessage;
use wiregate::wire::translate::{
    legacy_to_request, request_to_legacy, response_to_jsonrpc, response_to_legacy, ErrorTable,
};

// ---- h1_answer: the upstream answer reader -------------------------------------------------

/// Decodes a chunked body that arrives in reads ending at `cuts` (the last one the whole input).
fn chunked(wire: &[u8], cuts: &[usize], limit: usize) -> Result<Option<Vec<u8>>, Error> {
    let mut c = Chunked::default();
    for &end in cuts {
        if c.advance(&wire[..end], limit, StatusCode::OK)? {
            assert!(c.pos <= end);
            return Ok(Some(c.body));
        }
    }
    Ok(None)
}

/// Found by `h1_answer`: a chunk-size line over the 4 KiB bound is refused the same whether it
/// arrives in pieces or in one read.
#[test]
fn a_long_chunk_size_line_is_refused_however_it_arrives() {
    let wire = format!("1;{}\r\nx\r\n0\r\n\r\n", "e".repeat(4178));
    let wire = wire.as_bytes();
    for limit in [0, 1 << 20] {
        for cuts in [
            vec![wire.len()],
            vec![100, 4097, wire.len()],
            vec![4181, wire.len()],
        ] {
            assert!(
                matches!(chunked(wire, &cuts, limit), Err(Error::Malformed(_))),
                "limit {limit}, cuts {cuts:?}"
            );
        }
    }
}

/// A trailer section of exactly the bound is accepted, even when a read ends between its CR and
/// its LF; one byte more is refused either way.
#[test]
fn the_trailer_bound_counts_no_pending_cr() {
    for (len, ok) in [(4096, true), (4097, false)] {
        let trailer = format!("t: {}", "v".repeat(len - 3));
        let wire = format!("1\r\nx\r\n0\r\n{trailer}\r\n\r\nNEXT");
        let wire = wire.as_bytes();
        let cr = wire.len() - "\n\r\nNEXT".len();
        for cuts in [
            vec![wire.len()],
            vec![cr, wire.len()],
            vec![cr - 1, wire.len()],
        ] {
            let got = chunked(wire, &cuts, 1 << 20);
            match ok {
                true => assert_eq!(got.unwrap().as_deref(), Some(&b"x"[..]), "{cuts:?}"),
                false => assert!(matches!(got, Err(Error::Malformed(_))), "{cuts:?}"),
            }
        }
    }
}

#[test]
fn nasty_chunked_bodies_are_errors() {
    for bad in [
        &b"-1\r\n"[..],
        b"0x10\r\n",
        b"+5\r\n",
        b" \r\n",
        b"1\r\nab\r\n",
        b"1\r\nx\n0\r\n\r\n",
        b"\x00\r\n",
        b"10000000000000000\r\n",
    ] {
        let cuts: Vec<usize> = (1..=bad.len()).collect();
        assert!(
            matches!(chunked(bad, &cuts, 1 << 20), Err(Error::Malformed(_))),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    // A size over the limit is refused before any of its bytes arrive.
    assert!(matches!(
        chunked(b"fffffffffffffff\r\n", &[17], 1 << 20),
        Err(Error::TooLarge { .. })
    ));
}

#[test]
fn nasty_answer_heads() {
    // Every prefix of a good head is incomplete, never an error; the head alone parses the same.
    let good = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\n{}";
    let p = parse_head(good).unwrap().expect("complete");
    assert_eq!(
        (p.status, p.framing, p.keep_alive),
        (StatusCode::OK, Framing::Length(2), true)
    );
    assert_eq!(p.len, good.len() - 2);
    for end in 0..p.len {
        assert!(
            matches!(parse_head(&good[..end]), Ok(None)),
            "prefix of {end}"
        );
    }
    // Bare LF line ends are read; a close-delimited body is never kept alive.
    let lf = parse_head(b"HTTP/1.1 502 Bad\nX: y\n\nrest")
        .unwrap()
        .unwrap();
    assert_eq!((lf.framing, lf.keep_alive), (Framing::Close, false));
    assert_eq!(lf.len, b"HTTP/1.1 502 Bad\nX: y\n\n".len());
    // No body for 1xx, 204 and 304, whatever their headers say.
    for status in ["100", "204", "304"] {
        let h = format!("HTTP/1.1 {status} X\r\ntransfer-encoding: chunked\r\n\r\n");
        assert_eq!(
            parse_head(h.as_bytes()).unwrap().unwrap().framing,
            Framing::Empty
        );
    }
    for bad in [
        &b"HTTP/1.1 200 OK\r\ncontent-length: +1\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\ncontent-length: 99999999999999999999999\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 1,1\r\n\r\n",
        b"HTTP/1.1 099 Low\r\n\r\n",
        b"HTTP/1.1 1000 High\r\n\r\n",
        b"HTTP/2 200 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nbad header\r\n\r\n",
    ] {
        assert!(
            matches!(parse_head(bad), Err(Error::Malformed(_))),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    assert!(!matches!(parse_head(b"\r\n\r\n"), Ok(Some(_))));
    let many = format!("HTTP/1.1 200 OK\r\n{}\r\n", "a: b\r\n".repeat(65));
    assert!(matches!(
        parse_head(many.as_bytes()),
        Err(Error::Malformed(_))
    ));
}

// ---- dialect_parse: telling the dialects apart ----------------------------------------------

fn error_code(r: Result<Inbound, Response>) -> i64 {
    let resp = r.expect_err("refused whole");
    assert_eq!(resp.id, Id::Null);
    resp.error_object().expect("an error").code
}

#[test]
fn nasty_bodies_are_refused_whole() {
    for (body, want) in [
        (
            &b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":1}"[..],
            code::PARSE_ERROR,
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"method\":\"\xc3\",\"id\":1}",
            code::PARSE_ERROR,
        ),
        (b"", code::PARSE_ERROR),
        (b"   ", code::PARSE_ERROR),
        (b"[", code::PARSE_ERROR),
        (b"[]", code::INVALID_REQUEST),
        (b" [ ] ", code::INVALID_REQUEST),
        (b"null", code::INVALID_REQUEST),
        (b"\"operation\"", code::INVALID_REQUEST),
        (
            b"{\"jsonrpc\":\"2.0\",\"method\":\"m\"} x",
            code::PARSE_ERROR,
        ),
        (
            b"{\"method\":\"a\",\"method\":\"b\",\"jsonrpc\":\"2.0\"}",
            code::INVALID_REQUEST,
        ),
    ] {
        assert_eq!(
            error_code(parse(body)),
            want,
            "{}",
            String::from_utf8_lossy(body)
        );
    }
    // Nesting far past serde_json's recursion limit (128): refused where a tree is built, kept
    // raw (never recursed into) where it is not; never a stack overflow.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let Ok(Inbound::JsonRpc(Message::Batch(b))) = parse(deep.as_bytes()) else {
        panic!("a batch of one raw member")
    };
    assert!(b.len() == 1 && b[0].is_err());
    let deep = format!("{{\"a\":{}1{}}}", "[".repeat(100_000), "]".repeat(100_000));
    let Ok(Inbound::JsonRpc(Message::Single(Err(e)))) = parse(deep.as_bytes()) else {
        panic!("an unknown member is skipped, however deep")
    };
    assert_eq!(e.error_object().unwrap().code, code::INVALID_REQUEST);
    let deep = format!(
        "{{\"a2a_version\":\"1.0\",\"operation\":\"o\",\"auth\":{{\"a\":{}{}}}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(matches!(
        parse(deep.as_bytes()),
        Ok(Inbound::Legacy(Err(_)))
    ));
}

#[test]
fn an_operation_member_makes_a_legacy_envelope_whatever_it_holds() {
    for body in [
        &br#"{"operation":null}"#[..],
        br#"{"operation":""}"#,
        br#"{"jsonrpc":"2.0","method":"m","id":1,"operation":7}"#,
        br#"{"a2a_version":"1.0","request_id":{},"operation":"x"}"#,
        br#"{"a2a_version":"1.0","operation":"x","params":[]}"#,
        br#"{"a2a_version":"1.0","operation":"x","auth":"Bearer t"}"#,
    ] {
        let Ok(Inbound::Legacy(Err(fault))) = parse(body) else {
            panic!("{} is not a legacy fault", String::from_utf8_lossy(body))
        };
        assert!(!fault.request_id.is_empty());
        assert!([
            legacy::code::VALIDATION_ERROR,
            legacy::code::VERSION_MISMATCH
        ]
        .contains(&fault.error.code.as_str()));
    }
}

#[test]
fn batch_members_are_judged_one_by_one_and_bounded() {
    let body =
        br#"[1, {}, [], {"jsonrpc":"2.0","method":"m","id":[]}, {"jsonrpc":"2.0","method":"m"}]"#;
    let Ok(Inbound::JsonRpc(Message::Batch(b))) = parse(body) else {
        panic!("a batch")
    };
    assert_eq!(b.len(), 5);
    assert!(b[..4]
        .iter()
        .all(|e| e.as_ref().is_err_and(|r| r.error_object().unwrap().code
            == code::INVALID_REQUEST
            && r.id == Id::Null)));
    assert!(b[4].as_ref().is_ok_and(|r| r.is_notification()));
    assert_eq!(error_code(parse_bounded(body, 4)), code::INVALID_REQUEST);
    assert!(
        matches!(parse_bounded(body, 5), Ok(Inbound::JsonRpc(Message::Batch(b))) if b.len() == 5)
    );
}

/// Found by `dialect_parse`: a batch member that is JSON yet cannot be decoded (a lone surrogate
/// escape in a member name, a number out of range) is -32600 inside an accepted batch, not
/// -32700: the body as a whole was read.
#[test]
fn an_undecodable_batch_member_is_an_invalid_request() {
    let body = br#"[{"i\udBBBsion":"3.0","method":"b"},{"jsonrpc":"2.0","method":1e400,"id":1},{"jsonrpc":"2.0","method":"m","id":2}]"#;
    let Ok(Inbound::JsonRpc(Message::Batch(b))) = parse(body) else {
        panic!("the batch is read")
    };
    assert_eq!(b.len(), 3);
    for member in &b[..2] {
        let e = member.as_ref().expect_err("refused");
        assert_eq!(e.id, Id::Null);
        assert_eq!(e.error_object().unwrap().code, code::INVALID_REQUEST);
    }
    assert!(b[2].is_ok());
    // Alone, the same text is a body that cannot be read: -32700.
    assert_eq!(
        error_code(parse(br#"{"i\udBBBsion":"3.0","method":"b"}"#)),
        code::PARSE_ERROR
    );
}

// ---- translate: both ways, ids kept ----------------------------------------------------------

#[test]
fn ids_keep_their_text_through_the_legacy_round_trip() {
    let table = ErrorTable::default();
    for id in [
        "1.50",
        "-0",
        "1e2",
        "123456789012345678901234567890",
        "\"a b\"",
        "null",
    ] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m","params":{{"a":1}}}}"#);
        let Ok(Inbound::JsonRpc(Message::Single(Ok(req)))) = parse(body.as_bytes()) else {
            panic!("{body}")
        };
        let caller = req.id.clone().expect("a call");
        let request_id = caller.as_text().unwrap_or_else(|| "generated".into());
        let legacy = request_to_legacy(req, request_id.clone(), None).unwrap();
        let Ok(Inbound::Legacy(Ok(read))) = parse(&legacy.to_vec()) else {
            panic!("the envelope reads back")
        };
        assert_eq!(read.request_id, request_id);
        let (back, _) = legacy_to_request(read, caller.clone());
        assert_eq!(back.id.as_ref(), Some(&caller));
        // The answer goes back under the caller's id, whatever the upstream echoed.
        let answer: LegacyResponse = serde_json::from_str(
            r#"{"request_id":"someone else","status":"success","data":{"ok":true}}"#,
        )
        .unwrap();
        let wire = response_to_jsonrpc(answer, caller.clone(), &table).to_vec();
        let text = String::from_utf8(wire.clone()).unwrap();
        assert!(text.ends_with(&format!(",\"id\":{id}}}")), "{text}");
        assert_eq!(parse_responses(&wire).unwrap()[0].id, caller);
    }
}

#[test]
fn positional_params_are_refused_and_legacy_errors_survive() {
    let Ok(Inbound::JsonRpc(Message::Single(Ok(req)))) =
        parse(br#"{"jsonrpc":"2.0","id":1,"method":"m","params":[1,2]}"#)
    else {
        panic!()
    };
    assert_eq!(
        request_to_legacy(req, "1".into(), None).unwrap_err().code,
        code::INVALID_PARAMS
    );
    let table = ErrorTable::default();
    for answer in [
        r#"{"status":"error","error":{"code":"","message":""}}"#,
        r#"{"status":"error","error":{"code":"NOT_FOUND","message":"\u0000","details":null}}"#,
        r#"{"status":"error","error":{"code":"QUOTA","message":"m","details":{"legacyCode":1}}}"#,
        r#"{"status":"error","error":{"code":"X","message":"m","details":[{"details":{}}]}}"#,
    ] {
        let resp: LegacyResponse = serde_json::from_str(answer).unwrap();
        let LegacyBody::Error(original) = resp.body.clone() else {
            panic!()
        };
        let rpc = response_to_jsonrpc(resp, Id::Null, &table);
        let read = parse_responses(&rpc.to_vec()).unwrap().remove(0);
        let LegacyBody::Error(back) = response_to_legacy(read, "r".into(), &table).body else {
            panic!("became a success")
        };
        assert_eq!(back, original, "{answer}");
    }
}

// ---- sid_line: one line sid printed -----------------------------------------------------------

#[test]
fn the_fast_and_derived_sid_parsers_agree_on_nasty_lines() {
    for line in [
        r#"{"type":"event","protocol_version":5,"request_id":"r","event":"agent\u005fstart","label":null,"depth":0}"#,
        r#"{"type":"event","protocol_version":5,"request_id":"r","event":"tool_output","depth":"x","tool_name":"t","tool_use_id":"u","stream":"stdout"}"#,
        r#"{"type":"event","type":"event","protocol_version":5,"request_id":"r","event":"info","depth":0,"message":"m"}"#,
        r#"{"type":"event","protocol_version":5,"request_id":"r","event":"info","depth":0,"message":"m","event":"error"}"#,
        r#"{"type":"event","protocol_version":5,"sequence":null,"request_id":"r","event":"agent_start","depth":0}"#,
        r#"{"type":"event","protocol_version":5,"request_id":"r","event":"agent_start","depth":-1}"#,
        r#"{"type":"event","protocol_version":4294967296,"request_id":"r","event":"agent_start","depth":0}"#,
        r#"{"type":"result","protocol_version":5,"request_id":"r","ok":true,"data":[1e400]}"#,
        r#"{"type":"prompt"}"#,
        "\u{feff}{}",
        "",
        "[]",
    ] {
        let fast = ServerMessage::parse(line);
        let derived = serde_json::from_str::<ServerMessage>(line);
        match (&fast, &derived) {
            (Ok(f), Ok(d)) => assert_eq!(f, d, "{line}"),
            (Err(_), Err(_)) => {}
            _ => panic!("{line}: fast {fast:?}, derived {derived:?}"),
        }
    }
}

// ---- event_feed: the domain-event feed reader -----------------------------------------------

/// Reads `body`, cut into pieces at `cuts`, through the feed reader; the frames it queued.
fn feed(body: &[u8], cuts: &[usize], sse: bool) -> Vec<Bytes> {
    feed_capped(
        body,
        cuts,
        sse,
        wiregate::config::Events::default().max_line_bytes,
    )
}

/// [`feed`] with `events.max_line_bytes` at `max`.
fn feed_capped(body: &[u8], cuts: &[usize], sse: bool, max: usize) -> Vec<Bytes> {
    let queue = Arc::new(ReplayLog::new(64));
    let map = EventMap::new(&DEFAULT_STATUS, &DEFAULT_ARTIFACT, Unmapped::Status);
    let mut reader = Reader {
        bridge: Bridge::new(map, queue.clone()),
        last_id: None,
        seen: RecentIds::new(64),
        max_line_bytes: max,
    };
    let mut at = 0;
    let pieces: Vec<Result<Bytes, Infallible>> = cuts
        .iter()
        .chain([&body.len()])
        .map(|&c| {
            let piece = Bytes::copy_from_slice(&body[at..c]);
            at = c;
            Ok(piece)
        })
        .collect();
    block_on(reader.consume(futures::stream::iter(pieces), sse));
    queue.snapshot().iter().map(|s| s.frame().clone()).collect()
}

#[test]
fn nasty_feed_bodies_queue_the_same_frames_however_they_arrive() {
    let sse = "id: 1\r\ndata: {\"event_type\":\"plan.created\",\r\ndata: \"plan_id\":\"P\u{e9}\"}\r\n\r\n\
               : comment\rid: 2\rdata:{\"event_type\":\"x\",\"data\":{\"t\":\"a\\r\\nid: 9\"}}\r\r\
               data: {\"event_id\":\"3\\n4\",\"event_type\":\"y\"}\n\ndata: unterminated";
    let whole = feed(sse.as_bytes(), &[], true);
    assert_eq!(whole.len(), 3, "{whole:?}");
    for f in &whole {
        let text = std::str::from_utf8(f).unwrap();
        assert!(!text.contains('\r') && text.ends_with("\n\n"), "{text:?}");
        assert_eq!(
            text.matches('\n').count(),
            4,
            "event, id, data and a blank line: {text:?}"
        );
    }
    // Split everywhere, the CRLFs and the two-byte é included.
    let cuts: Vec<usize> = (1..sse.len()).collect();
    assert_eq!(feed(sse.as_bytes(), &cuts, true), whole);

    let ndjson = b"{\"event_type\":\"a\"}\r\n\xff\xfe\n{\"event_id\":1,\"event_type\":\"b\"}\n\
                   {\"event_id\":1.0,\"event_type\":\"c\"}\n{\"event_id\":\"1\",\"event_type\":\"d\"}\n\
                   {\"event_type\":\"e\",\"data\":[]}\n  \n{\"event_type\":\"f\"}";
    let whole = feed(ndjson, &[], false);
    assert_eq!(
        whole.len(),
        3,
        "a, b, c (1.0 is not 1); d repeats 1; e is malformed; f unended"
    );
    let cuts: Vec<usize> = (1..ndjson.len()).step_by(3).collect();
    assert_eq!(feed(ndjson, &cuts, false), whole);
}

/// Records over `events.max_line_bytes` (the fuzz target's 256), CRLF-ended among them, are
/// skipped alike however the body is cut: the records around them queue the same frames.
#[test]
fn records_over_the_cap_are_skipped_the_same_however_they_arrive() {
    let long = "x".repeat(300);
    let sse = format!(
        "id: 1\r\ndata: {{\"event_type\":\"plan.created\"}}\r\n\r\n\
         id: 2\r\ndata: {long}\r\n\r\n\
         id: 3\rdata: {{\"event_type\":\"plan.applied\"}}\r\r\
         data: {long}\n\n\
         id: 5\ndata: {{\"event_type\":\"plan.errored\"}}\n\n"
    );
    let whole = feed_capped(sse.as_bytes(), &[], true, 256);
    assert_eq!(whole.len(), 3, "1, 3 and 5: {whole:?}");
    for at in 1..sse.len() {
        assert_eq!(
            feed_capped(sse.as_bytes(), &[at], true, 256),
            whole,
            "cut at {at}"
        );
    }
    let ndjson = format!(
        "{{\"event_id\":1,\"event_type\":\"a\"}}\r\n{long}\n{{\"event_id\":2,\"event_type\":\"b\"}}\n"
    );
    let whole = feed_capped(ndjson.as_bytes(), &[], false, 256);
    assert_eq!(whole.len(), 2, "{whole:?}");
    for at in 1..ndjson.len() {
        assert_eq!(feed_capped(ndjson.as_bytes(), &[at], false, 256), whole);
    }
}

/// Found by `event_feed`: eventsource-stream 0.2.3 panics on an SSE body that starts with a UTF-8
/// BOM (`&string[1..]` on a three-byte character; jpopesculian/eventsource-stream#10), which
/// would end the feed reader's task for good. The reader strips it, even split across chunks.
#[test]
fn an_sse_feed_may_start_with_a_bom() {
    let body = "\u{feff}data: {\"event_type\":\"plan.created\"}\n\n";
    assert_eq!(feed(body.as_bytes(), &[], true).len(), 1);
    assert_eq!(feed(body.as_bytes(), &[1, 2], true).len(), 1);
    let ndjson = "\u{feff}{\"event_type\":\"plan.created\"}\n";
    assert_eq!(feed(ndjson.as_bytes(), &[1], false).len(), 1);
}

// ---- h1_request, passthrough_head: the HTTP/1 loop's request heads and their relay --------

/// The request head parser driven as the HTTP/1 loop drives it, over reads ending at `cuts`: the
/// first answer other than "not whole yet".
fn request_head(wire: &[u8], cuts: &[usize]) -> Parsed {
    for &end in cuts {
        match h1_head::parse(&wire[..end]) {
            Parsed::Partial => continue,
            p => return p,
        }
    }
    Parsed::Partial
}

/// Whole, and byte by byte: the loop must answer both the same.
fn read_both_ways(wire: &[u8]) -> Parsed {
    let whole = h1_head::parse(wire);
    let bytewise: Vec<usize> = (1..=wire.len()).collect();
    let split = request_head(wire, &bytewise);
    assert_eq!(
        format!("{whole:?}"),
        format!("{split:?}"),
        "{}",
        String::from_utf8_lossy(wire)
    );
    whole
}

/// Found by `h1_request`: a request head longer than the loop's bound (`MAX_HEAD`, 16 KiB) goes
/// to hyper however it arrives, in one read or in several; a head of exactly the bound is served
/// either way.
#[test]
fn a_request_head_over_the_bound_is_handed_over_however_it_arrives() {
    let line = |pad: usize| {
        format!(
            "POST /rpc HTTP/1.1\r\nHost: gw\r\nX-Big: {}\r\nContent-Length: 2\r\n\r\n{{}}",
            "a".repeat(pad)
        )
    };
    let fixed = line(0).len() - 2;
    let over = line(h1_head::MAX_HEAD + 1 - fixed);
    let over = over.as_bytes();
    assert!(matches!(h1_head::parse(over), Parsed::Other));
    assert!(matches!(
        request_head(over, &[100, h1_head::MAX_HEAD + 1, over.len()]),
        Parsed::Other
    ));
    let exact = line(h1_head::MAX_HEAD - fixed);
    let exact = exact.as_bytes();
    for cuts in [
        vec![exact.len()],
        vec![100, h1_head::MAX_HEAD - 1, exact.len()],
    ] {
        assert!(
            matches!(request_head(exact, &cuts), Parsed::Head(h) if h.len == h1_head::MAX_HEAD && h.body == 2),
            "{cuts:?}"
        );
    }
}

/// What RFC 9112 §6.3 leaves ambiguous or refuses is never framed by the loop: it goes to hyper,
/// which answers `400` (or frames by chunked and closes).
#[test]
fn request_heads_with_ambiguous_framing_are_handed_over() {
    for text in [
        // TE and CL: request smuggling's classic (rule 3).
        "POST /rpc HTTP/1.1\r\nHost: gw\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST /rpc HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n",
        // A TE not ending in chunked, on a request: 400 (rule 4).
        "POST /rpc HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        // Several lengths, differing or not, or a list (rule 5).
        "POST /rpc HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\nContent-Length: 20\r\n\r\n{}",
        "POST /rpc HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
        "POST /rpc HTTP/1.1\r\nHost: gw\r\nContent-Length: 2, 2\r\n\r\n{}",
        // Not 1*DIGIT, or past usize.
        "POST /rpc HTTP/1.1\r\nHost: gw\r\nContent-Length: +2\r\n\r\n{}",
        "POST /rpc HTTP/1.1\r\nHost: gw\r\nContent-Length: 99999999999999999999999\r\n\r\n{}",
        // Malformed field lines: obs-fold, a bare CR, whitespace before the colon.
        "POST /rpc HTTP/1.1\r\nHost: gw\r\nX-Long: a\r\n b\r\nContent-Length: 2\r\n\r\n{}",
        "POST /rpc HTTP/1.1\r\nHost: gw\rX: 1\r\nContent-Length: 2\r\n\r\n{}",
        "POST /rpc HTTP/1.1\r\nHost : gw\r\nContent-Length: 2\r\n\r\n{}",
    ] {
        assert!(
            matches!(read_both_ways(text.as_bytes()), Parsed::Other),
            "{text}"
        );
    }
}

/// A bare LF ends a line (RFC 9112 §2.2 lets a recipient take it): the head is read as with
/// CR LF, its length framing the body.
#[test]
fn a_request_head_with_bare_lf_is_framed_by_its_length() {
    let text = b"POST /rpc HTTP/1.1\nHost: gw\nContent-Length: 2\n\n{}";
    let Parsed::Head(h) = read_both_ways(text) else {
        panic!("served here");
    };
    assert_eq!((h.len, h.body), (text.len() - 2, 2));
    assert_eq!(&text[h.path], b"/rpc");
}

/// Relays `wire` as the loop does (a head it serves, with a plain target and a whole body) and
/// returns the upstream's head and its header names and values.
fn relayed(wire: &[u8]) -> (String, Vec<(String, String)>) {
    let Parsed::Head(h) = h1_head::parse(wire) else {
        panic!("served here: {}", String::from_utf8_lossy(wire));
    };
    assert!(plain_target(&wire[h.path.clone()]) && wire.len() >= h.len + h.body);
    let req = Request {
        bytes: &wire[..h.len],
        target: h.path.clone(),
        headers: &h.headers,
    };
    let body = &wire[h.len..h.len + h.body];
    let origin = Origin {
        peer: Some("192.0.2.7:5000".parse().unwrap()),
        tls: false,
        edits: None,
    };
    let mut out = Vec::new();
    upstream_request(&mut out, &req, body, "up:9", origin, false);
    assert!(out.ends_with(body));
    let head = &out[..out.len() - body.len()];
    let mut slots = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Request::new(&mut slots);
    assert_eq!(
        parsed.parse(head).unwrap(),
        httparse::Status::Complete(head.len())
    );
    let headers = parsed
        .headers
        .iter()
        .map(|h| {
            (
                h.name.to_ascii_lowercase(),
                String::from_utf8_lossy(h.value).into_owned(),
            )
        })
        .collect();
    (String::from_utf8_lossy(head).into_owned(), headers)
}

/// The relay drops every hop-by-hop header the loop lets through (it takes only `Connection:
/// keep-alive`, but `Keep-Alive`, `TE`, `Trailer`, `Proxy-*` come along) and frames by its own
/// `Content-Length`, never with a `Transfer-Encoding`.
#[test]
fn the_relay_passes_no_hop_by_hop_header_and_one_length() {
    let wire = b"POST /files/up?x=1 HTTP/1.1\r\nHost: gw\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nTrailer: X-Sum\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\nX-End: kept\r\ncontent-length: 2\r\n\r\n{}";
    let (head, headers) = relayed(wire);
    for (n, _) in &headers {
        assert!(
            !wiregate::http::forwarded::is_hop_by_hop_name(n.as_bytes()),
            "{n} crossed:\n{head}"
        );
    }
    let names: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.iter().filter(|n| **n == "content-length").count(), 1);
    assert!(head.starts_with("POST /files/up?x=1 HTTP/1.1\r\nhost: up:9\r\nx-end: kept\r\n"));
    assert!(head.ends_with("content-length: 2\r\n\r\n"), "{head}");
    // No length and no body: none written; a bare-LF head goes out in CR LF.
    let (head, headers) = relayed(b"POST /files/up HTTP/1.1\nHost: gw\nX-End: kept\n\n");
    assert!(
        !headers.iter().any(|(n, _)| n == "content-length"),
        "{head}"
    );
    assert!(!head.replace("\r\n", "").contains('\n'), "{head}");
}

// ---- every seed, the inputs the fuzzers found included ----------------------------------------

/// The files of `fuzz/seeds/<target>/`: the hand-written seeds and, as `found-*`, what the
/// fuzzers found.
fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = format!("{}/fuzz/seeds/{target}", env!("CARGO_MANIFEST_DIR"));
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    out.sort();
    assert!(out.len() >= 5, "{dir} holds {} seeds", out.len());
    out
}

#[test]
fn every_seed_goes_through_its_entry_point() {
    for (name, body) in seeds("dialect_parse").into_iter().chain(seeds("translate")) {
        let whole = parse(&body);
        let bounded = parse_bounded(&body, 1);
        match (&whole, &bounded) {
            (Ok(Inbound::JsonRpc(Message::Batch(b))), Err(e)) if b.len() > 1 => {
                assert_eq!(
                    e.error_object().unwrap().code,
                    code::INVALID_REQUEST,
                    "{name}"
                )
            }
            (Ok(_), Ok(_)) => {}
            (Err(a), Err(b)) => assert_eq!(a.error_object(), b.error_object(), "{name}"),
            _ => panic!("{name}: parse and parse_bounded disagree"),
        }
        if let Ok(answer) = serde_json::from_slice::<LegacyResponse>(&body) {
            let rpc = response_to_jsonrpc(answer, Id::from(1), &ErrorTable::default());
            assert_eq!(
                parse_responses(&rpc.to_vec()).unwrap()[0].id,
                Id::from(1),
                "{name}"
            );
        }
    }
    for (name, line) in seeds("sid_line") {
        let line = String::from_utf8(line).unwrap();
        let fast = ServerMessage::parse(line.trim_end());
        match serde_json::from_str::<ServerMessage>(line.trim_end()) {
            Ok(d) if d.protocol_version() == 5 => assert_eq!(fast.unwrap(), d, "{name}"),
            _ => assert!(fast.is_err(), "{name}"),
        }
    }
    for (name, input) in seeds("h1_answer") {
        let wire = &input[9..];
        if input[0] & 1 == 1 {
            // A chunked body alone: whole and byte by byte alike.
            let whole = chunked(wire, &[wire.len()], 1 << 20).map_err(|e| e.to_string());
            let cuts: Vec<usize> = (1..=wire.len()).collect();
            let split = chunked(wire, &cuts, 1 << 20).map_err(|e| e.to_string());
            assert_eq!(whole, split, "{name}");
        } else if let Ok(Some(head)) = parse_head(wire) {
            assert!(
                head.len <= wire.len() && wire[head.len - 1] == b'\n',
                "{name}"
            );
            if head.framing == Framing::Chunked {
                let body = &wire[head.len..];
                let whole = chunked(body, &[body.len()], 1 << 20).is_ok();
                let cuts: Vec<usize> = (1..=body.len()).step_by(97).chain([body.len()]).collect();
                assert_eq!(whole, chunked(body, &cuts, 1 << 20).is_ok(), "{name}");
            }
        }
    }
    for (name, input) in seeds("h1_request") {
        let wire = &input[8..];
        if let Parsed::Head(h) = read_both_ways(wire) {
            assert!(h.len <= wire.len() && wire[h.len - 1] == b'\n', "{name}");
        }
    }
    for (name, input) in seeds("passthrough_head") {
        let wire = &input[1..];
        if let Parsed::Head(h) = h1_head::parse(wire) {
            if plain_target(&wire[h.path.clone()]) && wire.len() >= h.len + h.body {
                let (head, headers) = relayed(wire);
                assert!(
                    !headers.iter().any(|(n, _)| n == "transfer-encoding"),
                    "{name}: {head}"
                );
            }
        }
    }
    for (name, input) in seeds("event_feed") {
        let (sse, body) = (input[0] & 1 == 1, &input[9..]);
        let cuts: Vec<usize> = (1..body.len()).step_by(7).collect();
        assert_eq!(feed(body, &[], sse), feed(body, &cuts, sse), "{name}");
    }
}

/// Fuzz finding: a float in a legacy error's `details` could come back one ulp off, as serde_json
/// parses floats by default. With its `float_roundtrip` feature every one comes back exactly.
#[test]
fn floats_in_legacy_error_details_come_back_exactly() {
    let table = ErrorTable::default();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let f = f64::from_bits(x);
        if !f.is_finite() {
            continue;
        }
        let body = format!(
            r#"{{"a2a_version":"1.0","request_id":"r","status":"error","error":{{"code":"NOT_FOUND","message":"m","details":{{"x":{}}}}},"timing_ms":1}}"#,
            ryu::Buffer::new().format_finite(f)
        );
        let resp: LegacyResponse = wiregate::wire::from_json(body.as_bytes()).unwrap();
        let rpc = response_to_jsonrpc(resp, Id::from(1), &table);
        let back: serde_json::Value = serde_json::from_slice(&rpc.to_vec()).unwrap();
        let got = back["error"]["data"]["details"]["x"].as_f64().unwrap();
        assert_eq!(got.to_bits(), f.to_bits(), "{f:e}");
    }
}
