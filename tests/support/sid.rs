//! The fake sid (`examples/fake_sid.rs`) behind the bridge: its binary, its processes, and
//! the turns a test sends it.

use serde_json::Value;

use super::gateway::{spawn_post, TestGateway};

/// The fake sid built from `examples/fake_sid.rs` (cargo builds examples before tests run).
pub fn fake_sid() -> String {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_wiregate"));
    let path = bin.parent().unwrap().join("examples").join("fake_sid");
    assert!(
        path.exists(),
        "{} is missing: run `cargo test`, which builds examples",
        path.display()
    );
    path.to_string_lossy().into_owned()
}

impl TestGateway {
    /// Sends `text` to the fake sid in context `ctx` with `message/send` (a `flood ...` turn,
    /// say) and returns the call's answer when the turn is over.
    pub fn send_turn(&self, ctx: &str, text: &str) -> tokio::task::JoinHandle<Value> {
        let params = serde_json::json!({"message": {"parts": [{"text": text}]}, "contextId": ctx});
        spawn_post(
            &self.http,
            format!("{}/rpc", self.base()),
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params}),
        )
    }
}

/// `message/send` params with one text part.
pub fn text_message(text: &str) -> Value {
    serde_json::json!({"message": {"role": "user", "parts": [{"kind": "text", "text": text}]}})
}

/// Processes whose command line contains `tag`, and fake sid zombies of this process:
/// (pid, state letter from /proc/PID/stat).
pub fn processes_tagged(tag: &str) -> Vec<(u32, char)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(") ")
            .next()
            .and_then(|s| s.chars().next())
            .unwrap_or('?');
        let has_tag = String::from_utf8_lossy(&cmdline).contains(tag);
        let ppid: u32 = stat
            .rsplit(") ")
            .next()
            .and_then(|s| s.split_whitespace().nth(1))
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        let zombie_fake = state == 'Z' && stat.contains("(fake_sid)") && ppid == std::process::id();
        if has_tag || zombie_fake {
            out.push((pid, state));
        }
    }
    out
}
