//! The fake sid's answers to each op, as sid 0.6.0 gives them: the session's stats and
//! configuration, its one agent, the errors for transcripts and stray prompt responses, and the
//! `user_turn` that starts a turn's script.

use serde_json::{json, Value};

use super::{Sid, Turn};

/// The start of the system prompt the recordings show.
const SYSTEM_PROMPT: &str = "You are sid, a concise coding agent with access to the current workspace mounted at /.\nUse configured tools when they help accomplish the user's request.\nGround your answers in the files and tool results you can access, explain changes you make, and do not claim to have run commands or changed files unless you actually did.";

impl Sid {
    /// What `show_config` answers, and `stats` starts from: the members sid 0.6.0 reports.
    fn config_data(&self) -> Value {
        json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "system_prompt": SYSTEM_PROMPT,
            "temperature": null, "top_p": null, "top_k": null, "stop_sequences": [],
            "thinking": "disabled", "thinking_budget": null, "thinking_adaptive": false, "effort": null,
            "caching_enabled": true,
            "transcript_path": format!("/home/dev/.sid/sessions/{}/transcript.json", self.session_id)})
    }

    /// Answers one decoded request (`Turn::Exit` when the fake sid is to exit).
    pub(super) fn handle(&mut self, rid: &str, req: &Value) -> Turn {
        let op = req["op"].as_str().unwrap_or_default();
        match op {
            "user_turn" => {
                self.emit(json!({"type": "request", "request_id": rid, "op": "user_turn", "text": req["text"]}));
                self.messages += 2;
                return self.turn(rid, req["text"].as_str().unwrap_or_default());
            }
            "insert_system_message" => {
                self.emit(json!({"type": "request", "request_id": rid, "op": "insert_system_message", "text": req["text"]}));
                self.messages += 1;
                self.result(rid, true, None, None);
            }
            "stats" => {
                let turns = self.messages / 2;
                let last = |n: u64| (turns > 0).then_some(n);
                let mut data = self.config_data();
                data["message_count"] = json!(self.messages);
                data["session_spend_micro_cents"] = Value::Null;
                data["spend_used_micro_cents"] = json!(0);
                data["total_input_tokens"] = json!(12 * turns);
                data["total_output_tokens"] = json!(5 * turns);
                data["total_requests"] = json!(turns);
                data["last_turn_input_tokens"] = json!(last(12));
                data["last_turn_output_tokens"] = json!(last(5));
                data["total_cache_creation_tokens"] = json!(0);
                data["total_cache_read_tokens"] = json!(0);
                self.result(rid, true, Some(data), None);
            }
            "show_config" => {
                let data = self.config_data();
                self.result(rid, true, Some(data), None);
            }
            "list_agents" => {
                let data = json!({"agents": [{"id": "build", "display_name": null, "description": null, "enabled": "YES", "current": true}]});
                self.result(rid, true, Some(data), None);
            }
            "show_agent" => {
                let data = json!({"id": "build", "display_name": null, "description": null, "enabled": "YES", "current": true, "model": "claude-sonnet-4-5"});
                self.result(rid, true, Some(data), None);
            }
            "switch_agent" => {
                let agent = req["agent"].as_str().unwrap_or_default();
                if agent == "build" {
                    self.result(rid, true, Some(json!({"current_agent": "build"})), None);
                } else {
                    let msg = format!("(error (phase sid-agent) (code unknown_agent) (message \"requested agent is not defined\") (agent \"{agent}\"))");
                    self.fail(rid, None, &msg);
                }
            }
            "load_transcript" | "save_transcript" => {
                let msg = format!("(error (phase sid-cli) (code transcript_load_failed) (message \"transcript operation failed\") (path \"{}\") (cause \"I/O error: failed to open transcript file\"))", req["path"].as_str().unwrap_or_default());
                self.fail(rid, None, &msg);
            }
            "prompt_response" => {
                self.fail(rid, None, "(error (phase sid-cli) (code unexpected_prompt_response) (message \"prompt_response is only valid while the server is waiting on a prompt\"))");
            }
            "interrupt" | "compact" | "clear" | "set_spend" => self.result(rid, true, None, None),
            "shutdown" => {
                let data = json!({"session_id": self.session_id});
                self.result(rid, true, Some(data), None);
                return Turn::Exit;
            }
            _ => unreachable!("decode admits known ops only"),
        }
        Turn::Done
    }
}
