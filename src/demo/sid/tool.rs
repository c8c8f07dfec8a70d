//! The fake sid's `tool` script: a MANUAL bash call, the confirmation prompt it waits at, and the
//! tool's result (its output also printed under sid's own request id with `external`).

use serde_json::json;

use super::{Sid, Turn};

impl Sid {
    /// The `tool` script, `external` printing the call's output as sid's own tool request.
    pub(super) fn tool_turn(&mut self, rid: &str, external: bool) -> Turn {
        let tool_use_id = self.tool_call(rid);
        let Some(answer) = self.confirm_tool(rid) else {
            return Turn::Exit;
        };
        if answer == "yes" && external {
            self.tool_output(&tool_use_id);
        }
        if answer == "yes" {
            self.tool_ran(rid, &tool_use_id);
        } else {
            self.tool_denied(rid, &tool_use_id);
        }
        self.finish_with(
            rid,
            "EndTurn",
            "[tokens: input=24 cache_creation=0 cached_input=0 output=27 turn=$0.0001 total=$0.0004]",
            (12, 7),
        );
        Turn::Done
    }

    /// The model's first response: a few words, then the bash call and its usage. Returns the
    /// call's tool use id.
    fn tool_call(&mut self, rid: &str) -> String {
        self.tools += 1;
        let tool_use_id = format!("toolu_mock_bash_{}", self.tools);
        self.delta(rid, "Let me run ");
        self.delta(rid, "a command.");
        self.event(
            rid,
            "tool_use_start",
            Some("build"),
            0,
            json!({"name": "bash", "tool_use_id": tool_use_id}),
        );
        self.event(
            rid,
            "tool_input_delta",
            Some("build"),
            0,
            json!({"partial_json": "{\"command\": "}),
        );
        self.event(
            rid,
            "tool_input_delta",
            Some("build"),
            0,
            json!({"partial_json": "\"echo hi\"}"}),
        );
        self.event(rid, "tool_use_end", Some("build"), 0, json!({}));
        self.event(rid, "response_finish", Some("build"), 0, json!({}));
        self.event(rid, "info", None, 0, json!({"message": "[tokens: input=12 cache_creation=0 cached_input=0 output=20 turn=$0.0003 total=$0.0003]"}));
        self.usage(rid, (12, 20));
        tool_use_id
    }

    /// Asks whether the call may run, a new prompt each time until the answer is `yes` or `no`,
    /// and returns that answer (`None` at the end of input).
    fn confirm_tool(&mut self, rid: &str) -> Option<String> {
        let answer = loop {
            self.prompts += 1;
            let prompt_id = format!("prompt-{}", self.prompts);
            let message = format!(
                "Tool 'bash' is MANUAL.\n{{\n  \"restart\": false,\n  \"cwd\": \"/home/dev/project\",\n  \"writable_roots\": [\n    \"/home/dev/project\",\n    \"/tmp\",\n    \"/home/dev/.sid/sessions/{}\"\n  ],\n  \"command\": \"echo hi\"\n}}\nAllow this call? [yes/no]: ",
                self.session_id
            );
            self.emit(json!({"type": "prompt", "request_id": rid, "prompt_id": prompt_id, "kind": "confirmation",
                "message": message, "choices": ["yes", "no"]}));
            let response = self.prompt_response(&prompt_id)?;
            match response.1.as_str() {
                "yes" | "no" => {
                    self.emit(json!({"type": "prompt_ack", "request_id": rid, "response_request_id": response.0,
                        "prompt_id": prompt_id, "response": response.1}));
                    break response.1;
                }
                _ => self.event(
                    rid,
                    "info",
                    None,
                    0,
                    json!({"message": "Please answer yes or no."}),
                ),
            }
        };
        Some(answer)
    }

    /// Reads requests until a `prompt_response` to `prompt_id`, answering any other request
    /// `busy` and a response to another prompt `stale_prompt`. Returns the response's request id
    /// and text (`None` at the end of input).
    fn prompt_response(&mut self, prompt_id: &str) -> Option<(String, String)> {
        let response = loop {
            let line = self.next_line()?;
            let Some((prid, req)) = self.decode(&line) else {
                continue;
            };
            if req["op"] != "prompt_response" {
                self.fail(&prid, Some("busy"), "server is waiting for prompt_response");
            } else if req["prompt_id"] != json!(prompt_id) {
                self.fail(
                    &prid,
                    Some("stale_prompt"),
                    "prompt_response does not match the active prompt",
                );
            } else {
                break (
                    prid,
                    req["response"].as_str().unwrap_or_default().to_owned(),
                );
            }
        };
        Some(response)
    }

    /// With `external`, the call's output as sid's own tool request prints it.
    fn tool_output(&mut self, tool_use_id: &str) {
        let tool_rid = format!("sid-tool-{}", self.tools);
        // tool_output has no label or depth, and carries sid's own tool request id.
        self.emit(json!({"type": "event", "request_id": tool_rid, "event": "tool_output", "tool_name": "bash",
            "tool_use_id": tool_use_id, "stream": "stdout", "text": "hi\n"}));
        self.emit(json!({"type": "event", "request_id": tool_rid, "event": "tool_output", "tool_name": "bash",
            "tool_use_id": tool_use_id, "stream": "stderr", "data_b64": "/w=="}));
    }

    /// An allowed call's result, and the words the model ends its turn with.
    fn tool_ran(&mut self, rid: &str, tool_use_id: &str) {
        let label = Some("tool:bash");
        self.event(
            rid,
            "tool_result_start",
            label,
            1,
            json!({"tool_use_id": tool_use_id, "is_error": false}),
        );
        self.event(
            rid,
            "tool_result_text_delta",
            label,
            1,
            json!({"text": "hi"}),
        );
        self.event(rid, "tool_result_end", label, 1, json!({}));
        self.delta(rid, "The tool ");
        self.delta(rid, "finished.");
    }

    /// A denied call's error result, and the words the model ends its turn with.
    fn tool_denied(&mut self, rid: &str, tool_use_id: &str) {
        let label = Some("tool:bash");
        self.event(
            rid,
            "tool_result_start",
            label,
            1,
            json!({"tool_use_id": tool_use_id, "is_error": true}),
        );
        self.event(
            rid,
            "tool_result_text_delta",
            label,
            1,
            json!({"text": "The user denied this tool call."}),
        );
        self.event(rid, "tool_result_end", label, 1, json!({}));
        self.delta(rid, "The tool ");
        self.delta(rid, "was denied.");
    }
}
