#!/usr/bin/env bash
# System calls per call, the floor a proxy's speed stands on: the translating gateway
# (worker_threads = 1, JSON-RPC -> legacy), the same gateway with its upstream pipelined, and
# nginx's proxy_pass (one worker, keepalive to the upstream), each in front of the same
# examples/legacy_upstream and driven by the same wrk load, the proxy's process (every thread)
# under `strace -c -f`. Prints each one's system calls per call by name (those above 0.05 a call)
# and in all, and its calls counted by wrk.
#
#   benches/syscalls.sh                       # 4 connections, 3 s each
#   CONNS=32 DURATION=5s benches/syscalls.sh
#   NO_BUILD=1 WG_BIN=/path/to/wiregate benches/syscalls.sh
#
# strace slows the traced process many times over, so the rates are nothing to go by; the counts
# per call are what the process asks of the kernel for each call at that concurrency (with more
# connections ready at once, an event loop's reads and writes batch, and the counts drop).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-3s}
CONNS=${CONNS:-4}
UP_PORT=${UP_PORT:-19400}
GW_PORT=${GW_PORT:-19401}
PIPE_PORT=${PIPE_PORT:-19402}
NGINX_PORT=${NGINX_PORT:-19403}
WG_BIN=${WG_BIN:-./target/release/wiregate}

# shellcheck source=benches/common.sh
. benches/common.sh
need wrk wrk
need nginx nginx-light
need strace strace
begin_run

./target/release/examples/legacy_upstream "127.0.0.1:$UP_PORT" >/dev/null &
pids+=($!)
for row in gw pipe; do
  port=$GW_PORT
  [ "$row" = pipe ] && port=$PIPE_PORT
  cat >"$work/$row.toml" <<TOML
[server]
listen = "127.0.0.1:$port"
worker_threads = 1
[[upstreams]]
name = "legacy"
url = "http://127.0.0.1:$UP_PORT/a2a"
dialect = "legacy"
$([ "$row" = pipe ] && echo "pipeline = 256")
[[routes]]
methods = ["*"]
upstream = "legacy"
TOML
done
{
  nginx_head
  cat <<NGINX
  server {
    listen 127.0.0.1:$NGINX_PORT;
    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
NGINX
} >"$work/nginx.conf"
lua "$rpc_body" "$work/rpc.lua"
lua "$legacy_body" "$work/legacy.lua"

# measure LABEL URL SCRIPT GOOD BODY PID...: wrk's load on URL while strace counts the system
# calls of the processes PID (and their threads); prints the counts per call.
measure() {
  local label=$1 url=$2 script=$3 good=$4 body=$5
  shift 5
  answers "$good" "$body" "$url" || { echo "$label does not answer right at $url" >&2; exit 1; }
  local attach=()
  for p in "$@"; do attach+=(-p "$p"); done
  strace -c -f -o "$work/$label.strace" "${attach[@]}" &
  local tracer=$!
  sleep 1
  WRK_HIST="$work/hist" wrk -t1 -c"$CONNS" -d"$DURATION" -s "$script" "$url" >"$work/$label.wrk"
  kill -INT "$tracer"
  wait "$tracer" 2>/dev/null || true
  local calls
  calls=$(awk '/requests in/ { print $1 }' "$work/$label.wrk")
  if grep -q "Non-2xx\|Socket errors" "$work/$label.wrk"; then
    echo "$label: wrk saw errors:" >&2
    cat "$work/$label.wrk" >&2
    exit 1
  fi
  awk -v calls="$calls" -v label="$label" '
    $1 ~ /^[0-9.]+$/ && NF >= 5 { n = $4; name = $NF; if (name != "total") { per[name] = n / calls; all += n } }
    END {
      printf "%-34s %8d calls  %6.2f system calls a call:", label, calls, all / calls
      for (k in per) if (per[k] >= 0.05) printf " %s %.2f", k, per[k]
      printf "\n"
    }' "$work/$label.strace"
}

RUST_LOG=warn "$WG_BIN" --config "$work/gw.toml" >/dev/null 2>&1 &
gw_pid=$!
pids+=($!)
RUST_LOG=warn "$WG_BIN" --config "$work/pipe.toml" >/dev/null 2>&1 &
pipe_pid=$!
pids+=($!)
nginx -c "$work/nginx.conf" -p "$work" &
nginx_pid=$!
pids+=($!)
sleep 1
nginx_worker=$(pgrep -P "$nginx_pid" | head -1)

echo "system calls per call, $CONNS connections, $DURATION under strace -c -f:"
measure "nginx proxy_pass" "http://127.0.0.1:$NGINX_PORT/a2a" "$work/legacy.lua" "$legacy_ok" "$legacy_body" "$nginx_worker"
measure "wiregate (translating)" "http://127.0.0.1:$GW_PORT/rpc" "$work/rpc.lua" "$rpc_ok" "$rpc_body" "$gw_pid"
measure "wiregate translating, pipelined" "http://127.0.0.1:$PIPE_PORT/rpc" "$work/rpc.lua" "$rpc_ok" "$rpc_body" "$pipe_pid"
