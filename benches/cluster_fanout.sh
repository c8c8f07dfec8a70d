#!/usr/bin/env bash
# Cross-replica SSE figures (docs/replicas.md): builds in release, then runs
# examples/cluster_fanout.rs, which starts its own redis-server and three replicas.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin wiregate --example fake_sid --example cluster_fanout
./target/release/examples/cluster_fanout
