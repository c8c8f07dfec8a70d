//! The hot path of reading sid: one server line → [`ServerMessage`] in one pass.
//!
//! The derived `Deserialize` of [`ServerMessage`] is exact but slow for the lines that matter
//! most: an `event` line goes through serde's internal tagging twice and a `flatten`, buffering
//! the line into an intermediate tree three times. Here an event line is read once into a flat
//! struct of every event field and checked per event; other lines (a handful per turn) take
//! the derived path. Both accept and refuse the same lines (tested against every recording).
//!
//! A text delta, most lines of a stream, is handed over as [`DeltaLine`], borrowing its strings
//! from the line (and the text's escaped form as the line wrote it), so reading it allocates
//! nothing.

use std::borrow::Cow;

use serde::de::Error as _;
use serde::Deserialize;

use super::{Event, EventLine, ServerMessage, PROTOCOL_VERSION};
use crate::wire::scan;

/// Which of a turn's artifacts a text delta appends to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeltaArtifact {
    /// The answer (`assistant_text_delta`).
    Response,
    /// The model's thinking (`thinking_delta`).
    Thinking,
}

impl DeltaArtifact {
    /// The artifact's name, the update's `artifact` member.
    pub fn name(self) -> &'static str {
        match self {
            DeltaArtifact::Response => "response",
            DeltaArtifact::Thinking => "thinking",
        }
    }
}

/// Every field an event line can carry; which are required depends on `event`. Strings are
/// borrowed from the line where the scanner read them without an escape.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(Debug, PartialEq))]
struct Flat<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    event: Option<Cow<'a, str>>,
    protocol_version: Option<u32>,
    #[serde(default)]
    sequence: u64,
    #[serde(borrow)]
    request_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    label: Option<Cow<'a, str>>,
    depth: Option<usize>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow)]
    message: Option<Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    tool_use_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    partial_json: Option<Cow<'a, str>>,
    #[serde(borrow)]
    stop_reason: Option<Cow<'a, str>>,
    is_error: Option<bool>,
    #[serde(borrow)]
    tool_name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    stream: Option<Cow<'a, str>>,
    #[serde(borrow)]
    data_b64: Option<Cow<'a, str>>,
    /// `text` as the line wrote it between its quotes, when the scanner read the line.
    #[serde(skip)]
    text_raw: Option<&'a str>,
}

impl<'a> Flat<'a> {
    /// The line read by [`scan::members`]: `Some` only where serde_json's `Flat` would read the
    /// very same fields (members of the wrong type, numbers not written as plain digits and
    /// repeated members are left to it, and so to its errors).
    #[cfg(test)]
    fn scan(line: &'a str) -> Option<Flat<'a>> {
        let mut f = Flat::default();
        Flat::scan_into(line, &mut f).map(|()| f)
    }

    /// The line read by [`scan::members`] into a `Flat` of the caller's (default, and left partly filled
    /// when the answer is `None`): a `Flat` is some 400 bytes, which an `Option` returned and
    /// unwrapped copied twice a line.
    fn scan_into(line: &'a str, f: &mut Flat<'a>) -> Option<()> {
        let mut seen = 0u32;
        scan::members(line, |name, raw, escaped| {
            let bit = match name {
                "type" => 0,
                "event" => 1,
                "protocol_version" => 2,
                "sequence" => 3,
                "request_id" => 4,
                "label" => 5,
                "depth" => 6,
                "text" => 7,
                "message" => 8,
                "name" => 9,
                "tool_use_id" => 10,
                "partial_json" => 11,
                "stop_reason" => 12,
                "is_error" => 13,
                "tool_name" => 14,
                "stream" => 15,
                "data_b64" => 16,
                _ => return Some(()), // ignored, as serde ignores it (the scanner checked it)
            };
            if seen & (1 << bit) != 0 {
                return None;
            }
            seen |= 1 << bit;
            let null = raw == "null";
            let text = || match null {
                true => Some(None),
                false => scan::string(raw, escaped).map(Some),
            };
            let number = || match null {
                true => Some(None),
                false => scan::unsigned(raw).map(Some),
            };
            match bit {
                0 => f.kind = text()?,
                1 => f.event = text()?,
                2 => f.protocol_version = number()?.map(u32::try_from).transpose().ok()?,
                3 => f.sequence = scan::unsigned(raw)?,
                4 => f.request_id = text()?,
                5 => f.label = text()?,
                6 => f.depth = number()?.map(usize::try_from).transpose().ok()?,
                7 => {
                    f.text = text()?;
                    f.text_raw = (!null).then(|| &raw[1..raw.len() - 1]);
                }
                8 => f.message = text()?,
                9 => f.name = text()?,
                10 => f.tool_use_id = text()?,
                11 => f.partial_json = text()?,
                12 => f.stop_reason = text()?,
                13 => {
                    f.is_error = match raw {
                        "true" => Some(true),
                        "false" => Some(false),
                        "null" => None,
                        _ => return None,
                    }
                }
                14 => f.tool_name = text()?,
                15 => f.stream = text()?,
                _ => f.data_b64 = text()?,
            }
            Some(())
        })
    }
}

fn need<T>(v: Option<T>, field: &'static str) -> Result<T, serde_json::Error> {
    v.ok_or_else(|| serde_json::Error::missing_field(field))
}

fn own(v: Option<Cow<'_, str>>) -> Option<String> {
    v.map(Cow::into_owned)
}

fn need_own(v: Option<Cow<'_, str>>, field: &'static str) -> Result<String, serde_json::Error> {
    need(v, field).map(Cow::into_owned)
}

/// A text delta line (`assistant_text_delta`, `thinking_delta`), its strings borrowed from the
/// line where it wrote them without an escape.
#[derive(Clone, Debug, PartialEq)]
pub struct DeltaLine<'a> {
    /// The line's `sequence`.
    pub sequence: u64,
    /// The turn (task) it belongs to.
    pub request_id: Cow<'a, str>,
    /// Which artifact it appends to: the answer or the thinking.
    pub artifact: DeltaArtifact,
    /// `label`.
    pub label: Option<Cow<'a, str>>,
    /// `depth`.
    pub depth: usize,
    /// The text, decoded.
    pub text: Cow<'a, str>,
    /// The text as the line wrote it between its quotes, when the scanner read the line (see
    /// [`crate::model::payload::TextDelta::new`]).
    pub raw_text: Option<&'a str>,
}

impl DeltaLine<'_> {
    /// The same line as a [`ServerMessage`].
    pub fn into_message(self) -> ServerMessage {
        let (label, depth, text) = (own(self.label), self.depth, self.text.into_owned());
        ServerMessage::Event(EventLine {
            protocol_version: PROTOCOL_VERSION,
            sequence: self.sequence,
            request_id: self.request_id.into_owned(),
            event: match self.artifact {
                DeltaArtifact::Response => Event::AssistantTextDelta { label, depth, text },
                DeltaArtifact::Thinking => Event::ThinkingDelta { label, depth, text },
            },
        })
    }
}

/// One line sid printed, as the bridge reads it: a text delta borrowed from the line, or any
/// message.
#[derive(Clone, Debug, PartialEq)]
pub enum ServerLine<'a> {
    /// A text delta.
    Delta(DeltaLine<'a>),
    /// Anything else.
    Message(ServerMessage),
}

impl<'a> ServerLine<'a> {
    /// Reads one line sid printed; a line of another protocol version is refused. Accepts and
    /// refuses exactly the lines [`ServerMessage::parse`] does, with the same errors.
    pub fn parse(line: &'a str) -> Result<Self, serde_json::Error> {
        let read = Self::parse_any_version(line)?;
        let version = match &read {
            ServerLine::Delta(_) => PROTOCOL_VERSION,
            ServerLine::Message(m) => m.protocol_version(),
        };
        match version {
            PROTOCOL_VERSION => Ok(read),
            v => Err(serde_json::Error::custom(format_args!(
                "protocol_version {v}, not {PROTOCOL_VERSION}"
            ))),
        }
    }

    /// The line as a [`ServerMessage`].
    pub fn into_message(self) -> ServerMessage {
        match self {
            ServerLine::Delta(d) => d.into_message(),
            ServerLine::Message(m) => m,
        }
    }

    fn parse_any_version(line: &'a str) -> Result<Self, serde_json::Error> {
        // Anything but a well-formed event line is the derived parser's to judge. The scanner
        // reads the usual line; what it is unsure of goes through serde_json's `Flat`.
        let mut f = Flat::default();
        if Flat::scan_into(line, &mut f).is_none() {
            f = match serde_json::from_str::<Flat<'_>>(line) {
                Ok(f) => f,
                Err(_) => return serde_json::from_str(line).map(ServerLine::Message),
            };
        }
        if f.kind.as_deref() != Some("event") {
            return serde_json::from_str(line).map(ServerLine::Message);
        }
        let artifact = match f.event.as_deref() {
            Some("assistant_text_delta") => DeltaArtifact::Response,
            Some("thinking_delta") => DeltaArtifact::Thinking,
            _ => return event_message(f).map(ServerLine::Message),
        };
        // A delta's fields checked in the order `event_message` checks any event's (`depth`,
        // the event's own fields, `protocol_version`, `request_id`), so a bad delta line's
        // error names the field another event line's would.
        let depth = need(f.depth, "depth")?;
        let text = need(f.text, "text")?;
        let protocol_version = need(f.protocol_version, "protocol_version")?;
        let request_id = need(f.request_id, "request_id")?;
        if protocol_version != PROTOCOL_VERSION {
            return Err(serde_json::Error::custom(format_args!(
                "protocol_version {protocol_version}, not {PROTOCOL_VERSION}"
            )));
        }
        Ok(ServerLine::Delta(DeltaLine {
            sequence: f.sequence,
            request_id,
            artifact,
            label: f.label,
            depth,
            text,
            raw_text: f.text_raw,
        }))
    }
}

impl ServerMessage {
    /// Reads one line sid printed; a line of another protocol version is refused.
    pub fn parse(line: &str) -> Result<ServerMessage, serde_json::Error> {
        ServerLine::parse(line).map(ServerLine::into_message)
    }
}

/// An event line other than a text delta, from its flat fields. Its one caller,
/// [`ServerLine::parse_any_version`], reads the two text deltas (`assistant_text_delta`,
/// `thinking_delta`) itself as a [`DeltaLine`] and hands every other event here, so they have
/// no arm: one would be dead code, and a second reading of a delta's fields to keep in step.
fn event_message(f: Flat<'_>) -> Result<ServerMessage, serde_json::Error> {
    let label = own(f.label);
    let depth = || need(f.depth, "depth");
    let event = match need(f.event, "event")?.as_ref() {
        "agent_start" => Event::AgentStart {
            label,
            depth: depth()?,
        },
        "agent_finish" => Event::AgentFinish {
            label,
            depth: depth()?,
            stop_reason: own(f.stop_reason),
        },
        "info" => Event::Info {
            label,
            depth: depth()?,
            message: need_own(f.message, "message")?,
        },
        "error" => Event::Error {
            label,
            depth: depth()?,
            message: need_own(f.message, "message")?,
        },
        "tool_use_start" => Event::ToolUseStart {
            label,
            depth: depth()?,
            name: need_own(f.name, "name")?,
            tool_use_id: need_own(f.tool_use_id, "tool_use_id")?,
        },
        "tool_input_delta" => Event::ToolInputDelta {
            label,
            depth: depth()?,
            partial_json: need_own(f.partial_json, "partial_json")?,
        },
        "tool_use_end" => Event::ToolUseEnd {
            label,
            depth: depth()?,
        },
        "tool_result_start" => Event::ToolResultStart {
            label,
            depth: depth()?,
            tool_use_id: need_own(f.tool_use_id, "tool_use_id")?,
            is_error: need(f.is_error, "is_error")?,
        },
        "tool_result_text_delta" => Event::ToolResultTextDelta {
            label,
            depth: depth()?,
            text: need_own(f.text, "text")?,
        },
        "tool_result_end" => Event::ToolResultEnd {
            label,
            depth: depth()?,
        },
        "response_finish" => Event::ResponseFinish {
            label,
            depth: depth()?,
        },
        "interrupted" => Event::Interrupted {
            label,
            depth: depth()?,
        },
        "tool_output" => Event::ToolOutput {
            tool_name: need_own(f.tool_name, "tool_name")?,
            tool_use_id: need_own(f.tool_use_id, "tool_use_id")?,
            stream: need_own(f.stream, "stream")?,
            text: own(f.text),
            data_b64: own(f.data_b64),
        },
        other => {
            return Err(serde_json::Error::unknown_variant(
                other,
                &["agent_start", "assistant_text_delta", "…"],
            ))
        }
    };
    Ok(ServerMessage::Event(EventLine {
        protocol_version: need(f.protocol_version, "protocol_version")?,
        sequence: f.sequence,
        request_id: need_own(f.request_id, "request_id")?,
        event,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path and the derived one agree on every recorded line.
    #[test]
    fn agrees_with_the_derived_parser_on_every_recording() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sid-raw-v5");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            for line in text.lines().filter(|l| l.contains(r#""type""#)) {
                let derived: Result<ServerMessage, _> = serde_json::from_str(line);
                if let Ok(d) = derived {
                    assert_eq!(ServerMessage::parse(line).unwrap(), d, "{line}");
                    n += 1;
                }
            }
        }
        assert!(n > 50, "only {n} lines checked");
    }

    /// The scanner reads every recorded line, and reads it as serde_json's `Flat` does.
    #[test]
    fn the_scanner_reads_every_recording_as_serde_does() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sid-raw-v5");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            for line in text.lines().filter(|l| l.contains(r#""event":"#)) {
                let Ok(derived) = serde_json::from_str::<Flat<'_>>(line) else {
                    continue;
                };
                if let Some(mut scanned) = Flat::scan(line) {
                    if let Some(raw) = scanned.text_raw.take() {
                        let decoded: String = serde_json::from_str(&format!("\"{raw}\"")).unwrap();
                        assert_eq!(Some(decoded.as_str()), scanned.text.as_deref(), "{line}");
                    }
                    assert_eq!(scanned, derived, "{line}");
                    n += 1;
                } else {
                    assert!(line.contains("\\u"), "the scanner gave up on {line}");
                }
            }
        }
        assert!(n > 20, "only {n} lines checked");
    }

    proptest::proptest! {
        /// Lines made of an event line's usual members, with values of every type: whenever the
        /// scanner reads one, serde_json reads the same `Flat`.
        #[test]
        fn the_scanner_agrees_with_serde(
            members in proptest::collection::vec(
                (
                    proptest::sample::select(vec!["type", "event", "protocol_version", "sequence",
                        "request_id", "label", "depth", "text", "is_error", "other"]),
                    proptest::sample::select(vec!["\"event\"", "\"assistant_text_delta\"", "5",
                        "0", "-1", "1.5", "4294967296", "18446744073709551616", "null", "true",
                        "\"a\\nb\"", "\"\\u00e9\"", "[1,{}]", "{\"x\":\"y\"}", "\"\"", "01"]),
                ),
                0..10,
            ),
        ) {
            let line = format!(
                "{{{}}}",
                members.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect::<Vec<_>>().join(",")
            );
            let derived = serde_json::from_str::<Flat<'_>>(&line);
            if let Some(mut scanned) = Flat::scan(&line) {
                scanned.text_raw = None;
                proptest::prop_assert_eq!(Some(scanned), derived.ok(), "{}", line);
            }
        }
    }

    /// A text delta is read without copying: its strings borrowed, its text's raw form kept.
    #[test]
    fn a_delta_line_borrows_from_the_line() {
        let line = r#"{"type":"event","protocol_version":5,"sequence":4,"request_id":"t1","event":"thinking_delta","label":"b","depth":0,"text":"a\"b"}"#;
        let ServerLine::Delta(d) = ServerLine::parse(line).unwrap() else {
            panic!("a delta")
        };
        assert!(matches!(d.request_id, Cow::Borrowed("t1")));
        assert_eq!(d.artifact, DeltaArtifact::Thinking);
        assert_eq!(d.text, "a\"b");
        assert_eq!(d.raw_text, Some(r#"a\"b"#));
        assert_eq!(
            d.into_message(),
            serde_json::from_str::<ServerMessage>(line).unwrap()
        );
        // Through serde_json (a `\u` escape): the same line, no raw text.
        let line = line.replace(r#"a\"b"#, r"\u0061");
        let ServerLine::Delta(d) = ServerLine::parse(&line).unwrap() else {
            panic!("a delta")
        };
        assert_eq!((d.text.as_ref(), d.raw_text), ("a", None));
    }

    #[test]
    fn refuses_what_the_derived_parser_refuses() {
        for line in [
            r#"{"type":"event","protocol_version":5,"sequence":1,"request_id":"r","event":"assistant_text_delta","label":null,"depth":0}"#,
            r#"{"type":"event","protocol_version":5,"sequence":1,"request_id":"r","event":"agent_start","label":null}"#,
            r#"{"type":"event","protocol_version":5,"sequence":1,"event":"agent_start","label":null,"depth":0}"#,
            r#"{"type":"event","protocol_version":5,"sequence":1,"request_id":"r","event":"nope","depth":0}"#,
            r#"{"type":"event","protocol_version":5,"sequence":1,"request_id":"r","event":"info","depth":"x","message":"m"}"#,
            r#"{"type":"event","sequence":1,"request_id":"r","event":"agent_start","label":null,"depth":0}"#,
            r#"{"type":"nope","protocol_version":5}"#,
            r#"[1,2]"#,
        ] {
            assert!(
                serde_json::from_str::<ServerMessage>(line).is_err(),
                "the derived parser accepts {line}"
            );
            assert!(ServerMessage::parse(line).is_err(), "{line}");
        }
    }

    #[test]
    fn refuses_lines_of_another_protocol_version() {
        for line in [
            r#"{"type":"event","protocol_version":4,"sequence":1,"request_id":"r","event":"assistant_text_delta","label":null,"depth":0,"text":"t"}"#,
            r#"{"type":"result","protocol_version":6,"sequence":2,"request_id":"r","ok":true}"#,
        ] {
            assert!(ServerMessage::parse(line).is_err(), "{line}");
            assert!(
                ServerMessage::parse(
                    &line
                        .replace(r#""protocol_version":4"#, r#""protocol_version":5"#)
                        .replace(r#""protocol_version":6"#, r#""protocol_version":5"#)
                )
                .is_ok(),
                "{line} as protocol 5"
            );
        }
    }
}
