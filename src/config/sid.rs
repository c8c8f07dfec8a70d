//! `[sid]`: the `sid --raw` bridge.

use serde::{Deserialize, Serialize};

use super::Issues;

/// `[sid]`: the `sid --raw` bridge.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Sid {
    /// Serve sid methods and streams.
    pub enabled: bool,
    /// One child per context; it inherits the gateway's environment.
    pub command: Vec<String>,
    /// `unix:///path` or `tcp://host:port`: attach to `sid --listen` instead of running children.
    pub connect: String,
    /// Most contexts with a running child.
    pub max_contexts: usize,
    /// With `[auth]`: most contexts one caller may hold on a replica (its own, tenancy); 0: no
    /// bound but `max_contexts`.
    pub max_contexts_per_caller: usize,
    /// An idle context's child is stopped after this long (restarted with `--resume` on use).
    pub idle_timeout_ms: u64,
    /// Events kept per context for resumption.
    pub replay_events: usize,
    /// Deprecated and ignored: a subscriber is a cursor into the replay log, cut off only when
    /// events it still needs have left it (`replay_events`). Accepted so older files load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscriber_buffer: Option<usize>,
    /// Most SSE subscribers per context (503 beyond).
    pub max_subscribers: usize,
    /// How long sid's output waits for a subscriber that still needs the oldest events of a
    /// full replay log; one that reads nothing that long is overrun and cut off.
    pub lag_grace_ms: u64,
    /// Interval of SSE keepalive comments.
    pub keepalive_ms: u64,
    /// Raw ops callable as `_sid/<op>`.
    pub allow_ops: Vec<String>,
    /// Bearer tokens accepted for sid methods and streams; required off loopback.
    pub bearer_tokens: Vec<String>,
    /// How long a dropped `--listen` socket may stay down before open tasks fail.
    pub reconnect_grace_ms: u64,
    /// Most requests waiting on one context (written to sid or queued for it, unanswered):
    /// sid reads nothing during a turn, so beyond this callers get -32060 instead of a queue
    /// that grows without bound. Also the most A2A tasks queued behind a context's running turn.
    pub max_queued_requests: usize,
    /// The longest line of sid's output read (bytes before its newline). A longer one is
    /// skipped as it arrives, its bytes never kept (counted in
    /// `wiregate_sid_lines_skipped_total`, logged without its bytes), and the next line read:
    /// a child that writes without a newline holds no more memory than this.
    pub max_line_bytes: usize,
}

impl Default for Sid {
    fn default() -> Self {
        Sid {
            enabled: false,
            command: vec!["sid".into(), "--raw".into()],
            connect: String::new(),
            max_contexts: 16,
            max_contexts_per_caller: 0,
            idle_timeout_ms: 900_000,
            replay_events: 4096,
            subscriber_buffer: None,
            max_subscribers: 10_000,
            lag_grace_ms: 500,
            keepalive_ms: 15_000,
            // Every plain op, less the ones that touch this host's files or stop the agent.
            allow_ops: SID_OPS
                .iter()
                .filter(|op| !SID_INTERNAL_OPS.contains(op) && !SID_OFF_BY_DEFAULT_OPS.contains(op))
                .map(|op| (*op).to_owned())
                .collect(),
            bearer_tokens: Vec::new(),
            reconnect_grace_ms: 10_000,
            max_queued_requests: 64,
            max_line_bytes: 4 << 20,
        }
    }
}

/// Raw ops allowed only when listed in `sid.allow_ops`: they read or write files on the
/// gateway's host, or stop the agent.
pub const SID_OFF_BY_DEFAULT_OPS: [&str; 3] = ["save_transcript", "load_transcript", "shutdown"];

/// Raw ops the bridge drives itself or that are never plain calls.
pub const SID_INTERNAL_OPS: [&str; 3] = ["user_turn", "prompt_response", "interrupt"];

/// Every raw op name of protocol 5.
pub const SID_OPS: [&str; 15] = [
    "user_turn",
    "insert_system_message",
    "prompt_response",
    "interrupt",
    "show_agent",
    "list_agents",
    "switch_agent",
    "compact",
    "clear",
    "set_spend",
    "save_transcript",
    "load_transcript",
    "stats",
    "show_config",
    "shutdown",
];
impl Sid {
    pub(super) fn validate(&self, server: &super::Server, issues: &mut Issues) {
        let sid = self;
        if !sid.enabled {
            return;
        }
        if sid.connect.is_empty() && sid.command.is_empty() {
            issues.add(
                "sid.command".into(),
                "must name the sid program when sid.connect is empty".into(),
            );
        }
        let known_scheme = sid.connect.starts_with("unix:///") || sid.connect.starts_with("tcp://");
        if !sid.connect.is_empty() && !known_scheme {
            issues.add(
                "sid.connect".into(),
                "must be unix:///path or tcp://host:port".into(),
            );
        }
        for (key, v) in [
            ("sid.max_contexts", sid.max_contexts as u64),
            ("sid.replay_events", sid.replay_events as u64),
            ("sid.max_queued_requests", sid.max_queued_requests as u64),
            ("sid.keepalive_ms", sid.keepalive_ms),
            ("sid.idle_timeout_ms", sid.idle_timeout_ms),
            ("sid.max_line_bytes", sid.max_line_bytes as u64),
        ] {
            if v == 0 {
                issues.add(key.into(), "must be positive".into());
            }
        }
        for (i, op) in sid.allow_ops.iter().enumerate() {
            if !SID_OPS.contains(&op.as_str()) {
                issues.add(
                    format!("sid.allow_ops[{i}]"),
                    format!("{op:?} is not a sid raw op"),
                );
            } else if SID_INTERNAL_OPS.contains(&op.as_str()) {
                issues.add(
                    format!("sid.allow_ops[{i}]"),
                    format!("{op:?} is driven by message/send and tasks/cancel, not _sid/"),
                );
            }
        }
        if !server.listen.ip().is_loopback() && sid.bearer_tokens.is_empty() {
            issues.add(
                "sid.bearer_tokens".into(),
                format!(
                    "the sid bridge refuses to serve on the non-loopback {} without bearer tokens",
                    server.listen
                ),
            );
        }
    }
}
