//! A small legacy agent server to try the gateway against (`gateway.toml` points at it).
//!
//! ```sh
//! cargo run --example legacy_upstream            # listens on 127.0.0.1:9000
//! cargo run --example legacy_upstream -- 127.0.0.1:9100
//! ```

use std::net::SocketAddr;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9000".into())
        .parse()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let (bound, task) = wiregate::demo::legacy_upstream(addr).await?;
    println!("legacy upstream listening on http://{bound}/a2a");
    let _ = task.await;
    Ok(())
}
