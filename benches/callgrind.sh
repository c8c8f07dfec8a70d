#!/usr/bin/env bash
# Instruction counts (callgrind), the figures docs/performance.md quotes: the same binary, inputs
# and environment give the same count, so they compare builds where wall-clock benches cannot.
#
#   benches/callgrind.sh              # both parts below
#   benches/callgrind.sh pure         # the pure paths only (about 1 minute)
#   benches/callgrind.sh proxy        # the proxied call only (about 1 minute)
#   benches/callgrind.sh passthrough  # a passed-through call only (about 1 minute)
#   benches/callgrind.sh pipelined    # a proxied call, upstream pipelined (about 1 minute)
#   benches/callgrind.sh fleet        # a proxied call, the upstream three endpoints balanced by
#                                     # least request (about 1 minute)
#   benches/callgrind.sh jwt          # a proxied call with a cached JWT checked (about 1 minute)
#   benches/callgrind.sh apikey       # a proxied call with an API key checked (about 1 minute)
#   benches/callgrind.sh ratelimit    # a proxied call under one local rate limit (about 1 minute)
#   benches/callgrind.sh shared       # a proxied call under one rate limit shared through a
#                                     # redis-server the script starts (about 1 minute)
#   benches/callgrind.sh auth         # proxy, jwt, apikey, ratelimit and shared in one run, each
#                                     # with its ratio to proxy (about 6 minutes)
#   benches/callgrind.sh traced       # a proxied call with spans exported (`[tracing]`, ratio
#                                     # TRACE_RATIO, default 1.0) to examples/otlp_sink (about 1 minute)
#   benches/callgrind.sh tracing      # proxy, traced at 0.01 and traced at 1.0 in one run, each
#                                     # with its ratio to proxy (about 4 minutes)
#   benches/callgrind.sh nginx        # nginx's proxy_pass on the same upstream, the peer of
#                                     # the proxy part (about 1 minute; `all` runs it too)
#   REV=712ed07 benches/callgrind.sh proxy   # the same, for a past commit (built in a worktree)
#   benches/callgrind.sh shadow       # a shadowed route against the plain one (about 3 minutes)
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
# pipelined: the proxy part with `pipeline = 256` on the upstream (`src/upstream/pipeline/`),
#        driven by 32 connections unless CONNS says otherwise: pipelining only batches calls
#        when several are ready in the same tick.
# fleet: the proxy part with the upstream as `endpoints` = three examples/legacy_upstream
#        processes (on UP_PORT, FLEET_PORT_2 and FLEET_PORT_3), `balance = "least_request"`:
#        what choosing among endpoints adds to a call.
# jwt, apikey, ratelimit, shared: the proxy part behind the gate: `[auth] mode = "required"`
#        and `strip_credentials = true` (the credential checked here, not passed upstream), with
#        `[[auth.jwt]]` (an ES256 key set on disk, examples/jwt_mint, the same token on every
#        call, so it is verified once and found in the cache after), or with `[auth.api_keys]`
#        (one key's digest); or one `[[rate_limits]]` on every call keyed by the client's address
#        with its rate far above the load (every call spends a token, none is refused), local or
#        `shared = true` through `[cluster]` on a redis-server on REDIS_PORT; for that one the
#        script also prints the Redis commands per 100 calls of the long run.
# shadow: whether, at shadow_sample = 1.0, the primary path drops by at most the shadow
#        exchange's own cost, in instructions, one run: the proxy part's plain gateway, then the
#        same route with `shadow` to a second examples/legacy_upstream at shadow_sample = 1.0
#        (short and long runs each; before a shadowed gateway stops, the script waits until
#        every call's shadow has been compared), each thread counted apart
#        (--separate-threads=yes). Prints instructions per call plain and shadowed (all threads),
#        what the shadow added per call, and the shadow's own cost per call measured two ways:
#          the shadow thread: every instruction of the thread that sends the shadows
#            (`wiregate-shadow`, found by its function `wiregate::migration::shadow::serve`):
#            the shadow jobs, their sockets' readiness, timers and scheduling, none of which the
#            primary's threads run. A build without that thread (where the shadows run on the
#            primary's worker) has no such figure;
#          the drain task: callgrind's inclusive cost of
#            `wiregate::migration::shadow::drain`, the task that takes each shadow off the queue
#            and runs it (the exchange with the shadow upstream, both answers compared, the
#            figures counted), without its runtime's work outside the task's polls;
#        and the caller's hand-off (inclusive cost of `Migration::shadow_copy`, the call's copy,
#        and `migration::hand_off`, the answer's copy and the queue push; `Queue::offer` for a
#        build without `hand_off`), which runs on the primary's worker. Then the ratios added /
#        own for each measure, what the primary's threads pay beyond the shadow thread, the
#        parts of the shadow jobs (the callees of the FuturesUnordered that polls them: the
#        exchange is `forward`, or the `PollFn` of a `join!` when polled beside a noise
#        exchange), and where the added instructions go, per crate (all threads).
#
# traced: the proxy part with `[tracing] otlp_endpoint` on examples/otlp_sink (SINK_PORT),
#        `sample_ratio = TRACE_RATIO`, the other keys at their defaults: every sampled call's SERVER and
#        CLIENT spans recorded, batched, encoded and POSTed by the exporter task, all counted
#        (the exporter runs in the same process). The script prints the spans the sink took.
#
# UNGATED=1 with apikey sends the same requests (the key's header on every call) to a gateway
# with no gate: what the extra header costs the plain proxy, apart from checking it.
#
# CONNS=256 drives the proxy and passthrough parts with that many connections (default 4; 32 for
# pipelined): what a
# call costs when many connections are open and served in turn.
#
# GW_BIN=<a wiregate binary> measures that build instead of this tree's (a before binary, say,
# measured in the same run as the after one).
#
# NO_BUILD=1 uses the release binaries as they are. Installs valgrind and wrk with apt-get when
# they are missing. Only loopback is used.
set -euo pipefail
cd "$(dirname "$0")/.."
PART=${1:-all}
UP_PORT=${UP_PORT:-19210}
GW_PORT=${GW_PORT:-19211}
SHADOW_PORT=${SHADOW_PORT:-19212}
FLEET_PORT_2=${FLEET_PORT_2:-19213}
FLEET_PORT_3=${FLEET_PORT_3:-19214}
REDIS_PORT=${REDIS_PORT:-19215}
SINK_PORT=${SINK_PORT:-19216}
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

# The output files of a run: FILE itself, or FILE-01, FILE-02, ... (one a thread) under
# --separate-threads=yes.
outputs() { local f; for f in "$1" "$1"-*; do [ -s "$f" ] && echo "$f"; done; return 0; }

# The total instructions of a run, every thread.
totals() { local f s=0; for f in $(outputs "$1"); do s=$((s + $(total "$f"))); done; echo "$s"; }

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

# build: the release gateway and the legacy upstream, at $REV when set; sets $target.
build() {
  local root=.
  target=target
  if [ -n "${REV:-}" ]; then
    git worktree add --detach "$work/tree" "$REV" >/dev/null
    root=$work/tree
    target=$PWD/target/callgrind-rev
  fi
  # The gateway on its own: built with an example, it would get the dev-dependencies' tokio
  # features (`test-util`: every clock reading checks for a paused clock), as shipped it has not.
  [ -n "${NO_BUILD:-}" ] || (cd "$root" && CARGO_TARGET_DIR=$target cargo build --release --quiet --bin wiregate \
    && CARGO_TARGET_DIR=$target cargo build --release --quiet --example legacy_upstream ${MINT:+--example jwt_mint} ${SINK:+--example otlp_sink})
  need wrk wrk
  for port in "$@"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "127.0.0.1:$port is taken: set UP_PORT / GW_PORT / SHADOW_PORT" >&2
      exit 1
    fi
  done
  "$target/release/examples/legacy_upstream" "127.0.0.1:$UP_PORT" >/dev/null &
  pids+=($!)
  if [ "${MODE:-}" = traced ]; then
    "$target/release/examples/otlp_sink" "127.0.0.1:$SINK_PORT" >/dev/null &
    pids+=($!)
  fi
  if [ "${MODE:-}" = fleet ]; then
    for port in "$FLEET_PORT_2" "$FLEET_PORT_3"; do
      "$target/release/examples/legacy_upstream" "127.0.0.1:$port" >/dev/null &
      pids+=($!)
    done
  fi
  rpc_body='{"jsonrpc":"2.0","id":1,"method":"echo","params":{"plan_id":"P1","n":1}}'
  path=/rpc expect='"result":{' counter=wiregate_requests_total
  if [ "${MODE:-}" = passthrough ]; then
    rpc_body='{"a2a_version":"1.0","request_id":"r-1","operation":"echo","params":{"plan_id":"P1","n":1},"auth":null}'
    path=/a2a expect='"status":"success"' counter=wiregate_passthrough_requests_total
  fi
  printf 'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = [[%s]]\n' "$rpc_body" >"$work/rpc.lua"
  # The credential every call carries, for curl's first call and wrk's.
  cred=()
}

# gate MODE -> appends MODE's `[auth]` or `[[rate_limits]]` to $work/plain.toml and sets the
# credential header wrk and curl send ($cred) and what the calls are ($what).
gate() {
  case $1 in
    jwt)
      "$target/release/examples/jwt_mint" "$work"
      cat "$work/auth.toml" >>"$work/plain.toml"
      cred=(-H "authorization: Bearer $(cat "$work/token")")
      printf 'wrk.headers["Authorization"] = "Bearer %s"\n' "$(cat "$work/token")" >>"$work/rpc.lua"
      what="proxied JSON-RPC -> legacy call, a cached ES256 JWT checked" ;;
    apikey)
      local key=bench-key-0123456789
      printf '[[keys]]\nid = "bench"\nsha256 = "%s"\n' "$(printf %s "$key" | sha256sum | cut -d' ' -f1)" >"$work/keys.toml"
      [ -n "${UNGATED:-}" ] ||
        printf '[auth]\nmode = "required"\nstrip_credentials = true\n[auth.api_keys]\nfile = "%s"\n' "$work/keys.toml" >>"$work/plain.toml"
      cred=(-H "x-api-key: $key")
      printf 'wrk.headers["x-api-key"] = "%s"\n' "$key" >>"$work/rpc.lua"
      what="proxied JSON-RPC -> legacy call, an API key checked" ;;
    ratelimit | shared)
      local shared=false
      if [ "$1" = shared ]; then
        need redis-server redis-server
        redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
        pids+=($!)
        for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
        printf '[cluster]\nredis = "redis://127.0.0.1:%s"\nnode_id = "bench"\n' "$REDIS_PORT" >>"$work/plain.toml"
        shared=true
      fi
      printf '[[rate_limits]]\nname = "all"\nmatch = ["*"]\nkey = "ip"\nrate_per_s = 10000000\nburst = 1000000\nshared = %s\n' "$shared" >>"$work/plain.toml"
      what="proxied JSON-RPC -> legacy call, one rate limit (shared: $shared)" ;;
  esac
}

# redis_commands -> the commands the script's redis-server has processed (0 without one).
redis_commands() {
  { redis-cli -p "$REDIS_PORT" info stats 2>/dev/null || true; } |
    awk -F: '/^total_commands_processed/ { print $2 + 0; f = 1 } END { if (!f) print 0 }'
}

# config NAME [ROUTE EXTRA] -> $work/NAME.toml: the gateway on $GW_PORT, one route to the legacy
# upstream (with EXTRA keys, and a `shadow` upstream on $SHADOW_PORT).
config() {
  cat >"$work/$1.toml" <<TOML
[server]
listen = "127.0.0.1:$GW_PORT"
worker_threads = 1
[[upstreams]]
name = "legacy"
url = "http://127.0.0.1:$UP_PORT/a2a"
dialect = "legacy"
[[upstreams]]
name = "shadow"
url = "http://127.0.0.1:$SHADOW_PORT/a2a"
dialect = "legacy"
[[routes]]
name = "r"
methods = ["*"]
upstream = "legacy"
${2:-}
TOML
}

# shadows_settled -> waits until the gateway's shadow figures account for every call.
shadows_settled() {
  local calls done_
  for _ in $(seq 600); do
    calls=$(curl -s "http://127.0.0.1:$GW_PORT/metrics" | awk '/^wiregate_requests_total/ { s += $NF } END { print s + 0 }')
    done_=$(curl -s "http://127.0.0.1:$GW_PORT/migration" |
      grep -o '"\(match\|diff\|noise\|shadow_error\|dropped\)":[0-9]*' | awk -F: '{ s += $2 } END { print s + 0 }')
    [ "$done_" -ge "$calls" ] && return 0
    sleep 0.2
  done
  echo "the shadows did not settle: $done_ of $calls" >&2
  exit 1
}

# run NAME SECONDS -> "instructions calls", and leaves the output in $work/NAME.SECONDS
run() {
  RUST_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$work/$1.$2" ${THREADS:+--separate-threads=yes} \
    "${GW_BIN:-$target/release/wiregate}" --config "$work/$1.toml" >/dev/null 2>&1 &
  local gw=$!
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$GW_PORT/healthz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  local answer
  answer=$(curl -s -H 'content-type: application/json' "${cred[@]}" -d "$rpc_body" "http://127.0.0.1:$GW_PORT$path")
  [[ $answer == *"$expect"* ]] || { echo "the gateway did not answer a result: $answer" >&2; exit 1; }
  local before_redis
  before_redis=$(redis_commands)
  wrk -t1 -c"$CONNS" -d"$2s" -s "$work/rpc.lua" "http://127.0.0.1:$GW_PORT$path" >"$work/wrk.$1.$2" 2>&1
  echo $(($(redis_commands) - before_redis)) >"$work/redis.$2"
  grep -q 'Non-2xx\|Socket errors' "$work/wrk.$1.$2" && { echo "wrk saw errors:" >&2; cat "$work/wrk.$1.$2" >&2; exit 1; }
  [ "$1" = shadowed ] && shadows_settled
  local calls
  calls=$(curl -s "http://127.0.0.1:$GW_PORT/metrics" | awk -v m="$counter" '$0 ~ "^" m { s += $NF } END { print s + 0 }')
  [ "$1" = shadowed ] && curl -s "http://127.0.0.1:$GW_PORT/migration" >"$work/migration.$2"
  curl -s "http://127.0.0.1:$GW_PORT/metrics" | awk '/^wiregate_trace_spans_dropped_total/ { print $2; f = 1 } END { if (!f) print 0 }' >"$work/dropped.$2"
  kill -TERM "$gw"
  wait "$gw" || true
  # quanta's clock calibration at start-up (the metrics recorder's) runs for a fixed wall time,
  # so its instructions vary with the machine's load (docs/performance.md): taken out of the
  # total, or it alone moves a per-call figure.
  local calibration
  calibration=$(inclusive "$work/$1.$2" 'quanta::Clock::new')
  echo "$(($(totals "$work/$1.$2") - calibration)) $calls"
}

# proxy MODE: MODE is proxy (a translated POST /rpc), pipelined (the same, the upstream
# pipelined) or passthrough (POST /a2a passed through)
proxy() {
  MODE=$1
  if [ "$MODE" = fleet ]; then build "$UP_PORT" "$GW_PORT" "$FLEET_PORT_2" "$FLEET_PORT_3"; else build "$UP_PORT" "$GW_PORT"; fi
  config plain
  local what="proxied JSON-RPC -> legacy call"
  if [ "$MODE" = fleet ]; then
    # The legacy upstream's `url` line (the first), not the shadow's.
    sed -i "0,/^url = \"http:\/\/127.0.0.1:$UP_PORT\/a2a\"\$/s//endpoints = [\"http:\/\/127.0.0.1:$UP_PORT\/a2a\", \"http:\/\/127.0.0.1:$FLEET_PORT_2\/a2a\", \"http:\/\/127.0.0.1:$FLEET_PORT_3\/a2a\"]\nbalance = \"least_request\"/" "$work/plain.toml"
    what="proxied JSON-RPC -> legacy call, three endpoints, least_request"
  fi
  if [ "$MODE" = pipelined ]; then
    # The legacy upstream's `dialect` line (the first), not the shadow's.
    sed -i '0,/^dialect = "legacy"$/s//dialect = "legacy"\npipeline = 256/' "$work/plain.toml"
    what="proxied JSON-RPC -> legacy call, pipeline = 256"
  fi
  if [ "$MODE" = passthrough ]; then
    printf '[[passthrough]]\nprefix = "/"\nupstream = "legacy"\n' >>"$work/plain.toml"
    what="passed-through POST /a2a"
  fi
  case $MODE in jwt | apikey | ratelimit | shared) gate "$MODE" ;; esac
  if [ "$MODE" = traced ]; then
    printf '[tracing]\notlp_endpoint = "http://127.0.0.1:%s"\nsample_ratio = %s\n' \
      "$SINK_PORT" "${TRACE_RATIO:-1.0}" >>"$work/plain.toml"
    what="proxied JSON-RPC -> legacy call, spans exported at sample_ratio ${TRACE_RATIO:-1.0}"
  fi
  read -r a n_a < <(run plain "$SHORT_S")
  read -r b n_b < <(run plain "$LONG_S")
  echo "$what, ${GW_BIN:-${REV:-this tree}}, $CONNS connections: $((n_b - n_a)) calls between a ${SHORT_S} s and a ${LONG_S} s run"
  awk -v a="$a" -v b="$b" -v na="$n_a" -v nb="$n_b" \
    'BEGIN { printf "instructions per call: %.0f (%.1f k)\n", (b - a) / (nb - na), (b - a) / (nb - na) / 1000 }'
  if [ "$MODE" = traced ]; then
    echo "spans the sink took over both runs: $(curl -s "http://127.0.0.1:$SINK_PORT/spans") for $((n_a + n_b)) calls (2 spans a sampled call; none may be dropped: $(cat "$work/dropped.$SHORT_S") and $(cat "$work/dropped.$LONG_S") dropped)"
  fi
  if [ "$MODE" = shared ]; then
    awk -v r="$(cat "$work/redis.$LONG_S")" -v n="$n_b" \
      'BEGIN { printf "redis commands in the long run: %d for %d calls (%.2f per 100 calls)\n", r, n, 100 * r / n }'
  fi
  # Where the difference went: self cost per crate (from the functions' names; libc by its
  # file), long run minus short run, per call, so start-up cancels out here too.
  echo "where they go (self cost per proxied call, by crate, of the functions making 99 % of it):"
  crates "$work/plain.$SHORT_S" >"$work/crates.short"
  crates "$work/plain.$LONG_S" >"$work/crates.long"
  awk -v n="$((n_b - n_a))" '
    FNR == NR { short[$1] = $2; next }
    { per = ($2 - short[$1]) / n; if (per >= 100) printf "%10.1f k  %s\n", per / 1000, $1 }' \
    "$work/crates.short" "$work/crates.long" | sort -nr
}

# fname: callgrind_annotate's function lines as "instructions<TAB>function" (the file and
# object parts cut off).
fname() {
  awk '/^ *[0-9,]+ \([ 0-9.]+%\) / {
    ir = $1; gsub(",", "", ir)
    fn = $0; sub(/^ *[0-9,]+ \([ 0-9.]+%\) +/, "", fn); sub(/ \[[^]]*\]$/, "", fn)
    sub(/ \([0-9,]+x\)$/, "", fn)
    print ir "\t" fn }'
}

# inclusive RUN FUNCTION -> FUNCTION's inclusive cost (summed over the run's threads).
inclusive() {
  local f s=0 v
  for f in $(outputs "$1"); do
    v=$(callgrind_annotate --inclusive=yes --threshold=100 "$f" 2>/dev/null | fname |
      awk -F'\t' -v f="$2" '{ fn = $2; sub(/^[^:]*:/, "", fn) } fn == f && !found { v = $1; found = 1 } END { print v + 0 }')
    s=$((s + v))
  done
  echo "$s"
}

# thread_file RUN FUNCTION -> the output of the thread that ran FUNCTION (empty when no
# thread's output names it); thread_of RUN FUNCTION -> its total instructions.
thread_file() {
  local f
  for f in $(outputs "$1"); do
    grep -q "^c\?fn=([0-9]*) $2\$" "$f" && { echo "$f"; return 0; }
  done
  return 0
}
thread_of() {
  local f
  f=$(thread_file "$1" "$2")
  [ -z "$f" ] || total "$f"
}

# from RUN CALLER CALLEE -> the inclusive cost of CALLER's calls to CALLEE (the call tree's
# "> callee" lines under CALLER's "* caller" line), summed over the run's threads.
from() {
  local f
  for f in $(outputs "$1"); do callgrind_annotate --tree=calling --inclusive=yes --threshold=100 "$f" 2>/dev/null; done | fname |
    awk -F'\t' -v caller="$2" -v callee="$3" '
      { fn = $2 }
      fn ~ /^\* / { sub(/^\* +[^:]*:/, "", fn); inside = (fn == caller); next }
      fn ~ /^> / { sub(/^> +[^:]*:/, "", fn); if (inside && fn == callee) s += $1 }
      END { print s + 0 }'
}

# callees RUN CALLER -> "instructions<TAB>callee" for each of CALLER's callees (inclusive,
# summed over the run's threads).
callees() {
  local f
  for f in $(outputs "$1"); do callgrind_annotate --tree=calling --inclusive=yes --threshold=100 "$f" 2>/dev/null; done | fname |
    awk -F'\t' -v caller="$2" '
      { fn = $2 }
      fn ~ /^\* / { sub(/^\* +[^:]*:/, "", fn); inside = (fn == caller); next }
      fn ~ /^> / && inside { sub(/^> +[^:]*:/, "", fn); s[fn] += $1 }
      END { for (f in s) print s[f] "\t" f }'
}

shadow() {
  THREADS=1
  build "$UP_PORT" "$GW_PORT" "$SHADOW_PORT"
  "$target/release/examples/legacy_upstream" "127.0.0.1:$SHADOW_PORT" >/dev/null &
  pids+=($!)
  config plain
  config shadowed 'shadow = "shadow"
shadow_sample = 1.0'
  read -r pa pn_a < <(run plain "$SHORT_S")
  read -r pb pn_b < <(run plain "$LONG_S")
  read -r sa sn_a < <(run shadowed "$SHORT_S")
  read -r sb sn_b < <(run shadowed "$LONG_S")
  for f in "$work/migration.$SHORT_S" "$work/migration.$LONG_S"; do
    grep -q '"dropped":0' "$f" || { echo "shadows were dropped (the figures would be low): $(cat "$f")" >&2; exit 1; }
  done
  local S="$work/shadowed.$SHORT_S" L="$work/shadowed.$LONG_S"
  # The shadow thread, by the function it runs; the drain task (the queue's receiving end,
  # polling each job's `run` inline); the exchange; the caller's hand-off.
  local thread_fn='wiregate::migration::shadow::serve'
  local task='wiregate::migration::shadow::drain::{{closure}}' exchange='wiregate::upstream::call::forward::{{closure}}'
  local jobs='<futures_util::stream::futures_unordered::FuturesUnordered<Fut> as futures_core::stream::Stream>::poll_next'
  local copy='wiregate::migration::Migration::shadow_copy' handoff='wiregate::migration::hand_off'
  local th_a th_b own_a own_b ex_a ex_b cp_a cp_b ho_a ho_b
  th_a=$(thread_of "$S" "$thread_fn")
  th_b=$(thread_of "$L" "$thread_fn")
  own_a=$(inclusive "$S" "$task")
  own_b=$(inclusive "$L" "$task")
  ex_a=$(from "$S" "$jobs" "$exchange")
  ex_b=$(from "$L" "$jobs" "$exchange")
  local exname="the upstream exchange (rpc::forward, when polled on its own)"
  if [ "$ex_b" = 0 ]; then
    # On the shadow thread the jobs are polled inside ForEachConcurrent (the FuturesUnordered
    # inlined) and `forward` inside `run`: the HTTP exchange is UpstreamClient::post, read on
    # that thread alone (the primary's exchanges are posts too).
    jobs='<futures_util::stream::stream::for_each_concurrent::ForEachConcurrent<St,Fut,F> as core::future::future::Future>::poll'
    local post='wiregate::upstream::UpstreamClient::post::{{closure}}'
    if [ -n "$th_b" ]; then
      exname="the HTTP exchange (UpstreamClient::post, on the shadow thread)"
      ex_a=$(inclusive "$(thread_file "$S" "$thread_fn")" "$post")
      ex_b=$(inclusive "$(thread_file "$L" "$thread_fn")" "$post")
    else
      # No shadow thread, `forward` inlined: the posts the shadow jobs poll.
      exname="the HTTP exchange (UpstreamClient::post, polled by the shadow jobs)"
      jobs='<futures_util::stream::futures_unordered::FuturesUnordered<Fut> as futures_core::stream::Stream>::poll_next'
      ex_a=$(from "$S" "$jobs" "$post")
      ex_b=$(from "$L" "$jobs" "$post")
    fi
  fi
  cp_a=$(inclusive "$S" "$copy")
  cp_b=$(inclusive "$L" "$copy")
  ho_a=$(inclusive "$S" "$handoff")
  ho_b=$(inclusive "$L" "$handoff")
  if [ "$ho_b" = 0 ]; then
    handoff='wiregate::migration::shadow::Queue::offer'
    ho_a=$(inclusive "$S" "$handoff")
    ho_b=$(inclusive "$L" "$handoff")
  fi
  echo "shadowed route (shadow_sample = 1.0, every shadow compared, none dropped), ${REV:-this tree}:"
  echo "  plain: $((pn_b - pn_a)) calls, shadowed: $((sn_b - sn_a)) calls between a ${SHORT_S} s and a ${LONG_S} s run"
  awk -v pa="$pa" -v pb="$pb" -v pna="$pn_a" -v pnb="$pn_b" -v sa="$sa" -v sb="$sb" -v sna="$sn_a" -v snb="$sn_b" \
      -v ta="$th_a" -v tb="$th_b" -v oa="$own_a" -v ob="$own_b" -v ea="$ex_a" -v eb="$ex_b" \
      -v ca="$cp_a" -v cb="$cp_b" -v ha="$ho_a" -v hb="$ho_b" -v hname="${handoff##*::}" -v exname="$exname" 'BEGIN {
    n = snb - sna
    plain = (pb - pa) / (pnb - pna); shadowed = (sb - sa) / n; added = shadowed - plain
    own = (ob - oa) / n; ex = (eb - ea) / n; hand = ((cb - ca) + (hb - ha)) / n
    printf "  instructions per call (every thread): plain %.1f k, shadowed %.1f k (throughput at equal CPU: %.3f of plain)\n", plain / 1000, shadowed / 1000, plain / shadowed
    printf "  added by the shadow: %.1f k per call\n", added / 1000
    if (tb != "") {
      th = (tb - ta) / n
      printf "  the shadow thread (wiregate-shadow), all its instructions: %.1f k per call\n", th / 1000
      printf "    of it, the drain task (shadow::drain, inclusive): %.1f k; %s: %.1f k\n", own / 1000, exname, ex / 1000
    } else {
      printf "  the shadow thread: none in this build (the shadows run on the primary'"'"'s worker)\n"
      printf "  the drain task (shadow::drain, inclusive): %.1f k per call; %s: %.1f k\n", own / 1000, exname, ex / 1000
    }
    printf "  the caller'"'"'s hand-off (shadow_copy + %s, inclusive, on the caller'"'"'s thread): %.2f k per call\n", hname, hand / 1000
    printf "  added / the drain task: %.2f (beyond it: %.1f k per call)\n", added / own, (added - own) / 1000
    if (tb != "") {
      printf "  added / the shadow thread: %.3f (beyond it, on the primary'"'"'s threads: %.2f k per call)\n", added / th, (added - th) / 1000
      printf "  added / (the shadow thread + the hand-off): %.3f (beyond both: %.2f k per call)\n", added / (th + hand), (added - th - hand) / 1000
    } else {
      printf "  added / (the drain task + the hand-off): %.3f (beyond both: %.2f k per call)\n", added / (own + hand), (added - own - hand) / 1000
    }
  }'
  echo "the shadow jobs' parts (inclusive, per call, the callees of the FuturesUnordered polling them):"
  callees "$S" "$jobs" >"$work/parts.short"
  callees "$L" "$jobs" >"$work/parts.long"
  awk -F'\t' -v n="$((sn_b - sn_a))" '
    FNR == NR { short[$2] = $1; next }
    { per = ($1 - short[$2]) / n; if (per >= 100) printf "%10.1f k  %s\n", per / 1000, $2 }' \
    "$work/parts.short" "$work/parts.long" | sort -nr
  echo "where the added instructions go (self cost per call, shadowed minus plain, by crate):"
  crates "$work/plain.$SHORT_S" >"$work/crates.ps"
  crates "$work/plain.$LONG_S" >"$work/crates.pl"
  crates "$work/shadowed.$SHORT_S" >"$work/crates.ss"
  crates "$work/shadowed.$LONG_S" >"$work/crates.sl"
  awk -v pn="$((pn_b - pn_a))" -v sn="$((sn_b - sn_a))" '
    FILENAME ~ /crates.ps$/ { ps[$1] = $2; next }
    FILENAME ~ /crates.pl$/ { pl[$1] = $2; next }
    FILENAME ~ /crates.ss$/ { ss[$1] = $2; next }
    { sl[$1] = $2 }
    END {
      for (c in sl) seen[c] = 1
      for (c in pl) seen[c] = 1
      for (c in seen) { d = (sl[c] - ss[c]) / sn - (pl[c] - ps[c]) / pn; if (d >= 100 || d <= -100) printf "%10.1f k  %s\n", d / 1000, c }
    }' "$work/crates.ps" "$work/crates.pl" "$work/crates.ss" "$work/crates.sl" | sort -nr
}

# crates RUN -> "crate instructions" lines: callgrind_annotate's function list (99 % of the
# total) summed by the crate a function's name starts with (and over the run's threads).
crates() {
  local f
  for f in $(outputs "$1"); do callgrind_annotate --threshold=99 "$f" 2>/dev/null; done |
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

# nginx: nginx's `proxy_pass` (as benches/load.sh configures it: keepalive to the upstream, HTTP/1.1)
# in front of the same examples/legacy_upstream, under callgrind, one process (`master_process
# off`: the worker is the process measured), the legacy envelope posted to /a2a by the same wrk;
# instructions per call the same way (two run lengths subtracted), the calls counted by wrk.
# The peer the proxied call's figure is read against, measured by the same script.
nginx_part() {
  MODE=passthrough
  build "$UP_PORT" "$GW_PORT"
  need nginx nginx-light
  local a n_a b n_b
  read -r a n_a < <(nginx_run "$SHORT_S")
  read -r b n_b < <(nginx_run "$LONG_S")
  echo "nginx proxy_pass, POST /a2a, $(nginx -v 2>&1 | sed 's/.*: //'), $CONNS connections: $((n_b - n_a)) calls between a ${SHORT_S} s and a ${LONG_S} s run"
  awk -v a="$a" -v b="$b" -v na="$n_a" -v nb="$n_b" \
    'BEGIN { printf "instructions per call: %.0f (%.1f k)\n", (b - a) / (nb - na), (b - a) / (nb - na) / 1000 }'
}

# nginx_run SECONDS -> "instructions calls" of nginx under callgrind for a run of that length.
nginx_run() {
  cat >"$work/nginx.conf" <<NGINX
master_process off;
daemon off;
worker_processes 1;
error_log $work/nginx.err;
pid $work/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  upstream up { server 127.0.0.1:$UP_PORT; keepalive 256; }
  server {
    listen 127.0.0.1:$GW_PORT;
    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
NGINX
  valgrind --tool=callgrind --callgrind-out-file="$work/nginx.$1" nginx -c "$work/nginx.conf" -p "$work" >/dev/null 2>&1 &
  local ng=$! answer calls
  for _ in $(seq 600); do
    (exec 3<>"/dev/tcp/127.0.0.1/$GW_PORT") 2>/dev/null && break
    sleep 0.1
  done
  answer=$(curl -s -H 'content-type: application/json' -d "$rpc_body" "http://127.0.0.1:$GW_PORT$path")
  [[ $answer == *"$expect"* ]] || { echo "nginx did not answer a result: $answer" >&2; exit 1; }
  wrk -t1 -c"$CONNS" -d"$1s" -s "$work/rpc.lua" "http://127.0.0.1:$GW_PORT$path" >"$work/wrk.nginx.$1" 2>&1
  grep -q 'Non-2xx\|Socket errors' "$work/wrk.nginx.$1" && { echo "wrk saw errors:" >&2; cat "$work/wrk.nginx.$1" >&2; exit 1; }
  # wrk's answers, and the one checked above.
  calls=$(($(awk '/requests in/ { print $1 }' "$work/wrk.nginx.$1") + 1))
  kill -TERM "$ng"
  wait "$ng" || true
  echo "$(totals "$work/nginx.$1") $calls"
}

# auth: the proxy part, then each gate mode, each a run of this script (one build, one upstream
# at a time), and each mode's instructions per call over the plain proxy's.
auth_part() {
  [ -n "${NO_BUILD:-}" ] || cargo build --release --quiet --bin wiregate --example legacy_upstream --example jwt_mint
  local m per base=
  for m in proxy jwt apikey ratelimit shared; do
    NO_BUILD=1 "$0" "$m" | tee "$work/auth.$m"
    per=$(awk '/^instructions per call:/ { print $4; exit }' "$work/auth.$m")
    [ -z "$base" ] && base=$per
    awk -v m="$m" -v p="$per" -v b="$base" 'BEGIN { printf "%s / proxy: %.3f (%+.1f %%)\n\n", m, p / b, 100 * (p - b) / b }'
  done
}

# tracing: the proxy part, then traced at 0.01 and at 1.0, each a run of this script, and each
# one's instructions per call over the plain proxy's.
tracing_part() {
  [ -n "${NO_BUILD:-}" ] || cargo build --release --quiet --bin wiregate --example legacy_upstream --example otlp_sink
  local m ratio per base=
  for m in proxy traced:0.01 traced:1.0; do
    ratio=${m#*:}
    TRACE_RATIO=$ratio NO_BUILD=1 "$0" "${m%%:*}" | tee "$work/tracing.$m"
    per=$(awk '/^instructions per call:/ { print $4; exit }' "$work/tracing.$m")
    [ -z "$base" ] && base=$per
    awk -v m="$m" -v p="$per" -v b="$base" 'BEGIN { printf "%s / proxy: %.3f (%+.1f %%)\n\n", m, p / b, 100 * (p - b) / b }'
  done
}

case $PART in
  pure) pure ;;
  traced) SINK=1 CONNS=${CONNS:-4} proxy "$PART" ;;
  tracing) CONNS=${CONNS:-4} tracing_part ;;
  proxy | passthrough | fleet) CONNS=${CONNS:-4} proxy "$PART" ;;
  jwt | apikey | ratelimit | shared) MINT=1 CONNS=${CONNS:-4} proxy "$PART" ;;
  auth) CONNS=${CONNS:-4} auth_part ;;
  pipelined) CONNS=${CONNS:-32} proxy "$PART" ;;
  nginx) CONNS=${CONNS:-4} nginx_part ;;
  shadow) CONNS=${CONNS:-4} shadow ;;
  all) pure; echo; CONNS=${CONNS:-4} proxy proxy; echo; CONNS=${CONNS:-4} nginx_part ;;
  *) echo "usage: $0 [pure|proxy|passthrough|pipelined|fleet|jwt|apikey|ratelimit|shared|auth|traced|tracing|nginx|shadow|all]" >&2; exit 2 ;;
esac
