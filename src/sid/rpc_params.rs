//! The bridge's JSON-RPC params read: the message of `message/send` and `message/stream` as a
//! [`Turn`], the `{id}` of the methods that name one task, and the one reader of a method's
//! params.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::Turn;
use crate::model::error::GatewayError;

#[derive(Deserialize)]
pub(super) struct SendParams {
    message: MessageIn,
    #[serde(default, rename = "contextId")]
    context_id: Option<String>,
    #[serde(default, rename = "taskId")]
    task_id: Option<String>,
}

#[derive(Deserialize)]
struct MessageIn {
    #[serde(default)]
    parts: Vec<PartIn>,
    #[serde(default, rename = "contextId")]
    context_id: Option<String>,
    #[serde(default, rename = "taskId")]
    task_id: Option<String>,
    #[serde(default, rename = "messageId")]
    message_id: Option<String>,
}

#[derive(Deserialize)]
struct PartIn {
    #[serde(default)]
    text: Option<String>,
}

impl SendParams {
    /// The seed dialect's message as a turn: text parts joined, ids from the message first.
    pub(super) fn into_turn(self) -> Result<Turn, GatewayError> {
        let text: Vec<String> = self
            .message
            .parts
            .into_iter()
            .filter_map(|p| p.text)
            .collect();
        if text.is_empty() {
            return Err(GatewayError::InvalidParams(
                "message has no text part".into(),
            ));
        }
        Ok(Turn {
            text: text.join("\n"),
            context_id: self.message.context_id.or(self.context_id),
            task_id: self.message.task_id.or(self.task_id),
            message_id: self.message.message_id,
            queue: false,
            tenant: None,
        })
    }
}

/// `{id}`: the params of every method that names one task.
#[derive(Deserialize)]
pub(crate) struct IdParams {
    pub(crate) id: String,
}

/// A method's params as `T`; absent params read as `{}`.
pub(crate) fn params<T: for<'de> Deserialize<'de>>(
    p: Option<&RawValue>,
) -> Result<T, GatewayError> {
    serde_json::from_str(p.map_or("{}", RawValue::get))
        .map_err(|e| GatewayError::InvalidParams(e.to_string()))
}
