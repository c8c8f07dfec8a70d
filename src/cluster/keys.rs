//! What the replicas keep in Redis: key names, and how a stream entry holds a task update.
//! Pure: no I/O.
//!
//! A context's log is the stream `wiregate:ctx:{id}`; each entry holds the run of updates one
//! write carried (field `e`: one JSON line per update), and its id is `{seq}-0`, where `seq` is
//! the SSE `id:` of its first update (the next ones follow, one apart), so every replica serves
//! the same ids and a client resumes anywhere with `Last-Event-ID`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::model::event::{A2aEvent, EventKind};
use crate::model::payload::{Payload, TextDelta};
use crate::wire::raw::DeltaArtifact;
use crate::wire::scan;

/// Every key starts with this, so a shared Redis can tell the gateway's keys apart.
pub(crate) const PREFIX: &str = "wiregate:";

/// The stream of one context's task updates.
pub(crate) fn context_log(context_id: &str) -> String {
    format!("{PREFIX}ctx:{context_id}")
}

/// The set naming the pace marks of the stream `log` (a key above): one member per replica
/// holding a copy of it, each member the tail of its mark's key ([`PACE_MARKS`]), so an owner
/// that starts reads every mark in one `SORT … BY nosort GET` (see `log::pace`).
pub(crate) fn paces(log: &str) -> String {
    format!("{PREFIX}paces:{log}")
}

/// The member of [`paces`] naming replica `node`'s copy of `log`.
pub(crate) fn pace_member(log: &str, node: &str) -> String {
    format!("{log}|{node}")
}

/// A pace mark's key: how far a replica's copy has read the log (an SSE id), lapsing when
/// that replica stops refreshing it.
pub(crate) fn pace_mark(member: &str) -> String {
    format!("{PREFIX}pace:{member}")
}

/// The channel on which the copies of the stream `log` tell its owner how far they have read
/// (see `log::pace`).
pub(crate) fn pace_channel(log: &str) -> String {
    format!("{PREFIX}pace-ch:{log}")
}

/// The `SORT … GET` pattern of every [`pace_mark`] (Redis puts each member in place of the
/// `*`; a member's own `*` or `->` are not read as patterns).
pub(crate) const PACE_MARKS: &str = "wiregate:pace:*";

/// One task's snapshot and context (a JSON [`StoredTask`]).
pub(crate) fn task(task_id: &str) -> String {
    format!("{PREFIX}task:{task_id}")
}

/// The lease naming the replica that runs a context's sid: `{node_id} {advertise}`.
pub(crate) fn owner(context_id: &str) -> String {
    format!("{PREFIX}owner:{context_id}")
}

/// The set of contexts some replica runs (or ran): each replica's sweep looks through it for
/// contexts whose owner's lease lapsed with tasks still open.
pub(crate) const CONTEXTS: &str = "wiregate:contexts";

/// The sid session id of a context, for a replica taking it over (`--resume`).
pub(crate) fn session(context_id: &str) -> String {
    format!("{PREFIX}session:{context_id}")
}

/// The caller a context belongs to (`kind:id`, with `[auth]`): tenancy, on every replica.
pub(crate) fn tenant(context_id: &str) -> String {
    format!("{PREFIX}tenant:{context_id}")
}

/// The task index: task ids scored by their last change (ms), for ListTasks.
pub(crate) const TASK_INDEX: &str = "wiregate:tasks";

/// The shared stream of translated domain events (`[events]`), written by the one replica
/// holding [`FEED_LEASE`].
pub(crate) const FEED_LOG: &str = "wiregate:feed";

/// The lease of the replica reading the legacy server's event feed.
pub(crate) const FEED_LEASE: &str = "wiregate:feed:reader";

/// The stream entry field holding the updates.
pub(crate) const FIELD: &str = "e";

/// A task update as a stream entry holds it, read back (the id comes from the entry's).
/// A text delta is held as its text (`x`, `e`, `c`) rather than a map, so neither side builds
/// or parses one: it is read back as the same [`Payload::Delta`] the owner streams.
#[derive(Debug, Deserialize)]
struct Entry<'a> {
    /// `s`tatus or `a`rtifact.
    k: &'a str,
    p: Option<String>,
    /// The SSE id, when it is not the entry's sequence (a domain event's own id).
    #[serde(default)]
    i: Option<String>,
    /// The fields, for any update but a text delta.
    #[serde(default)]
    d: Map<String, Value>,
    t: String,
    /// A text delta's artifact: `r`esponse or `t`hinking.
    #[serde(default)]
    x: Option<&'a str>,
    /// A text delta's text, as the JSON string it is written as.
    #[serde(default, borrow)]
    e: Option<&'a RawValue>,
    /// A text delta's `contextId`.
    #[serde(default)]
    c: Option<String>,
}

/// [`Entry`] as written: borrowing the event, so writing copies none of its fields.
#[derive(Serialize)]
struct EntryOut<'a> {
    k: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    p: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    i: Option<&'a str>,
    d: &'a Map<String, Value>,
    t: &'a str,
}

/// Appends the line holding `event`, stored under sequence `seq`, to `out`.
fn encode_into(out: &mut Vec<u8>, seq: u64, event: &A2aEvent) {
    // Compared as digits on the stack: a `String` per update would be the write path's only
    // allocation per delta.
    let own_id =
        !event.event_id.is_empty() && event.event_id.as_str() != itoa::Buffer::new().format(seq);
    let k = match event.event_type {
        EventKind::Status => "s",
        EventKind::Artifact => "a",
    };
    let i = own_id.then_some(event.event_id.as_str());
    let p = event.plan_id.as_deref();
    // Compact JSON holds no raw newline: the lines of a batch split on it.
    match &event.data {
        Payload::Delta(delta) => encode_delta(out, k, p, i, delta, &event.timestamp),
        Payload::Fields(d) => {
            let entry = EntryOut {
                i,
                k,
                p,
                d,
                t: &event.timestamp,
            };
            let _ = serde_json::to_writer(out, &entry);
        }
    }
}

/// A text delta's line: `{"k":…,"p":…,"i":…,"x":…,"c":…,"e":"<text>","t":…}`, its text
/// copied as it is already escaped (no raw newline, as serde_json escapes).
fn encode_delta(
    out: &mut Vec<u8>,
    k: &str,
    p: Option<&str>,
    i: Option<&str>,
    delta: &TextDelta,
    t: &str,
) {
    let string = |out: &mut Vec<u8>, name: &str, v: &str| {
        out.extend_from_slice(b",\"");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
        let _ = serde_json::to_writer(&mut *out, v);
    };
    out.extend_from_slice(b"{\"k\":\"");
    out.extend_from_slice(k.as_bytes());
    out.push(b'"');
    if let Some(p) = p {
        string(out, "p", p);
    }
    if let Some(i) = i {
        string(out, "i", i);
    }
    out.extend_from_slice(match delta.artifact() {
        DeltaArtifact::Response => b",\"x\":\"r\"",
        DeltaArtifact::Thinking => b",\"x\":\"t\"",
    });
    if let Some(c) = delta.context_id() {
        string(out, "c", c);
    }
    out.extend_from_slice(b",\"e\":\"");
    out.extend_from_slice(delta.escaped().as_bytes());
    out.push(b'"');
    string(out, "t", t);
    out.push(b'}');
}

/// The text delta an entry's `x`, `e` (its text as written between the quotes) and `c` hold.
fn decode_delta(x: &str, escaped: &str, c: Option<String>) -> Option<Payload> {
    let artifact = match x {
        "r" => DeltaArtifact::Response,
        "t" => DeltaArtifact::Thinking,
        _ => return None,
    };
    // `TextDelta::new` reads the text only where `escaped` cannot serve as it is (an escape
    // serde_json never writes, `\/`) and, in debug builds, to check `escaped` against it: only
    // then is it decoded. Otherwise the text is passed escaped, which only such a check would
    // read.
    let delta = if escaped.contains("\\/") || (cfg!(debug_assertions) && escaped.contains('\\')) {
        let text: String = serde_json::from_str(&format!("\"{escaped}\"")).ok()?;
        TextDelta::new(artifact, &text, Some(escaped))
    } else {
        TextDelta::new(artifact, escaped, Some(escaped))
    };
    let mut data = Payload::Delta(delta);
    if let Some(c) = c {
        data.set_context(&Arc::from(c));
    }
    Some(data)
}

/// A text delta's line as [`encode_delta`] writes it (its members `k`, `x`, `e`, `t` and the
/// optional `p`, `i`, `c`, all strings, and no text after it), read by the line scanner of sid's
/// deltas ([`scan::members`]) rather than the JSON parser. `None` for any other line (read by
/// [`decode_event`]'s parser instead); the scanner vouches only for what serde_json reads the
/// same (a `\u` escape goes to the parser), so both read the same event from a line.
fn decode_delta_line(seq: u64, line: &str) -> Option<A2aEvent> {
    if !line.ends_with('}') {
        return None;
    }
    // Each member's raw value and whether it holds an escape (as `scan::string` takes them).
    let mut m: [Option<(&str, bool)>; 7] = [None; 7];
    scan::members(line, |name, raw, escaped| {
        let slot = match name {
            "k" => 0,
            "x" => 1,
            "e" => 2,
            "t" => 3,
            "p" => 4,
            "i" => 5,
            "c" => 6,
            _ => return None,
        };
        // Strings only, each once.
        (raw.starts_with('"') && m[slot].replace((raw, escaped)).is_none()).then_some(())
    })?;
    let [k, x, e, t, p, i, c] = m;
    let text = |v: (&str, bool)| scan::string(v.0, v.1).map(Into::into);
    let optional = |v: Option<(&str, bool)>| match v {
        Some(v) => text(v).map(Some),
        None => Some(None),
    };
    let event_type = match k?.0 {
        "\"s\"" => EventKind::Status,
        "\"a\"" => EventKind::Artifact,
        _ => return None,
    };
    let x = x?.0.strip_prefix('"')?.strip_suffix('"')?;
    let escaped = e?.0.strip_prefix('"')?.strip_suffix('"')?;
    Some(A2aEvent {
        event_id: match i {
            Some(i) => text(i)?,
            None => seq.to_string(),
        },
        event_type,
        plan_id: optional(p)?,
        data: decode_delta(x, escaped, optional(c)?)?,
        timestamp: text(t?)?.into(),
    })
}

/// A guess at a text delta's line, with its ids and timestamp: what [`encode_batch`] reserves
/// per update.
const LINE_GUESS: usize = 128;

/// The field's value for a run of consecutive updates (`seq`, event), the first stored under
/// the entry id [`entry_id`]`(first seq)`: one JSON line per update, in order. One entry per
/// written batch rather than per update: Redis parses, stores and sends one entry, and a
/// reader one reply element, for up to a batch of updates.
pub(crate) fn encode_batch<'a>(events: impl IntoIterator<Item = (u64, &'a A2aEvent)>) -> Vec<u8> {
    let events = events.into_iter();
    // One buffer per entry, sized for short deltas so that it rarely grows.
    let mut out = Vec::with_capacity(LINE_GUESS * events.size_hint().0.max(1));
    for (n, (seq, event)) in events.enumerate() {
        if n > 0 {
            out.push(b'\n');
        }
        encode_into(&mut out, seq, event);
    }
    out
}

/// The updates of an entry whose id carries sequence `first`, each with its SSE sequence
/// (`first`, `first + 1`, …); `None` for a line that is not one.
pub(crate) fn decode_batch(
    first: u64,
    value: &[u8],
) -> impl Iterator<Item = (u64, Option<A2aEvent>)> + '_ {
    value
        .split(|b| *b == b'\n')
        .zip(first..)
        .map(|(line, seq)| (seq, decode_event(seq, line)))
}

/// The sequence of the last update in an entry whose id carries `first`.
pub(crate) fn last_in_batch(first: u64, value: &[u8]) -> u64 {
    first + memchr::memchr_iter(b'\n', value).count() as u64
}

/// The update one line holds, with its SSE id (`seq`); `None` for a line that is not one.
pub(crate) fn decode_event(seq: u64, value: &[u8]) -> Option<A2aEvent> {
    // Most lines are text deltas, read without the parser (a third of a replica's CPU went to
    // parsing them).
    std::str::from_utf8(value)
        .ok()
        .and_then(|line| decode_delta_line(seq, line))
        .or_else(|| decode_parsed(seq, value))
}

/// [`decode_event`] with the JSON parser, for any line.
fn decode_parsed(seq: u64, value: &[u8]) -> Option<A2aEvent> {
    let entry: Entry<'_> = serde_json::from_slice(value).ok()?;
    Some(A2aEvent {
        event_id: entry.i.unwrap_or_else(|| seq.to_string()),
        event_type: match entry.k {
            "s" => EventKind::Status,
            "a" => EventKind::Artifact,
            _ => return None,
        },
        plan_id: entry.p,
        data: match (entry.x, entry.e) {
            (Some(x), Some(e)) => {
                decode_delta(x, e.get().strip_prefix('"')?.strip_suffix('"')?, entry.c)?
            }
            _ => entry.d.into(),
        },
        timestamp: entry.t.into(),
    })
}

/// The stream entry id of the update with SSE id `seq`.
pub(crate) fn entry_id(seq: u64) -> String {
    format!("{seq}-0")
}

/// The SSE id an entry id carries (`"42-0"` → 42).
pub(crate) fn seq_of(entry_id: &str) -> Option<u64> {
    entry_id
        .split_once('-')
        .map_or(entry_id, |(ms, _)| ms)
        .parse()
        .ok()
}

/// A task as the replicas share it.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct StoredTask {
    /// The context the task belongs to.
    pub(crate) context: String,
    /// The task model.
    pub(crate) task: crate::model::task::Task,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_pace_mark_is_found_by_the_sort_pattern() {
        let member = pace_member(&context_log("a*b->c"), "node*1");
        assert_eq!(PACE_MARKS.replacen('*', &member, 1), pace_mark(&member));
    }

    fn one(seq: u64, ev: &A2aEvent) -> Vec<u8> {
        encode_batch([(seq, ev)])
    }

    #[test]
    fn an_update_round_trips_through_an_entry_with_its_id() {
        let mut data = Map::new();
        data.insert("state".into(), json!("working"));
        data.insert("contextId".into(), json!("c1"));
        let mut ev = A2aEvent::new(EventKind::Status, Some("t1".into()), data);
        ev.event_id = "42".into();
        let text = one(42, &ev);
        assert!(!String::from_utf8_lossy(&text).contains("\"i\""));
        assert_eq!(decode_event(42, &text), Some(ev.clone()));
        let mut art = ev.clone();
        art.event_type = EventKind::Artifact;
        art.plan_id = None;
        assert_eq!(decode_event(42, &one(42, &art)), Some(art));
        // A domain event keeps the feed's own id.
        let mut domain = ev.clone();
        domain.event_id = "evt-9".into();
        assert_eq!(decode_event(7, &one(7, &domain)), Some(domain));
        assert_eq!(decode_event(1, b"{\"k\":\"x\",\"d\":{},\"t\":\"\"}"), None);
        assert_eq!(decode_event(1, b"not json"), None);
    }

    #[test]
    fn a_text_delta_round_trips_as_a_delta_with_its_text_and_context() {
        for text in ["plain", "two\nlines, a \"quote\" and a \\ and é"] {
            for artifact in [DeltaArtifact::Response, DeltaArtifact::Thinking] {
                let mut data = Payload::Delta(TextDelta::new(artifact, text, None));
                let mut ev = A2aEvent::new(EventKind::Artifact, Some("t1".into()), data.clone());
                ev.event_id = "5".into();
                let line = one(5, &ev);
                assert!(
                    !line.contains(&b'\n'),
                    "one line: {}",
                    String::from_utf8_lossy(&line)
                );
                let back = decode_event(5, &line).unwrap();
                assert!(matches!(back.data, Payload::Delta(_)));
                assert_eq!(back, ev);
                data.set_context(&Arc::from("ctx-1"));
                ev.data = data;
                let back = decode_event(5, &one(5, &ev)).unwrap();
                assert_eq!(back.data.fields()["contextId"], json!("ctx-1"));
                assert_eq!(back.data.fields()["text"], json!(text));
                assert_eq!(back, ev);
            }
        }
        // Read back through a batch with another update beside it, and with its own id.
        let mut status = Map::new();
        status.insert("state".into(), json!("working"));
        let mut a = A2aEvent::new(EventKind::Status, Some("t1".into()), status);
        a.event_id = "8".into();
        let mut b = A2aEvent::new(
            EventKind::Artifact,
            None,
            Payload::Delta(TextDelta::new(DeltaArtifact::Response, "x", None)),
        );
        b.event_id = "own".into();
        let value = encode_batch([(8, &a), (9, &b)]);
        let back: Vec<_> = decode_batch(8, &value).collect();
        assert_eq!(back, vec![(8, Some(a)), (9, Some(b))]);
    }

    #[test]
    fn a_text_delta_line_reads_the_same_without_the_parser_or_goes_to_it() {
        let texts = [
            "plain",
            "two\nlines, a \"quote\", a \\ and é",
            "a/b \\/ \t",
            "\u{1}ctl",
        ];
        let mut read_fast = 0;
        for text in texts {
            for (plan, own_id, ctx) in [
                (Some("t1"), None, None),
                (None, Some("evt-\"7\""), Some("ctx-1")),
                (Some("t\\2"), Some("x"), Some("c\"2")),
            ] {
                let mut data = Payload::Delta(TextDelta::new(DeltaArtifact::Thinking, text, None));
                if let Some(c) = ctx {
                    data.set_context(&Arc::from(c));
                }
                let mut ev = A2aEvent::new(EventKind::Artifact, plan.map(Into::into), data);
                ev.event_id = own_id.unwrap_or("9").into();
                let line = one(9, &ev);
                let parsed = decode_parsed(9, &line);
                assert_eq!(parsed.as_ref(), Some(&ev));
                let fast = decode_delta_line(9, std::str::from_utf8(&line).unwrap());
                if let Some(fast) = fast {
                    assert_eq!(Some(fast), parsed, "{}", String::from_utf8_lossy(&line));
                    read_fast += 1;
                }
                assert_eq!(decode_event(9, &line), parsed);
            }
        }
        // All but the text with a control character (written as `\u0001`).
        assert_eq!(read_fast, 9);
        for (line, parsed) in [
            (r#"{"k":"a","x":"r","e":"ok","t":"\u0041"}"#, true),
            (r#"{"k":"a","x":"r","e":"bad \q","t":"now"}"#, false),
            (r#"{"k":"a","x":"r","e":"ok","t":"now"} "#, true),
            (r#"{"k":"a","x":"r","e":"ok","t":"now"}x"#, false),
            (r#"{"k":"a","x":"r","e":"cut"#, false),
            (r#"{"k":"a","x":"r","e":"ok","t":"now\"}"#, false),
        ] {
            assert_eq!(decode_delta_line(3, line), None, "{line}");
            assert_eq!(decode_event(3, line.as_bytes()).is_some(), parsed, "{line}");
        }
    }

    #[test]
    fn a_batch_entry_holds_consecutive_updates_split_back_with_their_ids() {
        let mut data = Map::new();
        // A newline inside a value is escaped: it does not split the batch.
        data.insert("text".into(), json!("two\nlines"));
        let mut evs = Vec::new();
        for seq in 10..13 {
            let mut ev = A2aEvent::new(EventKind::Artifact, Some("t1".into()), data.clone());
            ev.event_id = seq.to_string();
            evs.push(ev);
        }
        evs[1].event_id = "evt-own".into();
        let value = encode_batch(evs.iter().enumerate().map(|(i, e)| (10 + i as u64, e)));
        assert_eq!(last_in_batch(10, &value), 12);
        let back: Vec<(u64, Option<A2aEvent>)> = decode_batch(10, &value).collect();
        let want: Vec<(u64, Option<A2aEvent>)> =
            (10..).zip(evs.iter().cloned().map(Some)).collect();
        assert_eq!(back, want);
        assert_eq!(last_in_batch(5, &one(5, &evs[0])), 5);
    }

    #[test]
    fn entry_ids_carry_the_sse_id() {
        assert_eq!(entry_id(7), "7-0");
        assert_eq!(seq_of("7-0"), Some(7));
        assert_eq!(seq_of("7"), Some(7));
        assert_eq!(seq_of("x-0"), None);
    }
}
