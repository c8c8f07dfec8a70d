#!/usr/bin/env bash
# Chaos soak: three release replicas on one redis-server under mixed load, with faults injected
# at random, checked at the end (examples/chaos_client says what it does and asserts).
#
#   benches/chaos.sh                  # 30 minutes
#   benches/chaos.sh --minutes 5      # or CHAOS_MINUTES=5; 3..240
#   SEED=7 BASE_PORT=19300 benches/chaos.sh
#
# Faults, one every 20..60 s after the warm-up (WARMUP_SECS, 150 s; 40 % of runs under 10
# minutes): a replica SIGKILLed and started again, redis-server restarted, a replica's sid child
# SIGKILLed, the legacy upstream refusing connections for 5 s. Exit 1 on any unexcused failure,
# hang, repeated or silently skipped SSE id, task not final at the end, or RSS/fds of a replica
# beyond 10 % of their warm-up level. Needs redis-server on PATH. Loopback only; ports
# BASE_PORT..BASE_PORT+5 (19200).
set -euo pipefail
cd "$(dirname "$0")/.."

MINUTES=${CHAOS_MINUTES:-30}
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) MINUTES=${2:?--minutes needs a number}; shift 2 ;;
    --minutes=*) MINUTES=${1#--minutes=}; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "chaos.sh: unknown argument $1 (--minutes N)" >&2; exit 2 ;;
  esac
done
case "$MINUTES" in ''|*[!0-9]*) echo "chaos.sh: --minutes takes a whole number" >&2; exit 2 ;; esac
if [ "$MINUTES" -lt 3 ] || [ "$MINUTES" -gt 240 ]; then
  echo "chaos.sh: --minutes must be 3..240" >&2; exit 2
fi
command -v redis-server >/dev/null || { echo "chaos.sh: redis-server is not on PATH" >&2; exit 2; }
SECS=$((MINUTES * 60))
if [ -n "${WARMUP_SECS:-}" ]; then WARMUP=$WARMUP_SECS
elif [ "$SECS" -ge 600 ]; then WARMUP=150
else WARMUP=$((SECS * 2 / 5)); fi

if [ -z "${CHAOS_NO_BUILD:-}" ]; then
  cargo build --release --examples --bins
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/wiregate-chaos.XXXXXX")
# Private copies: a build into target/ meanwhile does not touch the run.
mkdir -p "$work/bin"
for b in wiregate examples/fake_sid examples/legacy_upstream examples/chaos_client; do
  cp "target/release/$b" "$work/bin/"
done
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain --untracked-files=no -- src Cargo.toml Cargo.lock 2>/dev/null | wc -l)
seed=${SEED:-$(date +%s)}
echo "chaos: ${MINUTES} min, commit $commit ($dirty changed files in src/ and the manifest), $(date -u +%Y-%m-%dT%H:%MZ), seed $seed, files in $work"

rc=0
timeout --kill-after=10 $((SECS + 600)) "$work/bin/chaos_client" --bins "$work/bin" --work "$work/run" \
  --secs "$SECS" --warmup "$WARMUP" --base-port "${BASE_PORT:-19200}" --seed "$seed" \
  ${CHAOS_CLIENT_ARGS:-} || rc=$?
# What the replicas logged at WARN and ERROR, by message, for the record.
echo "replica WARN/ERROR lines, by message (the faults cause them):"
cat "$work"/run/r*.log 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' | grep -E ' (WARN|ERROR) ' \
  | sed -E 's/^[^ ]+ +//; s/[0-9a-f]{8}-[0-9a-f-]{27}/<uuid>/g; s/[0-9]+/N/g' | cut -c1-140 \
  | sort | uniq -c | sort -rn | head -25 || true
panics=$(cat "$work"/run/r*.log 2>/dev/null | grep -c 'panicked' || true)
if [ "$panics" -ne 0 ]; then echo "FAIL: $panics panics in the replicas' logs"; rc=1; fi
if [ "$rc" -ne 0 ]; then echo "chaos: FAIL (files kept in $work)"; exit 1; fi
[ -n "${CHAOS_KEEP:-}" ] || rm -rf "$work"
echo "chaos: PASS"
