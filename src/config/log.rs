//! `[log]`: how the gateway writes its log.

use serde::{Deserialize, Serialize};

/// `[log]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Log {
    /// `"text"` for people, `"json"` (one object a line) for collectors.
    pub format: LogFormat,
    /// One line per request: method, path, status, bytes, duration, client dialect, upstream
    /// and trace id (never a credential).
    pub access: bool,
}

impl Default for Log {
    fn default() -> Self {
        Log {
            format: LogFormat::Text,
            access: false,
        }
    }
}

/// The shape of a log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object a line.
    Json,
}
