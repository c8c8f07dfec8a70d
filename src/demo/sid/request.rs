//! The fake sid's requests: the next line of input, and its decoding as sid does it, answering
//! sid's error for a line that is not a request it takes.

use serde_json::{json, Value};

use super::Sid;

/// The ops sid takes, as its error for an unknown op lists them.
const OPS: &str = "`user_turn`, `insert_system_message`, `prompt_response`, `interrupt`, `show_agent`, `list_agents`, `switch_agent`, `compact`, `clear`, `set_spend`, `save_transcript`, `load_transcript`, `stats`, `show_config`, `shutdown`";

impl Sid {
    /// Parses one request line as sid does, or answers its error.
    pub(super) fn decode(&mut self, line: &str) -> Option<(String, Value)> {
        let v: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                self.fail(
                    "",
                    Some("invalid_request_json"),
                    &format!("failed to parse raw request JSON: {e}"),
                );
                return None;
            }
        };
        let rid = v["request_id"].as_str().unwrap_or("").to_owned();
        let missing = |f: &str| format!("failed to decode raw request: missing field `{f}`");
        let Some(version) = v.get("protocol_version") else {
            self.fail(&rid, Some("invalid_request"), &missing("protocol_version"));
            return None;
        };
        if v.get("request_id").is_none() {
            self.fail("", Some("invalid_request"), &missing("request_id"));
            return None;
        }
        let Some(op) = v["op"].as_str().map(str::to_owned) else {
            self.fail(&rid, Some("invalid_request"), &missing("op"));
            return None;
        };
        if !OPS.contains(&format!("`{op}`")) {
            let msg = format!(
                "failed to decode raw request: unknown variant `{op}`, expected one of {OPS}"
            );
            self.fail(&rid, Some("invalid_request"), &msg);
            return None;
        }
        for (needs, field) in [
            ("user_turn", "text"),
            ("insert_system_message", "text"),
            ("prompt_response", "prompt_id"),
            ("prompt_response", "response"),
            ("switch_agent", "agent"),
            ("save_transcript", "path"),
            ("load_transcript", "path"),
        ] {
            if op == needs && v.get(field).is_none() {
                self.fail(&rid, Some("invalid_request"), &missing(field));
                return None;
            }
        }
        if version != &json!(5) {
            self.fail(
                &rid,
                Some("unsupported_protocol_version"),
                &format!("unsupported raw protocol version {version}"),
            );
            return None;
        }
        Some((rid, v))
    }

    /// The next line that is not blank, or `None` at the end of stdin (a socket client's end
    /// waits for the next client).
    pub(super) fn next_line(&mut self) -> Option<String> {
        loop {
            match self.input.recv() {
                Ok(Some(l)) if l.trim().is_empty() => continue,
                Ok(Some(l)) => return Some(l),
                Ok(None) if self.listen => continue,
                Ok(None) | Err(_) => return None,
            }
        }
    }
}
