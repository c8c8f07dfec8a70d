#!/usr/bin/env bash
# Instruction counts (callgrind), the figures README's Performance section quotes: they do not
# move with the machine's load, so they compare builds where wall-clock benches cannot.
#
#   benches/callgrind.sh              # both parts below
#   benches/callgrind.sh pure         # the pure paths only (about 1 minute)
#   benches/callgrind.sh proxy        # the proxied call only (about 1 minute)
#   benches/callgrind.sh passthrough  # a passed-through call only (about 1 minute)
#   REV=712ed07 benches/callgrind.sh proxy   # the same, for a past commit (built in a worktree)
#
# pure:  each path of tests/instruction_paths.rs (the payloads of benches/translate.rs) run
#        under callgrind at two iteration counts; instructions per call = the difference of the
#        totals over the difference of the counts, so start-up and the test harness cancel out.
# proxy: the release gateway (worker_threads = 1) in front of examples/legacy_upstream, under
#        callgrind, driven by wrk (1 thread, 4 connections, the JSON-RPC body of benches/load.sh)
#        for a short and a long run; instructions per proxied call = the difference of the
#        process's totals (every thread, user space) over the difference of the calls it counted
#        (wiregate_requests_total), so start-up and shutdown cancel out. Also prints where the
#        long run's instructions went, per crate (self cost per call).
# passthrough: the same, with `[[passthrough]] prefix = "/"` and wrk posting the legacy
#        envelope of benches/load.sh to /a2a, which reaches the upstream unchanged; calls
#        counted by wiregate_passthrough_requests_total.
#
# Installs valgrind and wrk with apt-get when they are missing. Only loopback is used.
set -euo pipefail
cd "$(dirname "$0")/.."
PART=${1:-all}
UP_PORT=${UP_PORT:-19210}
GW_PORT=${GW_PORT:-19211}
SHORT_S=${SHORT_S:-3}
LONG_S=${LONG_S:-9}

need() { command -v "$1" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "$2" >/dev/null; }; }
need valgrind valgrind
need callgrind_annotate valgrind

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -n "${REV:-}" ] && [ -d "$work/tree" ]; then git worktree remove --force "$work/tree" >/dev/null 2>&1 || true; fi
  [ -n "${KEEP:-}" ] && echo "kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT

# The total instructions of a callgrind output file.
total() { awk '/^(summary|totals):/ { print $2; exit }' "$1"; }

pure() {
  local bin
  bin=$(cargo test --locked --release --test instruction_paths --no-run --message-format=json 2>/dev/null |
    grep -o '"executable":"[^"]*instruction_paths-[^"]*"' | tail -1 | cut -d'"' -f4)
  [ -x "$bin" ] || { echo "cannot build tests/instruction_paths.rs" >&2; exit 1; }
  # ir TEST ITERS -> total instructions of the test binary running TEST that many times
  ir() {
    WIREGATE_PATH_ITERS=$2 valgrind --tool=callgrind --callgrind-out-file="$work/pure.out" \
      "$bin" --exact "$1" --test-threads=1 >/dev/null 2>&1
    total "$work/pure.out"
  }
  printf '%-22s %10s %12s\n' path calls instr/call
  # test, short and long iteration counts
  while read -r t lo hi; do
    a=$(ir "$t" "$lo")
    b=$(ir "$t" "$hi")
    awk -v t="$t" -v a="$a" -v b="$b" -v lo="$lo" -v hi="$hi" \
      'BEGIN { printf "%-22s %10d %12.0f\n", t, hi - lo, (b - a) / (hi - lo) }'
  done <<'PATHS'
request_300b 1000 11000
response_300b 1000 11000
raw_line_to_frame 1000 11000
request_25kb 20 220
response_25kb 20 220
PATHS
}

# proxy MODE: MODE is proxy (a translated POST /rpc) or passthrough (POST /a2a passed through)
proxy() {
  local mode=$1 root=. target=target
  if [ -n "${REV:-}" ]; then
    git worktree add --detach "$work/tree" "$REV" >/dev/null
    root=$work/tree
    target=$PWD/target/callgrind-rev
  fi
  (cd "$root" && CARGO_TARGET_DIR=$target cargo build --release --quiet --bin wiregate --example legacy_upstream)
  need wrk wrk
  for port in "$UP_PORT" "$GW_PORT"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "127.0.0.1:$port is taken: set UP_PORT / GW_PORT" >&2
      exit 1
    fi
  done
  "$target/release/examples/legacy_upstream" "127.0.0.1:$UP_PORT" >/dev/null &
  pids+=($!)
  cat >"$work/gateway.toml" <<TOML
[server]
listen = "127.0.0.1:$GW_PORT"
worker_threads = 1
[[upstreams]]
name = "legacy"
url = "http://127.0.0.1:$UP_PORT/a2a"
dialect = "legacy"
[[routes]]
methods = ["*"]
upstream = "legacy"
TOML
  local rpc_body='{"jsonrpc":"2.0","id":1,"method":"echo","params":{"plan_id":"P1","n":1}}'
  local path=/rpc expect='"result":{' counter=wiregate_requests_total what="proxied JSON-RPC -> legacy call"
  if [ "$mode" = passthrough ]; then
    printf '[[passthrough]]\nprefix = "/"\nupstream = "legacy"\n' >>"$work/gateway.toml"
    rpc_body='{"a2a_version":"1.0","request_id":"r-1","operation":"echo","params":{"plan_id":"P1","n":1},"auth":null}'
    path=/a2a expect='"status":"success"' counter=wiregate_passthrough_requests_total what="passed-through POST /a2a"
  fi
  printf 'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = [[%s]]\n' "$rpc_body" >"$work/rpc.lua"

  # run SECONDS -> "instructions calls", and leaves the output in $work/gw.SECONDS
  run() {
    RUST_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$work/gw.$1" \
      "$target/release/wiregate" --config "$work/gateway.toml" >/dev/null 2>&1 &
    local gw=$!
    for _ in $(seq 600); do
      curl -sf "http://127.0.0.1:$GW_PORT/healthz" >/dev/null 2>&1 && break
      sleep 0.1
    done
    local answer
    answer=$(curl -s -H 'content-type: application/json' -d "$rpc_body" "http://127.0.0.1:$GW_PORT$path")
    [[ $answer == *"$expect"* ]] || { echo "the gateway did not answer a result: $answer" >&2; exit 1; }
    wrk -t1 -c4 -d"$1s" -s "$work/rpc.lua" "http://127.0.0.1:$GW_PORT$path" >"$work/wrk.$1" 2>&1
    grep -q 'Non-2xx\|Socket errors' "$work/wrk.$1" && { echo "wrk saw errors:" >&2; cat "$work/wrk.$1" >&2; exit 1; }
    local calls
    calls=$(curl -s "http://127.0.0.1:$GW_PORT/metrics" | awk -v m="$counter" '$0 ~ "^" m { s += $NF } END { print s + 0 }')
    kill -TERM "$gw"
    wait "$gw" || true
    echo "$(total "$work/gw.$1") $calls"
  }
  read -r a n_a < <(run "$SHORT_S")
  read -r b n_b < <(run "$LONG_S")
  echo "$what, ${REV:-this tree}: $((n_b - n_a)) calls between a ${SHORT_S} s and a ${LONG_S} s run"
  awk -v a="$a" -v b="$b" -v na="$n_a" -v nb="$n_b" \
    'BEGIN { printf "instructions per call: %.0f (%.1f k)\n", (b - a) / (nb - na), (b - a) / (nb - na) / 1000 }'
  # Where the difference went: self cost per crate (from the functions' names; libc by its
  # file), long run minus short run, per call, so start-up cancels out here too.
  echo "where they go (self cost per proxied call, by crate, of the functions making 99 % of it):"
  crates "$work/gw.$SHORT_S" >"$work/crates.short"
  crates "$work/gw.$LONG_S" >"$work/crates.long"
  awk -v n="$((n_b - n_a))" '
    FNR == NR { short[$1] = $2; next }
    { per = ($2 - short[$1]) / n; if (per >= 100) printf "%10.1f k  %s\n", per / 1000, $1 }' \
    "$work/crates.short" "$work/crates.long" | sort -nr
}

# crates FILE -> "crate instructions" lines: callgrind_annotate's function list (99 % of the
# total) summed by the crate a function's name starts with.
crates() {
  callgrind_annotate --threshold=99 "$1" 2>/dev/null |
    awk '
      /^ *[0-9,]+ \([ 0-9.]+%\)  / && !/PROGRAM TOTALS/ {
        ir = $1; gsub(",", "", ir)
        fn = $0; sub(/^ *[0-9,]+ \([ 0-9.]+%\) +/, "", fn)
        if (fn ~ /\[[^]]*(libc|ld-linux)[^]]*\]$/) c = "libc"
        else {
          sub(/^[^:]*:/, "", fn)          # the file part (??? without debug info)
          sub(/^[<&]+(mut )?/, "", fn)    # <T as Trait>::f, &mut T
          c = fn; sub(/::.*$/, "", c); sub(/[<> ].*$/, "", c)
          if (c == "core" || c == "alloc" || c == "std") c = "std (core, alloc)"
        }
        cost[c] += ir
      }
      END { for (c in cost) print c "\t" cost[c] }' | sed 's/ (core, alloc)/_(core,alloc)/'
}

case $PART in
  pure) pure ;;
  proxy | passthrough) proxy "$PART" ;;
  all) pure; echo; proxy proxy ;;
  *) echo "usage: $0 [pure|proxy|passthrough|all]" >&2; exit 2 ;;
esac
