#!/usr/bin/env bash
# Cross-replica SSE figures (docs/replicas.md): builds in release, then runs
# examples/cluster_fanout.rs, which starts its own redis-server and three replicas.
# NO_BUILD=1 skips the build; FANOUT_BIN runs another build's copy of the example (it starts the
# wiregate and fake_sid beside it: copy this build's example into another build's
# target/release/examples to measure that build the same way). LINES, RATE_LINES, ROUNDS and
# IDLE_S are the example's own (see its docs).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build --release --bin wiregate --example fake_sid --example cluster_fanout
fi
"${FANOUT_BIN:-./target/release/examples/cluster_fanout}"
