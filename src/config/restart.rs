//! Which keys a reload applies and which only a restart does: one table, read by the reload
//! (to warn about what it left as started) and by the generated reference (to say it per key).

use serde_json::Value;

/// Keys (and whole sections) read once at start: the listener, the runtime, shutdown, and the
/// sections whose running services a reload keeps as they are. Everything else reloads.
pub const RESTART_ONLY: &[&str] = &[
    "server.listen",
    "server.worker_threads",
    "server.runtime",
    "server.max_connections",
    "server.header_read_timeout_ms",
    "server.shutdown_grace_ms",
    "server.drain_ms",
    "server.watch_config",
    "sid",
    "events",
    "a2a",
    "cluster",
];

/// Keys inside a [`RESTART_ONLY`] section that a reload applies all the same: the feed runs on
/// as started, but its streams' keepalive is the routes' own.
pub const RELOADED_WITHIN: &[&str] = &["events.keepalive_ms"];

/// Whether `path` (dotted, `[]` for array members, as the reference writes it) needs a restart.
pub fn restart_only(path: &str) -> bool {
    let covered = |p: &str| {
        path == p || path.starts_with(&format!("{p}.")) || path.starts_with(&format!("{p}["))
    };
    RESTART_ONLY.iter().any(|p| covered(p)) && !RELOADED_WITHIN.iter().any(|p| covered(p))
}

/// The entries of [`RESTART_ONLY`] whose values differ between `old` and `new` (the whole
/// configuration as JSON), leaving out what [`RELOADED_WITHIN`] names.
pub fn changed(old: &Value, new: &Value) -> Vec<String> {
    RESTART_ONLY
        .iter()
        .filter(|key| restart_part(old, key) != restart_part(new, key))
        .map(|key| (*key).to_owned())
        .collect()
}

/// The value at `key`, without the keys inside it that reload.
fn restart_part(config: &Value, key: &str) -> Option<Value> {
    let pointer = format!("/{}", key.replace('.', "/"));
    let mut part = config.pointer(&pointer)?.clone();
    for inner in RELOADED_WITHIN {
        if let Some(rest) = inner.strip_prefix(key).and_then(|r| r.strip_prefix('.')) {
            if let Some(obj) = part.as_object_mut() {
                obj.remove(rest);
            }
        }
    }
    Some(part)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sections_and_exceptions() {
        assert!(restart_only("server.listen"));
        assert!(restart_only("sid.command"));
        assert!(restart_only("events.url"));
        assert!(!restart_only("events.keepalive_ms"));
        assert!(!restart_only("server.max_body_bytes"));
        assert!(!restart_only("server.listener"));
        assert!(!restart_only("upstreams[].url"));
    }

    #[test]
    fn changed_ignores_what_reloads() {
        let old = json!({"server": {"listen": "a"}, "events": {"url": "u", "keepalive_ms": 1}});
        let keepalive =
            json!({"server": {"listen": "a"}, "events": {"url": "u", "keepalive_ms": 2}});
        assert!(changed(&old, &keepalive).is_empty());
        let url = json!({"server": {"listen": "b"}, "events": {"url": "v", "keepalive_ms": 1}});
        assert_eq!(changed(&old, &url), ["server.listen", "events"]);
    }
}
