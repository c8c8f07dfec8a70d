#!/usr/bin/env bash
# SSE fan-out bench: wiregate (release) with 1, 100 and 1,000 subscribers and 10,000 idle ones,
# and supergateway 4.0.0 (installed from npm into target/bench-node) with the same burst.
#   benches/sse_fanout.sh            # LINES=200000 IDLE=10000 by default
set -euo pipefail
cd "$(dirname "$0")/.."
node_dir=target/bench-node
if [ ! -x "$node_dir/node_modules/.bin/supergateway" ]; then
  mkdir -p "$node_dir"
  (cd "$node_dir" && npm install --silent --no-audit --no-fund supergateway@4.0.0)
fi
cargo build --release --quiet --bin wiregate --example fake_sid --example sse_fanout
SUPERGATEWAY="$PWD/$node_dir/node_modules/.bin/supergateway" ./target/release/examples/sse_fanout
