//! The domain-event feed reader (`feed::Reader::consume`): a connection's body, NDJSON or SSE,
//! through `DomainEvent` parsing, the event map and the repeat filter into an `ReplayLog`, whose
//! frames are what `GET /events` serves.
//!
//! Input: byte 0 picks SSE or NDJSON (bit 0) and whether unmapped types pass as status updates
//! (bit 1); bytes 1..9 seed the split points; the rest is the body.
//!
//! Asserts, besides "no panic":
//! - the body read whole and read in random pieces queues the same frames and leaves the same
//!   resume point;
//! - every queued frame is one well-formed SSE event: `event:` (a known update name), `id:`,
//!   exactly one `data:` line holding a JSON-RPC 2.0 notification, and a blank line, with no CR
//!   anywhere and no other line;
//! - the resume point, when set, is not empty;
//! - NDJSON: no more events than non-blank lines.
#![no_main]
#![forbid(unsafe_code)]

use std::sync::Arc;

use bytes::Bytes;
use futures::executor::block_on;
use futures::stream;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use wiregate::config::{Unmapped, DEFAULT_ARTIFACT, DEFAULT_STATUS};
use wiregate::events::domain::{Bridge, EventMap};
use wiregate::events::ReplayLog;
use wiregate::events::feed::{Reader, RecentIds};

#[path = "common/split.rs"]
mod split;
use split::cuts;

const REPLAY: usize = 1024;
/// `events.max_line_bytes`, small enough that inputs reach records over it (skipped, whole
/// or split alike).
const MAX_LINE: usize = 256;

fn read(body: &[u8], cuts: &[usize], sse: bool, pass: bool) -> (Vec<Bytes>, Option<String>) {
    let queue = Arc::new(ReplayLog::new(REPLAY));
    let unmapped = if pass {
        Unmapped::Status
    } else {
        Unmapped::Drop
    };
    let map = EventMap::new(&DEFAULT_STATUS, &DEFAULT_ARTIFACT, unmapped);
    let mut reader = Reader {
        bridge: Bridge::new(map, queue.clone()),
        last_id: None,
        seen: RecentIds::new(REPLAY),
        max_line_bytes: MAX_LINE,
    };
    let mut pieces = Vec::new();
    let mut at = 0;
    for &c in cuts {
        pieces.push(Ok::<_, std::convert::Infallible>(Bytes::copy_from_slice(
            &body[at..c],
        )));
        at = c;
    }
    block_on(reader.consume(stream::iter(pieces), sse));
    let frames = queue.snapshot().iter().map(|s| s.frame().clone()).collect();
    (frames, reader.last_id)
}

fn check_frame(frame: &[u8]) -> String {
    let text = std::str::from_utf8(frame).expect("a frame is UTF-8");
    assert!(!text.contains('\r'), "a CR splits an SSE line: {text:?}");
    let body = text
        .strip_suffix("\n\n")
        .unwrap_or_else(|| panic!("unterminated frame {text:?}"));
    let (mut event, mut id, mut data) = (None, None, Vec::new());
    for line in body.split('\n') {
        if let Some(v) = line.strip_prefix("event: ") {
            assert!(event.replace(v).is_none(), "two event lines: {text:?}");
        } else if let Some(v) = line.strip_prefix("id: ") {
            assert!(id.replace(v).is_none(), "two id lines: {text:?}");
        } else if let Some(v) = line.strip_prefix("data: ") {
            data.push(v);
        } else {
            panic!("a stray line {line:?} in {text:?}");
        }
    }
    assert!(
        matches!(
            event,
            Some("TaskStatusUpdateEvent" | "TaskArtifactUpdateEvent")
        ),
        "{text:?}"
    );
    assert_eq!(data.len(), 1, "{text:?}");
    let v: Value = serde_json::from_str(data[0]).expect("data is JSON");
    assert_eq!(v["jsonrpc"], "2.0");
    assert!(
        v["method"].is_string() && v["params"].is_object(),
        "{text:?}"
    );
    id.expect("every frame has an id").to_owned()
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 9 {
        return;
    }
    let (sse, pass) = (data[0] & 1 == 1, data[0] & 2 == 2);
    let seed = u64::from_le_bytes(data[1..9].try_into().unwrap());
    let body = &data[9..];
    // eventsource-stream 0.2.3 panics on an SSE body that starts with a UTF-8 BOM (it slices
    // one byte off a three-byte character; jpopesculian/eventsource-stream#10, unmerged). Until
    // the reader strips the BOM itself, such bodies are left out here; see fuzz/README.md.
    if sse && body.starts_with("\u{feff}".as_bytes()) {
        return;
    }
    let (frames, last_id) = read(body, &[body.len()], sse, pass);
    for f in &frames {
        check_frame(f);
    }
    if !sse {
        let lines = body
            .split(|b| *b == b'\n')
            .filter(|l| !l.trim_ascii().is_empty())
            .count();
        assert!(
            frames.len() <= lines,
            "{} events from {lines} lines",
            frames.len()
        );
    }
    if let Some(id) = &last_id {
        assert!(!id.is_empty());
    }
    let split = read(body, &cuts(body.len(), seed), sse, pass);
    assert_eq!(
        (&frames, &last_id),
        (&split.0, &split.1),
        "whole and split readings differ"
    );
});
