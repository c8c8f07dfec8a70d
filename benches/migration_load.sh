#!/usr/bin/env bash
# Load test of the migration paths: the same JSON-RPC call through three gateways over the
# same legacy upstream, one after the other in one run:
#   plain   a route naming one upstream (the baseline)
#   split   a 90/10 split, sticky by token (both sides the same server under two names, so the
#           difference is the split's own work: hashing the caller, choosing, counting)
#   shadow  a plain route with `shadow` to a second legacy server at shadow_sample = 1.0
# Each wrk request carries one of 1 000 tokens. Prints req/s, latency, the gateway's CPU per
# request, the shadow figures from /migration, and the ratios against plain.
#
#   benches/migration_load.sh                     # 32 connections, 10 s each
#   DURATION=5s CONNS=64 benches/migration_load.sh
#
# NO_BUILD=1 uses the release binaries as they are. Installs wrk with apt-get when missing. Loopback only; each gateway gets one worker thread.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10s}
CONNS=${CONNS:-32}
THREADS=${THREADS:-2}
BASE=${BASE_PORT:-19100}

command -v wrk >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
[ -n "${NO_BUILD:-}" ] || cargo build --release --quiet --bin wiregate --example legacy_upstream
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

UP=$BASE SHADOW_UP=$((BASE + 1))
./target/release/examples/legacy_upstream "127.0.0.1:$UP" >/dev/null &
pids+=($!)
./target/release/examples/legacy_upstream "127.0.0.1:$SHADOW_UP" >/dev/null &
shadow_up_pid=$!
pids+=($!)

upstreams="
[[upstreams]]
name = \"legacy\"
url = \"http://127.0.0.1:$UP/a2a\"
dialect = \"legacy\"
[[upstreams]]
name = \"legacy-b\"
url = \"http://127.0.0.1:$UP/a2a\"
dialect = \"legacy\"
[[upstreams]]
name = \"shadow\"
url = \"http://127.0.0.1:$SHADOW_UP/a2a\"
dialect = \"legacy\""
declare -A route port gw
route[plain]='[[routes]]
name = "r"
methods = ["*"]
upstream = "legacy"'
route[split]='[[routes]]
name = "r"
methods = ["*"]
split = [{ upstream = "legacy", weight = 90 }, { upstream = "legacy-b", weight = 10 }]
sticky = "auth"'
route[shadow]='[[routes]]
name = "r"
methods = ["*"]
upstream = "legacy"
shadow = "shadow"
shadow_sample = 1.0'
i=2
for k in plain split shadow; do
  port[$k]=$((BASE + i))
  i=$((i + 1))
  printf '[server]\nlisten = "127.0.0.1:%s"\nworker_threads = 1\n%s\n%s\n' "${port[$k]}" "$upstreams" "${route[$k]}" >"$work/$k.toml"
  RUST_LOG=warn ./target/release/wiregate --config "$work/$k.toml" >/dev/null 2>&1 &
  gw[$k]=$!
  pids+=($!)
done
sleep 1

body='{"jsonrpc":"2.0","id":1,"method":"echo","params":{"plan_id":"P1","n":1}}'
cat >"$work/rpc.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [[$body]]
request = function()
  wrk.headers["Authorization"] = "Bearer caller-" .. math.random(1, 1000)
  return wrk.format()
end
LUA
for k in plain split shadow; do
  got=$(curl -s -m 5 -H 'content-type: application/json' -H 'authorization: Bearer x' -d "$body" "http://127.0.0.1:${port[$k]}/rpc")
  [[ $got == *'"result":{'* && $got == *'"plan_id":"P1"'* ]] || { echo "$k answers wrongly: $got"; exit 1; }
done

cpu() { awk -v t="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); print $12 / t + $13 / t }' "/proc/$1/stat"; }

# run NAME -> "rps p50 p99 cpu_us_per_req errors"
run() {
  local c0 c1
  c0=$(cpu "${gw[$1]}")
  wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s "$work/rpc.lua" "http://127.0.0.1:${port[$1]}/rpc" >"$work/$1.txt" 2>&1
  c1=$(cpu "${gw[$1]}")
  awk -v c0="$c0" -v c1="$c1" '
    function ms(v) { if (v ~ /us$/) return v/1000; if (v ~ /ms$/) return v+0; if (v ~ /s$/) return v*1000; return v }
    /requests in/ { n=$1 }
    /Requests\/sec/ { rps=$2 }
    $1=="50%" { p50=ms($2) }
    $1=="99%" { p99=ms($2) }
    /Socket errors:/ { err+=$4+$6+$8+$10 }
    /Non-2xx or 3xx responses:/ { err+=$NF }
    END { printf "%.0f %.3f %.3f %.1f %d\n", rps, p50, p99, (n ? (c1-c0)*1e6/n : 0), err+0 }' "$work/$1.txt"
}

printf '%-8s %6s %10s %9s %9s %12s %7s\n' gateway conns req/s p50_ms p99_ms cpu_us/req errors
declare -A rps cpuus
for k in plain split shadow; do
  read -r r p50 p99 c e < <(run "$k")
  rps[$k]=$r cpuus[$k]=$c
  printf '%-8s %6s %10s %9s %9s %12s %7s\n' "$k" "$CONNS" "$r" "$p50" "$p99" "$c" "$e"
done
sleep 1
shadow_report=$(curl -s "http://127.0.0.1:${port[shadow]}/migration")
echo "shadow route: $(echo "$shadow_report" | grep -o '"match":[0-9]*\|"diff":[0-9]*\|"shadow_error":[0-9]*\|"dropped":[0-9]*' | tr '\n' ' ')"
awk -v p="${rps[plain]}" -v s="${rps[split]}" -v h="${rps[shadow]}" -v pc="${cpuus[plain]}" -v sc="${cpuus[split]}" -v hc="${cpuus[shadow]}" 'BEGIN {
  printf "ratios: split/plain req/s %.3f (cpu/req %.3f)  shadow/plain req/s %.3f (cpu/req %.3f; the shadow added %.1f us/req, plain costs %.1f us/req)\n", s/p, sc/pc, h/p, hc/pc, hc-pc, pc }'
