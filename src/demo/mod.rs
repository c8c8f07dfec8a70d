//! Stand-ins for the servers wiregate fronts, for `--demo`, the examples and the tests: a small
//! legacy agent server, its migrated JSON-RPC counterpart, and a fake `sid --raw`.

pub mod guide;
mod jsonrpc;
mod legacy;
pub mod sid;

pub use jsonrpc::{jsonrpc_upstream, Faults};
pub use legacy::legacy_upstream;

/// The demo servers' `slow` method, the same in both dialects: sleeps `params.ms` (1 500 by
/// default, 30 000 at most) and says how long.
async fn slow(params: &serde_json::Value) -> serde_json::Value {
    let ms = params
        .get("ms")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(1500)
        .min(30_000);
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    serde_json::json!({"slept_ms": ms})
}
