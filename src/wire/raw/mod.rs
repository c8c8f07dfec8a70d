//! `sid --raw` JSONL protocol, version 5: our own types for sid's wire format.
//!
//! Every line either side writes is one JSON object. Client lines carry `protocol_version`,
//! `request_id` and an `op`; server lines carry `type`, `protocol_version` and a `sequence` that
//! counts every message of the sid process (absent → 0). Optional members are omitted exactly
//! where sid omits them, so a recorded line re-serialises to the same JSON value.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version these types speak.
pub const PROTOCOL_VERSION: u32 = 5;

/// A client request line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClientLine {
    /// Always [`PROTOCOL_VERSION`] when we write it.
    pub protocol_version: u32,
    /// Chosen by the client; results and events echo it.
    pub request_id: String,
    /// What is asked.
    #[serde(flatten)]
    pub op: Op,
}

impl ClientLine {
    /// A version-5 request.
    pub fn new(request_id: impl Into<String>, op: Op) -> Self {
        ClientLine {
            protocol_version: PROTOCOL_VERSION,
            request_id: request_id.into(),
            op,
        }
    }
}

/// The 15 request operations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// A user turn for the agent.
    UserTurn {
        /// What the user says.
        text: String,
    },
    /// A system message added to the transcript.
    InsertSystemMessage {
        /// The message.
        text: String,
    },
    /// The answer to an open prompt.
    PromptResponse {
        /// Which prompt.
        prompt_id: String,
        /// The chosen answer.
        response: String,
    },
    /// Stop the streaming request (mid-turn only over `--listen`).
    Interrupt,
    /// The current agent.
    ShowAgent,
    /// Configured agents.
    ListAgents,
    /// Switch agents.
    SwitchAgent {
        /// Agent id.
        agent: String,
    },
    /// Compact the session into a child session.
    Compact,
    /// Clear the transcript.
    Clear,
    /// Set or clear the spend limit.
    SetSpend {
        /// Dollars, or `null` to clear.
        dollars: Option<f64>,
    },
    /// Save the transcript to a path on sid's host.
    SaveTranscript {
        /// Destination.
        path: String,
    },
    /// Load a transcript from a path on sid's host.
    LoadTranscript {
        /// Source.
        path: String,
    },
    /// Session statistics.
    Stats,
    /// Effective configuration.
    ShowConfig,
    /// Stop sid.
    Shutdown,
}

impl Op {
    /// The op's wire name.
    pub fn name(&self) -> &'static str {
        match self {
            Op::UserTurn { .. } => "user_turn",
            Op::InsertSystemMessage { .. } => "insert_system_message",
            Op::PromptResponse { .. } => "prompt_response",
            Op::Interrupt => "interrupt",
            Op::ShowAgent => "show_agent",
            Op::ListAgents => "list_agents",
            Op::SwitchAgent { .. } => "switch_agent",
            Op::Compact => "compact",
            Op::Clear => "clear",
            Op::SetSpend { .. } => "set_spend",
            Op::SaveTranscript { .. } => "save_transcript",
            Op::LoadTranscript { .. } => "load_transcript",
            Op::Stats => "stats",
            Op::ShowConfig => "show_config",
            Op::Shutdown => "shutdown",
        }
    }
}

mod parse;

pub use parse::{DeltaArtifact, DeltaLine, ServerLine};

/// The 7 server message types.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMessage {
    /// First line of every process or connection.
    Hello(Hello),
    /// End of a `--listen` history replay; not part of the history itself.
    ReplayComplete(ReplayComplete),
    /// Echo of an accepted `user_turn` or `insert_system_message`.
    Request(AcceptedRequest),
    /// A streaming event of a request.
    Event(EventLine),
    /// A question that needs a `prompt_response`.
    Prompt(Prompt),
    /// A prompt was answered.
    PromptAck(PromptAck),
    /// The terminal answer to a request.
    Result(ResultLine),
}

impl ServerMessage {
    /// The message's `sequence`.
    pub fn sequence(&self) -> u64 {
        match self {
            ServerMessage::Hello(m) => m.sequence,
            ServerMessage::ReplayComplete(m) => m.sequence,
            ServerMessage::Request(m) => m.sequence,
            ServerMessage::Event(m) => m.sequence,
            ServerMessage::Prompt(m) => m.sequence,
            ServerMessage::PromptAck(m) => m.sequence,
            ServerMessage::Result(m) => m.sequence,
        }
    }

    /// The message's `protocol_version`.
    pub fn protocol_version(&self) -> u32 {
        match self {
            ServerMessage::Hello(m) => m.protocol_version,
            ServerMessage::ReplayComplete(m) => m.protocol_version,
            ServerMessage::Request(m) => m.protocol_version,
            ServerMessage::Event(m) => m.protocol_version,
            ServerMessage::Prompt(m) => m.protocol_version,
            ServerMessage::PromptAck(m) => m.protocol_version,
            ServerMessage::Result(m) => m.protocol_version,
        }
    }

    /// The same message with `sequence` replaced.
    pub fn with_sequence(mut self, sequence: u64) -> Self {
        let slot = match &mut self {
            ServerMessage::Hello(m) => &mut m.sequence,
            ServerMessage::ReplayComplete(m) => &mut m.sequence,
            ServerMessage::Request(m) => &mut m.sequence,
            ServerMessage::Event(m) => &mut m.sequence,
            ServerMessage::Prompt(m) => &mut m.sequence,
            ServerMessage::PromptAck(m) => &mut m.sequence,
            ServerMessage::Result(m) => &mut m.sequence,
        };
        *slot = sequence;
        self
    }

    /// The request id the message belongs to, when it has one.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            ServerMessage::Hello(_) | ServerMessage::ReplayComplete(_) => None,
            ServerMessage::Request(m) => Some(&m.request_id),
            ServerMessage::Event(m) => Some(&m.request_id),
            ServerMessage::Prompt(m) => Some(&m.request_id),
            ServerMessage::PromptAck(m) => Some(&m.request_id),
            ServerMessage::Result(m) => Some(&m.request_id),
        }
    }
}

/// `hello`: the session sid serves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Server protocol version.
    pub protocol_version: u32,
    /// Message counter.
    #[serde(default)]
    pub sequence: u64,
    /// Session id.
    pub session_id: String,
    /// Session directory.
    pub session_dir: String,
    /// Workspace root.
    pub workspace_root: String,
    /// Active agent.
    pub current_agent: String,
    /// Active model.
    pub model: String,
    /// Whether the session was resumed from disk.
    pub resumed: bool,
    /// Whether the startup agent needs confirmation.
    pub startup_confirmation_required: bool,
    /// Whether sandboxing is available.
    pub sandbox_available: bool,
}

/// `replay_complete`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplayComplete {
    /// Server protocol version.
    pub protocol_version: u32,
    /// Always 0 in practice: the marker is outside the history.
    #[serde(default)]
    pub sequence: u64,
}

/// `request`: an accepted transcript-affecting request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AcceptedRequest {
    /// Server protocol version.
    pub protocol_version: u32,
    /// Message counter.
    #[serde(default)]
    pub sequence: u64,
    /// The client's request id.
    pub request_id: String,
    /// The accepted op.
    #[serde(flatten)]
    pub op: Op,
}

impl AcceptedRequest {
    /// The marker sid emits for a request: only `user_turn` and `insert_system_message` get one.
    pub fn for_request(line: &ClientLine) -> Option<Self> {
        match line.op {
            Op::UserTurn { .. } | Op::InsertSystemMessage { .. } => Some(AcceptedRequest {
                protocol_version: PROTOCOL_VERSION,
                sequence: 0,
                request_id: line.request_id.clone(),
                op: line.op.clone(),
            }),
            _ => None,
        }
    }
}

/// `event`: a streaming event of a request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventLine {
    /// Server protocol version.
    pub protocol_version: u32,
    /// Message counter.
    #[serde(default)]
    pub sequence: u64,
    /// The request — for `tool_output`, sid's internal tool request, not the client's.
    pub request_id: String,
    /// The event.
    #[serde(flatten)]
    pub event: Event,
}

/// The 14 events.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The agent's stream started.
    AgentStart {
        /// Stream label.
        label: Option<String>,
        /// Nesting depth.
        depth: usize,
    },
    /// The agent's stream finished.
    AgentFinish {
        /// Stream label.
        label: Option<String>,
        /// Nesting depth.
        depth: usize,
        /// Why it stopped (`"EndTurn"`, …).
        stop_reason: Option<String>,
    },
    /// Assistant text.
    AssistantTextDelta {
        /// Stream label.
        label: Option<String>,
        /// Nesting depth.
        depth: usize,
        /// The chunk.
        text: String,
    },
    /// Thinking text.
    ThinkingDelta {
        /// Stream label.
        label: Option<String>,
        /// Nesting depth.
        depth: usize,
        /// The chunk.
        text: String,
    },
    /// Informational line.
    Info {
        /// Stream label.
        label: Option<String>,
        /// Nesting depth.
        depth: usize,
        /// The text.
        message: String,
    },
    /// Error line; a turn that carries one has failed whatever its result says.
    Error {
        /// Stream label.
        label: Option<String>,
        /// Nesting depth.
        depth: usize,
        /// The text.
        message: String,
    },
    /// A tool call began.
    ToolUseStart {
        /// Stream label.
        label: Option<String>,
        /// Nesting depth.
        depth: usize,
        /// Tool name.
        name: String,
        /// Tool-use id, used to route later tool output.
        tool_use_id: String,
    },
    /// Tool input JSON chunk.
    ToolInputDelta {
        /// Stream label.
        label: Option<String>,
        /// Nesting depth.
        depth: usize,
        /// Partial JSON.
        partial_json: String,
    },
    /// The tool call's input is complete.
    ToolUseEnd {
        /// Stream label.
        label: Option<String>,
        /// Nesting depth.
        depth: usize,
    },
    /// A tool result began.
    ToolResultStart {
        /// Stream label (`tool:<name>`).
        label: Option<String>,
        /// Nesting depth.
        depth: usize,
        /// Tool-use id.
        tool_use_id: String,
        /// Whether the result is an error.
        is_error: bool,
    },
    /// Tool result text.
    ToolResultTextDelta {
        /// Stream label.
        label: Option<String>,
        /// Nesting depth.
        depth: usize,
        /// The chunk.
        text: String,
    },
    /// A tool result ended.
    ToolResultEnd {
        /// Stream label.
        label: Option<String>,
        /// Nesting depth.
        depth: usize,
    },
    /// A model response ended.
    ResponseFinish {
        /// Stream label.
        label: Option<String>,
        /// Nesting depth.
        depth: usize,
    },
    /// The stream was interrupted.
    Interrupted {
        /// Stream label.
        label: Option<String>,
        /// Nesting depth.
        depth: usize,
    },
    /// External tool stdout/stderr.
    ToolOutput {
        /// Tool name.
        tool_name: String,
        /// Tool-use id: the only reliable way to find the task.
        tool_use_id: String,
        /// `stdout` or `stderr`.
        stream: String,
        /// UTF-8 text, when the bytes were UTF-8.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// Base64 of the bytes otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data_b64: Option<String>,
    },
}

/// `prompt`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prompt {
    /// Server protocol version.
    pub protocol_version: u32,
    /// Message counter.
    #[serde(default)]
    pub sequence: u64,
    /// The request (task) waiting.
    pub request_id: String,
    /// Id the response must name.
    pub prompt_id: String,
    /// `confirmation`, …
    pub kind: String,
    /// The question.
    pub message: String,
    /// Allowed answers.
    pub choices: Vec<String>,
}

/// `prompt_ack`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PromptAck {
    /// Server protocol version.
    pub protocol_version: u32,
    /// Message counter.
    #[serde(default)]
    pub sequence: u64,
    /// The request whose prompt was answered.
    pub request_id: String,
    /// The `prompt_response` request that answered.
    pub response_request_id: String,
    /// The prompt.
    pub prompt_id: String,
    /// The accepted answer.
    pub response: String,
}

/// `result`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultLine {
    /// Server protocol version.
    pub protocol_version: u32,
    /// Message counter.
    #[serde(default)]
    pub sequence: u64,
    /// The request answered (`""` for an unparsable line).
    pub request_id: String,
    /// Success flag — `true` even for a turn that failed with an `error` event.
    pub ok: bool,
    /// Success payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// Failure payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ServerError>,
}

/// The error of a failed `result`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerError {
    /// Machine-readable code; absent for failures sid reports as an s-expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Human-readable text.
    pub message: String,
}

/// Error codes sid uses.
pub mod code {
    /// The line was not JSON.
    pub const INVALID_REQUEST_JSON: &str = "invalid_request_json";
    /// Unknown op or missing field.
    pub const INVALID_REQUEST: &str = "invalid_request";
    /// Wrong `protocol_version`.
    pub const UNSUPPORTED_PROTOCOL_VERSION: &str = "unsupported_protocol_version";
    /// Waiting for a prompt answer, or streaming another request.
    pub const BUSY: &str = "busy";
    /// The prompt answered is not the open one.
    pub const STALE_PROMPT: &str = "stale_prompt";
    /// A manual agent was denied.
    pub const MANUAL_AGENT_DENIED: &str = "manual_agent_denied";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_only_for_transcript_ops() {
        let turn = ClientLine::new("t", Op::UserTurn { text: "hi".into() });
        assert_eq!(AcceptedRequest::for_request(&turn).unwrap().request_id, "t");
        let sys = ClientLine::new("s", Op::InsertSystemMessage { text: "x".into() });
        assert!(AcceptedRequest::for_request(&sys).is_some());
        assert!(AcceptedRequest::for_request(&ClientLine::new("s", Op::Stats)).is_none());
    }

    #[test]
    fn with_sequence_stamps_every_type() {
        let line = r#"{"type":"replay_complete","protocol_version":5}"#;
        let m: ServerMessage = serde_json::from_str(line).unwrap();
        assert_eq!(m.sequence(), 0);
        assert_eq!(m.with_sequence(9).sequence(), 9);
    }
}
