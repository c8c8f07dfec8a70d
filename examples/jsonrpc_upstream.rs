//! A small JSON-RPC 2.0 agent server: the migrated counterpart of `legacy_upstream`, to try
//! splits, shadows and rollbacks against (docs/migration.md).
//!
//! ```sh
//! cargo run --example jsonrpc_upstream                          # listens on 127.0.0.1:9001
//! cargo run --example jsonrpc_upstream -- 127.0.0.1:9101
//! cargo run --example jsonrpc_upstream -- 127.0.0.1:9001 --fail-rate 0.5   # half its calls fail
//! ```
//!
//! It answers the legacy server's operations as methods, `_cleveragents/plan/status` with its
//! own `phase` spelling and an `updated_at`; `--fail-rate F` answers that fraction of calls with
//! -32603, which a split's `[routes.rollback]` notices.
#![forbid(unsafe_code)]

use std::net::SocketAddr;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut addr = SocketAddr::from(([127, 0, 0, 1], 9001));
    let mut faults = wiregate::demo::Faults::default();
    let mut args = std::env::args().skip(1);
    let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, what);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--fail-rate" => {
                faults.fail_rate = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|r: &f64| (0.0..=1.0).contains(r))
                    .ok_or_else(|| bad("--fail-rate takes a number from 0 to 1".into()))?;
            }
            other => addr = other.parse().map_err(|e| bad(format!("{other}: {e}")))?,
        }
    }
    let (bound, task) = wiregate::demo::jsonrpc_upstream(addr, faults).await?;
    println!("JSON-RPC upstream listening on http://{bound}/rpc");
    let _ = task.await;
    Ok(())
}
