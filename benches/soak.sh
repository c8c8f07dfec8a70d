#!/usr/bin/env bash
# Soak: the release gateway under steady mixed traffic for a given time, checked at the end.
#
#   benches/soak.sh                 # 30 minutes
#   benches/soak.sh --minutes 3     # or SOAK_MINUTES=3; 1..240
#   PIPELINE=64 RATE=1500 benches/soak.sh --minutes 20   # the upstream pipelined, more calls/s
#
# Loopback (127.0.0.1) only. Starts, each from a private copy of the release binaries:
# - examples/legacy_upstream with --drop-feed-every 60: the legacy server, whose event feed is
#   relayed on a second port and dropped (every connection closed) once a minute;
# - wiregate, proxying JSON-RPC to that server (translated to the legacy envelope), reading its
#   event feed through the dropping relay (events.source), and running the fake sid
#   (examples/fake_sid, sid.command) for the sid bridge;
# - examples/soak_client: the load (RATE calls/s, default 200, over 8 connections: JSON-RPC calls,
#   batches, legacy envelopes, every answer checked), sid turns in 4 contexts, 100 SSE subscribers
#   (half on /events, half on the contexts' streams) that disconnect at random and resume with
#   Last-Event-ID, and the gateway's RSS and open fds sampled every 10 s.
# Then it reads the gateway's log. It fails (exit 1) when any subscriber lost, repeated or was
# told it missed (gap) an event, when RSS or open fds left 10 % of their level after the warm-up
# (WARMUP_SECS, 150 s by default; 40 % of shorter runs), or on any gateway error not injected:
# a non-2xx or error answer, a failed turn, a WARN/ERROR log line other than the one per
# injected feed drop, a subscriber cut off. All children are stopped on exit.
#
# The gateway's replay rings are made small (sid 512, events 128 events) so that they are full
# before the warm-up ends, and the client prefills each sid context with 1 100 turns (the bridge
# keeps 1 024 tasks per context): what grows after the warm-up is then a leak, not a cache
# filling up. Ports: UP_PORT (19100), the feed relay UP_PORT+1, GW_PORT (19102).
set -euo pipefail
cd "$(dirname "$0")/.."

MINUTES=${SOAK_MINUTES:-30}
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) MINUTES=${2:?--minutes needs a number}; shift 2 ;;
    --minutes=*) MINUTES=${1#--minutes=}; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "soak.sh: unknown argument $1 (--minutes N)" >&2; exit 2 ;;
  esac
done
case "$MINUTES" in ''|*[!0-9]*) echo "soak.sh: --minutes takes a whole number" >&2; exit 2 ;; esac
if [ "$MINUTES" -lt 1 ] || [ "$MINUTES" -gt 240 ]; then
  echo "soak.sh: --minutes must be 1..240" >&2; exit 2
fi
SECS=$((MINUTES * 60))
if [ -n "${WARMUP_SECS:-}" ]; then WARMUP=$WARMUP_SECS
elif [ "$SECS" -ge 600 ]; then WARMUP=150
else WARMUP=$((SECS * 2 / 5)); fi
UP_PORT=${UP_PORT:-19100}
FEED_PORT=$((UP_PORT + 1))
GW_PORT=${GW_PORT:-19102}
DROP_EVERY=${DROP_EVERY:-60}
RATE=${RATE:-200}
SUBSCRIBERS=${SUBSCRIBERS:-100}
# More options for examples/soak_client (see its docs), e.g. "--disconnect-mean 5 --turn-pause 500".
SOAK_CLIENT_ARGS=${SOAK_CLIENT_ARGS:-}
# 0: /metrics is read only at the end, as by a gateway nobody scrapes; N: every N s, as Prometheus.
SCRAPE_SECS=${SCRAPE_SECS:-0}
# N > 0: the legacy upstream is reached with `pipeline = N` (calls ready together written in one
# write on one connection, answers matched in order; src/outbound/pipeline/).
PIPELINE=${PIPELINE:-0}

if [ -z "${SOAK_NO_BUILD:-}" ]; then
  cargo build --release --examples --bins
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/wiregate-soak.XXXXXX")
# Private copies: another build replacing target/release meanwhile does not touch the run.
# SOAK_BIN_DIR: take the four binaries from there instead (a kept run's directory, say).
for b in wiregate examples/fake_sid examples/legacy_upstream examples/soak_client; do
  if [ -n "${SOAK_BIN_DIR:-}" ]; then cp "$SOAK_BIN_DIR/${b#examples/}" "$work/"; else cp "target/release/$b" "$work/"; fi
done
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain --untracked-files=no -- src Cargo.toml Cargo.lock 2>/dev/null | wc -l)
# Others may build into target/ meanwhile: say which gateway binary this run uses.
binary="$(sha256sum "$work/wiregate" | cut -c1-12), built $(date -u -r "${SOAK_BIN_DIR:-target/release}/wiregate" +%H:%M:%SZ)"

pids=()
gw_pid=""
cleanup() {
  set +e
  if [ -n "$gw_pid" ] && kill -0 "$gw_pid" 2>/dev/null; then
    # The gateway stops its sid children on SIGTERM; whatever is left is killed by pid.
    local kids
    kids=$(ps -o pid= --ppid "$gw_pid" 2>/dev/null)
    kill -TERM "$gw_pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$gw_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$gw_pid" 2>/dev/null
    for k in $kids; do kill -KILL "$k" 2>/dev/null; done
  fi
  # TERM first: timeout passes it on to the client it runs.
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  sleep 0.2
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  if [ -n "${SOAK_KEEP:-}" ]; then echo "soak: files kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$work/legacy_upstream" "127.0.0.1:$UP_PORT" --drop-feed-every "$DROP_EVERY" \
  --feed-addr "127.0.0.1:$FEED_PORT" >"$work/upstream.log" 2>&1 &
pids+=($!)
# The gateway starts once the feed relay listens (else its first connect fails, a WARN not injected).
for _ in $(seq 100); do grep -q 'event feed dropped every' "$work/upstream.log" 2>/dev/null && break; sleep 0.1; done

cat >"$work/gateway.toml" <<TOML
[server]
listen = "127.0.0.1:$GW_PORT"
[[upstreams]]
name = "legacy"
url = "http://127.0.0.1:$UP_PORT/a2a"
dialect = "legacy"
timeout_ms = 10000
pipeline = $PIPELINE
[[routes]]
methods = ["*"]
upstream = "legacy"
[sid]
enabled = true
command = ["$work/fake_sid", "--raw"]
replay_events = 512
keepalive_ms = 5000
[events]
source = "http://127.0.0.1:$FEED_PORT/events"
replay_events = 128
keepalive_ms = 5000
TOML

RUST_LOG=info NO_COLOR=1 "$work/wiregate" --config "$work/gateway.toml" >"$work/gateway.log" 2>&1 &
gw_pid=$!

echo "soak: ${MINUTES} min (warm-up ${WARMUP} s), gateway pid $gw_pid on 127.0.0.1:$GW_PORT, commit $commit ($dirty changed files in src/ and the manifest), wiregate $binary, feed dropped every ${DROP_EVERY} s, upstream pipeline ${PIPELINE}, /metrics scraped every ${SCRAPE_SECS} s (0: only at the end)"
client_rc=0
# The client stops itself after SECS (plus its end phase); timeout is the backstop. It runs in
# the background so that a signal to this script is handled at once (wait is interruptible).
timeout --kill-after=10 $((SECS + 300)) "$work/soak_client" \
  --gateway "http://127.0.0.1:$GW_PORT" --pid "$gw_pid" --secs "$SECS" --warmup "$WARMUP" \
  --rate "$RATE" --subscribers "$SUBSCRIBERS" --samples "$work/samples.csv" --scrape-every "$SCRAPE_SECS" ${SOAK_CLIENT_ARGS:-} &
client_pid=$!
pids+=($client_pid)
wait "$client_pid" || client_rc=$?

alive=1
kill -0 "$gw_pid" 2>/dev/null || alive=0
# Stop the gateway gracefully now, so its shutdown is in the log too.
kill -TERM "$gw_pid" 2>/dev/null || true
for _ in $(seq 100); do kill -0 "$gw_pid" 2>/dev/null || break; sleep 0.1; done
gw_rc=0
wait "$gw_pid" 2>/dev/null || gw_rc=$?

# The log, without colour codes should any remain.
sed 's/\x1b\[[0-9;]*m//g' "$work/gateway.log" >"$work/gateway.plain.log"
drops=$(grep -c 'feed dropped [0-9]' "$work/upstream.log" || true)
feed_ended=$(grep -E ' (WARN|ERROR) ' "$work/gateway.plain.log" | grep -c 'the event feed ended; reconnecting' || true)
unexplained=$(grep -E ' (WARN|ERROR) ' "$work/gateway.plain.log" | grep -vc 'the event feed ended; reconnecting' || true)
log_lines=$(wc -l <"$work/gateway.plain.log")
echo "gateway log: $log_lines lines; feed drops injected $drops, 'event feed ended' warnings $feed_ended, other WARN/ERROR lines $unexplained; gateway exit status $gw_rc after SIGTERM"
if [ -f "$work/samples.csv" ]; then
  echo "samples (t_s,rss_kb,fds,threads,subscribers_connected), every 6th:"
  awk 'NR == 1 || (NR - 2) % 6 == 0' "$work/samples.csv" | sed 's/^/  /'
fi

fail=0
if [ "$client_rc" -ne 0 ]; then echo "FAIL: the client's checks failed (exit $client_rc)"; fail=1; fi
if [ "$alive" -ne 1 ]; then echo "FAIL: the gateway died during the soak"; fail=1; fi
if [ "$unexplained" -ne 0 ]; then
  echo "FAIL: $unexplained WARN/ERROR lines in the gateway log not explained by the injected feed drops:"
  grep -E ' (WARN|ERROR) ' "$work/gateway.plain.log" | grep -v 'the event feed ended; reconnecting' | head -20 | sed 's/^/  /'
  fail=1
fi
if [ "$feed_ended" -ne "$drops" ]; then
  echo "FAIL: $drops feed drops injected but the gateway noticed $feed_ended"
  fail=1
fi
if [ "$MINUTES" -ge 2 ] && [ "$drops" -eq 0 ]; then
  echo "FAIL: no feed drop was injected"
  fail=1
fi
if [ "$fail" -ne 0 ]; then
  SOAK_KEEP=1
  echo "soak: FAIL"
  exit 1
fi
echo "soak: PASS"
