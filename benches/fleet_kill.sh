#!/usr/bin/env bash
# Kill test: wiregate translating JSON-RPC -> legacy over three upstream processes, one of them
# killed (SIGKILL) under load. The gateway's upstream is the fleet of benches/load.sh:
# `endpoints = [the three URLs]`, `balance = "least_request"`, `[upstreams.retry]` with
# `attempts = 2` and `methods` the method the JSON-RPC body calls; `[upstreams.outlier]` is left
# at its default (5 consecutive failures eject an endpoint) and there is no `[upstreams.health]`
# (no active checks). wrk posts the JSON-RPC body of benches/load.sh for DURATION at CONNS
# connections; KILL_AFTER seconds in, one upstream gets `kill -9`. Answers are also sampled during
# the run (a translated result, not an error). Prints wrk's totals, its socket errors and non-2xx
# answers, and ends with
#
#   fleet kill: N requests, M non-2xx, E socket errors
#
# Exit status 1 when M or E is not 0, or a sampled answer was wrong: every call in flight to the
# killed upstream, and every one sent to it after, should be answered by another.
#
#   benches/fleet_kill.sh                              # 10 s at 32 connections, kill after 3 s
#   DURATION=20s CONNS=256 KILL_AFTER=5 benches/fleet_kill.sh
#   NO_BUILD=1 benches/fleet_kill.sh                   # the release binaries already built
#   WG_BIN=/path/to/wiregate benches/fleet_kill.sh     # that build (default:
#                                                      # target/release/wiregate)
#
# Installs wrk with apt-get when it is missing. Only loopback is used. WG_THREADS sets wiregate's
# worker_threads (1 unless set; 0: one worker per core), as in benches/load.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10s}
CONNS=${CONNS:-32}
THREADS=${THREADS:-2}
KILL_AFTER=${KILL_AFTER:-3}
FLEET_UP1_PORT=${FLEET_UP1_PORT:-19020}
FLEET_UP2_PORT=${FLEET_UP2_PORT:-19021}
FLEET_UP3_PORT=${FLEET_UP3_PORT:-19022}
GW_FLEET_PORT=${GW_FLEET_PORT:-19023}
WG_BIN=${WG_BIN:-./target/release/wiregate}

# need, begin_run (the build, $work, $pids, cleanup on exit), the bodies, the right answers, the
# wrk script and the fleet's configuration.
# shellcheck source=benches/common.sh
. benches/common.sh

need wrk wrk
begin_run

ports=("$FLEET_UP1_PORT" "$FLEET_UP2_PORT" "$FLEET_UP3_PORT")
up_pids=()
for port in "${ports[@]}"; do
  ./target/release/examples/legacy_upstream "127.0.0.1:$port" >/dev/null &
  up_pids+=($!)
  pids+=($!)
done

fleet_toml "$work/fleet.toml"
RUST_LOG=warn NO_COLOR=1 "$WG_BIN" --config "$work/fleet.toml" >"$work/gateway.log" 2>&1 &
gw_pid=$!
pids+=($!)
sleep 1

lua "$rpc_body" "$work/rpc.lua"


# Each upstream answers directly; the gateway is asked for 5 s more to answer, and one that exits or
# does not answer is reported with its log's last lines.
for port in "${ports[@]}"; do
  answers "$legacy_ok" "$legacy_body" "http://127.0.0.1:$port/a2a" || { echo "upstream 127.0.0.1:$port does not answer" >&2; exit 1; }
done
gw_ok=
deadline=$((SECONDS + 5))
while [ "$SECONDS" -lt "$deadline" ]; do
  if answers "$rpc_ok" "$rpc_body" "http://127.0.0.1:$GW_FLEET_PORT/rpc"; then gw_ok=1; break; fi
  kill -0 "$gw_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$gw_ok" ]; then
  if kill -0 "$gw_pid" 2>/dev/null; then state="running, not answering on 127.0.0.1:$GW_FLEET_PORT/rpc"; else state="exited"; fi
  echo "wiregate ($WG_BIN --config fleet.toml) did not start: $state; its log's last lines:" >&2
  tail -n 20 "$work/gateway.log" | sed 's/^/  /' >&2
  exit 1
fi

# sample GOOD BODY URL OUT: while $work/sampling exists, checks one answer every 0.2 s (beside
# wrk's load, so answers during the kill are seen); writes "checked wrong".
sample() {
  local checked=0 wrong=0
  while [ -e "$work/sampling" ]; do
    checked=$((checked + 1))
    answers "$1" "$2" "$3" || wrong=$((wrong + 1))
    sleep 0.2
  done
  echo "$checked $wrong" >"$4"
}

: >"$work/sampling"
sample "$rpc_ok" "$rpc_body" "http://127.0.0.1:$GW_FLEET_PORT/rpc" "$work/sample" &
sampler=$!
pids+=($!)
WRK_HIST="$work/wrk.hist" wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" -s "$work/rpc.lua" \
  "http://127.0.0.1:$GW_FLEET_PORT/rpc" >"$work/wrk.txt" 2>&1 &
wrk_pid=$!
pids+=($!)
sleep "$KILL_AFTER"
if ! kill -0 "$wrk_pid" 2>/dev/null; then
  echo "wrk ended before the kill (KILL_AFTER=$KILL_AFTER is not within DURATION=$DURATION)" >&2
  exit 1
fi
# The second upstream is killed, then reaped (and no longer stopped at exit).
victim=${up_pids[1]}
kill -9 "$victim"
wait "$victim" 2>/dev/null || true
kept=()
for p in "${pids[@]}"; do [ "$p" = "$victim" ] || kept+=("$p"); done
pids=("${kept[@]}")
echo "killed upstream 127.0.0.1:${ports[1]} (kill -9) ${KILL_AFTER}s into the run"
wrk_rc=0
wait "$wrk_pid" || wrk_rc=$?
rm -f "$work/sampling"
wait "$sampler"
read -r checked wrong <"$work/sample"

# wrk's totals, socket errors and non-2xx answers (wrk prints the last two lines only when not 0).
grep -E 'requests in|Requests/sec|Transfer/sec|Socket errors|Non-2xx' "$work/wrk.txt" | sed 's/^ */  /'
read -r n conn rd wr to bad < <(awk '
  /requests in/ { n=$1 }
  /Socket errors:/ { conn=$4+0; rd=$6+0; wr=$8+0; to=$10+0 }
  /Non-2xx or 3xx responses:/ { bad=$NF+0 }
  END { printf "%d %d %d %d %d %d\n", n, conn, rd, wr, to, bad }' "$work/wrk.txt")
errors=$((conn + rd + wr + to))
echo "socket errors: connect $conn, read $rd, write $wr, timeout $to"
echo "non-2xx answers: $bad"
# Latency over the run from wrk's histogram (nearest rank), the kill included.
sort -n "$work/wrk.hist" 2>/dev/null | awk '
  { v[NR]=$1; c[NR]=$2; all+=$2 }
  END {
    if (all == 0) exit
    r50=int(0.50*all+0.5); r99=int(0.99*all+0.5); a=0; p50=p99=-1
    for (i=1; i<=NR; i++) { a+=c[i]; if (p50<0 && a>=r50) p50=v[i]; if (p99<0 && a>=r99) p99=v[i] }
    printf "latency: p50 %.3f ms  p99 %.3f ms  max %.3f ms\n", p50/1000, p99/1000, v[NR]/1000 }'
echo "sampled answers: $checked checked, $wrong wrong"
if [ "$wrk_rc" -ne 0 ] || [ "$n" -eq 0 ]; then
  echo "wrk failed (exit status $wrk_rc); its output:" >&2
  sed 's/^/  /' "$work/wrk.txt" >&2
fi
if ! kill -0 "$gw_pid" 2>/dev/null; then
  echo "wiregate exited during the run; its log's last lines:" >&2
  tail -n 20 "$work/gateway.log" | sed 's/^/  /' >&2
fi
echo "fleet kill: $n requests, $bad non-2xx, $errors socket errors"
if [ "$bad" -gt 0 ] || [ "$errors" -gt 0 ] || [ "$wrong" -gt 0 ] || [ "$checked" -eq 0 ] || [ "$n" -eq 0 ] || [ "$wrk_rc" -ne 0 ]; then
  exit 1
fi
