//! The hot path of reading sid: one server line → [`ServerMessage`] in one pass.
//!
//! The derived `Deserialize` of [`ServerMessage`] is exact but slow for the lines that matter
//! most: an `event` line goes through serde's internal tagging twice and a `flatten`, buffering
//! the line into an intermediate tree three times. Here an event line is read once into a flat
//! struct of every event field and checked per event; other lines (a handful per turn) take
//! the derived path. Both accept and refuse the same lines (tested against every recording).

use std::borrow::Cow;

use serde::de::Error as _;
use serde::Deserialize;

use super::{Event, EventLine, ServerMessage, PROTOCOL_VERSION};
use crate::wire::scan;

/// Every field an event line can carry; which are required depends on `event`.
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
    request_id: Option<String>,
    #[serde(default)]
    label: Option<String>,
    depth: Option<usize>,
    text: Option<String>,
    message: Option<String>,
    name: Option<String>,
    tool_use_id: Option<String>,
    partial_json: Option<String>,
    stop_reason: Option<String>,
    is_error: Option<bool>,
    tool_name: Option<String>,
    stream: Option<String>,
    data_b64: Option<String>,
}

impl<'a> Flat<'a> {
    /// The line read by [`scan::members`]: `Some` only where serde_json's `Flat` would read the
    /// very same fields (members of the wrong type, numbers not written as plain digits and
    /// repeated members are left to it, and so to its errors).
    fn scan(line: &'a str) -> Option<Flat<'a>> {
        let mut f = Flat::default();
        let mut seen = 0u32;
        scan::members(line, |name, raw| {
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
                false => scan::string(raw).map(Some),
            };
            let owned = || text().map(|t| t.map(Cow::into_owned));
            let number = || match null {
                true => Some(None),
                false => scan::unsigned(raw).map(Some),
            };
            match bit {
                0 => f.kind = text()?,
                1 => f.event = text()?,
                2 => f.protocol_version = number()?.map(u32::try_from).transpose().ok()?,
                3 => f.sequence = scan::unsigned(raw)?,
                4 => f.request_id = owned()?,
                5 => f.label = owned()?,
                6 => f.depth = number()?.map(usize::try_from).transpose().ok()?,
                7 => f.text = owned()?,
                8 => f.message = owned()?,
                9 => f.name = owned()?,
                10 => f.tool_use_id = owned()?,
                11 => f.partial_json = owned()?,
                12 => f.stop_reason = owned()?,
                13 => {
                    f.is_error = match raw {
                        "true" => Some(true),
                        "false" => Some(false),
                        "null" => None,
                        _ => return None,
                    }
                }
                14 => f.tool_name = owned()?,
                15 => f.stream = owned()?,
                _ => f.data_b64 = owned()?,
            }
            Some(())
        })?;
        Some(f)
    }
}

fn need<T>(v: Option<T>, field: &'static str) -> Result<T, serde_json::Error> {
    v.ok_or_else(|| serde_json::Error::missing_field(field))
}

impl ServerMessage {
    /// Reads one line sid printed; a line of another protocol version is refused.
    pub fn parse(line: &str) -> Result<ServerMessage, serde_json::Error> {
        let msg = Self::parse_any_version(line)?;
        match msg.protocol_version() {
            PROTOCOL_VERSION => Ok(msg),
            v => Err(serde_json::Error::custom(format_args!(
                "protocol_version {v}, not {PROTOCOL_VERSION}"
            ))),
        }
    }

    fn parse_any_version(line: &str) -> Result<ServerMessage, serde_json::Error> {
        // Anything but a well-formed event line is the derived parser's to judge. The scanner
        // reads the usual line; what it is unsure of goes through serde_json's `Flat`.
        let flat = match Flat::scan(line) {
            Some(f) => Ok(f),
            None => serde_json::from_str::<Flat<'_>>(line),
        };
        let f = match flat {
            Ok(f) if f.kind.as_deref() == Some("event") => f,
            _ => return serde_json::from_str(line),
        };
        let label = f.label;
        let depth = || need(f.depth, "depth");
        let event = match need(f.event, "event")?.as_ref() {
            "agent_start" => Event::AgentStart {
                label,
                depth: depth()?,
            },
            "agent_finish" => Event::AgentFinish {
                label,
                depth: depth()?,
                stop_reason: f.stop_reason,
            },
            "assistant_text_delta" => Event::AssistantTextDelta {
                label,
                depth: depth()?,
                text: need(f.text, "text")?,
            },
            "thinking_delta" => Event::ThinkingDelta {
                label,
                depth: depth()?,
                text: need(f.text, "text")?,
            },
            "info" => Event::Info {
                label,
                depth: depth()?,
                message: need(f.message, "message")?,
            },
            "error" => Event::Error {
                label,
                depth: depth()?,
                message: need(f.message, "message")?,
            },
            "tool_use_start" => Event::ToolUseStart {
                label,
                depth: depth()?,
                name: need(f.name, "name")?,
                tool_use_id: need(f.tool_use_id, "tool_use_id")?,
            },
            "tool_input_delta" => Event::ToolInputDelta {
                label,
                depth: depth()?,
                partial_json: need(f.partial_json, "partial_json")?,
            },
            "tool_use_end" => Event::ToolUseEnd {
                label,
                depth: depth()?,
            },
            "tool_result_start" => Event::ToolResultStart {
                label,
                depth: depth()?,
                tool_use_id: need(f.tool_use_id, "tool_use_id")?,
                is_error: need(f.is_error, "is_error")?,
            },
            "tool_result_text_delta" => Event::ToolResultTextDelta {
                label,
                depth: depth()?,
                text: need(f.text, "text")?,
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
                tool_name: need(f.tool_name, "tool_name")?,
                tool_use_id: need(f.tool_use_id, "tool_use_id")?,
                stream: need(f.stream, "stream")?,
                text: f.text,
                data_b64: f.data_b64,
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
            request_id: need(f.request_id, "request_id")?,
            event,
        }))
    }
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
                if let Some(scanned) = Flat::scan(line) {
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
            if let Some(scanned) = Flat::scan(&line) {
                proptest::prop_assert_eq!(Some(scanned), derived.ok(), "{}", line);
            }
        }
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
