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

/// Every field an event line can carry; which are required depends on `event`.
#[derive(Deserialize)]
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
        // Anything but a well-formed event line is the derived parser's to judge.
        let f = match serde_json::from_str::<Flat<'_>>(line) {
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
