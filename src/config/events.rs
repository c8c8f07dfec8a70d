//! `[events]`: the legacy server's domain-event feed.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::Issues;

/// `[events]`: the legacy server's domain-event feed, served as SSE on `GET /events`.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Events {
    /// URL of the feed (NDJSON or SSE); empty turns the feed off.
    pub source: String,
    /// PEM CAs an `https://` source is verified against; empty: the platform's roots.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ca_file: String,
    /// PEM certificate chain presented to an `https://` source that asks for one (mTLS), as an
    /// upstream's `client_cert`; set together with `client_key`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_cert: String,
    /// The private key of `client_cert` (PEM).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_key: String,
    /// First reconnect backoff step; doubles up to 30 s.
    pub reconnect_ms: u64,
    /// Events kept for resumption.
    pub replay_events: usize,
    /// Deprecated and ignored: a subscriber is a cursor into the replay log, cut off only when
    /// events it still needs have left it (`replay_events`). Accepted so older files load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscriber_buffer: Option<usize>,
    /// Most SSE subscribers of `GET /events` (503 beyond).
    pub max_subscribers: usize,
    /// Interval of SSE keepalive comments.
    pub keepalive_ms: u64,
    /// The longest record read from the feed: an NDJSON line, or an SSE event (its lines up to
    /// the blank line that ends it), not counting the line end that closes it. A longer one is
    /// skipped as it arrives, its bytes never kept (counted in
    /// `wiregate_events_feed_lines_skipped_total`, logged without its bytes), and the next one
    /// read: a source that writes without a newline holds no more memory than this.
    pub max_line_bytes: usize,
    /// What to do with event types the map does not name.
    pub unmapped: Unmapped,
    /// Event type → update kind.
    pub map: EventsMap,
}

/// `[events.map]`.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct EventsMap {
    /// Types that become `TaskStatusUpdateEvent`.
    pub status: Vec<String>,
    /// Types that become `TaskArtifactUpdateEvent`.
    pub artifact: Vec<String>,
}

impl Default for EventsMap {
    fn default() -> Self {
        EventsMap {
            status: DEFAULT_STATUS.map(String::from).to_vec(),
            artifact: DEFAULT_ARTIFACT.map(String::from).to_vec(),
        }
    }
}

impl Default for Events {
    fn default() -> Self {
        Events {
            source: String::new(),
            ca_file: String::new(),
            client_cert: String::new(),
            client_key: String::new(),
            reconnect_ms: 1000,
            replay_events: 4096,
            subscriber_buffer: None,
            max_subscribers: 10_000,
            keepalive_ms: 15_000,
            max_line_bytes: 4 << 20,
            unmapped: Default::default(),
            map: EventsMap::default(),
        }
    }
}

impl Events {
    /// The client TLS configuration for `source` (`None` for `http://`), from `ca_file`,
    /// `client_cert` and `client_key` as an upstream's are built.
    pub fn tls(&self) -> Result<Option<Arc<rustls::ClientConfig>>, crate::config::tls::TlsProblem> {
        crate::config::tls::client_config_for(
            &self.source,
            &self.ca_file,
            &self.client_cert,
            &self.client_key,
        )
    }

    pub(super) fn validate(&self, issues: &mut Issues) {
        if self.source.is_empty() {
            return;
        }
        match self.source.parse::<axum::http::Uri>() {
            Ok(uri)
                if matches!(uri.scheme_str(), Some("http" | "https")) && uri.host().is_some() =>
            {
                if let Err(e) = self.tls() {
                    issues.add(format!("events.{}", e.key), e.message);
                }
            }
            _ => issues.add(
                "events.source".into(),
                "must be an http:// or https:// URL with a host".into(),
            ),
        }
        for (key, v) in [
            ("events.reconnect_ms", self.reconnect_ms),
            ("events.replay_events", self.replay_events as u64),
            ("events.keepalive_ms", self.keepalive_ms),
            ("events.max_line_bytes", self.max_line_bytes as u64),
        ] {
            if v == 0 {
                issues.add(key.into(), "must be positive".into());
            }
        }
    }
}

/// What to do with a type the map does not name.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Unmapped {
    /// Drop it.
    #[default]
    Drop,
    /// Pass it on as a status update.
    Status,
}

/// The default status types.
pub const DEFAULT_STATUS: [&str; 6] = [
    "plan.created",
    "plan.phase_changed",
    "plan.state_changed",
    "plan.applied",
    "plan.cancelled",
    "plan.errored",
];

/// The default artifact types.
pub const DEFAULT_ARTIFACT: [&str; 4] = [
    "checkpoint.created",
    "checkpoint.restored",
    "sandbox.committed",
    "resource.modified",
];
