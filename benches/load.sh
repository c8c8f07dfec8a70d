#!/usr/bin/env bash
# Load test: the same fixed-answer legacy upstream reached directly, through nginx and haproxy as
# plain proxies (no translation), and through wiregate translating JSON-RPC -> legacy. One run,
# the same load for each; prints requests/s, p50/p99 latency, CPU per request, and wiregate's
# ratios. Every timed run is checked: wrk's socket errors and non-2xx answers are read, and
# answers are sampled during the run (a translated result, not an error); a run with any of
# those prints "errors" and what went wrong instead of a throughput figure, and no ratios.
#
#   benches/load.sh                 # 32 and 256 connections, 10 s each
#   DURATION=5s CONNS="32" benches/load.sh
#   ROUNDS=5 DURATION=2s benches/load.sh            # each row 5 times for 2 s, interleaved: the
#                                                    # rows in turn, the order rotated each round,
#                                                    # so rows that are compared are measured side
#                                                    # by side; a row's figures are over all its
#                                                    # rounds: requests over seconds, percentiles
#                                                    # of the merged latency histogram, CPU per
#                                                    # request
#   BASE_BIN=/path/to/old/wiregate benches/load.sh   # adds the same translating row (and, with
#                                                    # the tls rows, a TLS row; with the
#                                                    # pipelined row, a pipelined row) for an
#                                                    # older build, for before/after in one run
#                                                    # (no fleet row: `endpoints` is newer)
#   NO_BUILD=1 benches/load.sh                       # the release binaries already built
#   WG_BIN=/path/to/wiregate benches/load.sh         # that build in the wiregate rows (default:
#                                                    # target/release/wiregate), e.g. to swap
#                                                    # it with BASE_BIN in alternate runs
#   ROWS="nginx passthrough tls" benches/load.sh     # only these rows (default: all). Names:
#                                                    # direct nginx nginx_forwarding haproxy
#                                                    # wiregate pipelined passthrough tls
#                                                    # (nginx's and wiregate's
#                                                    # TLS rows) fleet (the three rows over
#                                                    # three upstreams) gate (the two rows
#                                                    # below) traced (the translating gateway
#                                                    # exporting spans) all (every feature
#                                                    # at once, below); a ratio is printed
#                                                    # when both its rows ran
#
# "gate" is the translating gateway behind its gate: `[auth] mode = "required"` with a
# `[[auth.jwt]]` issuer (an ES256 key set on disk made by examples/jwt_mint, every call sending
# the same token, so it is verified once and found in the cache after), `strip_credentials`, and
# one `[[rate_limits]]` on every method keyed by the caller, its rate (GATE_RATE per second)
# above the load, so every call spends a token and none is refused; beside it nginx's proxy_pass
# with `limit_req` at the same rate, keyed by the client's address (nginx checks no JWT). Its
# ratios: the gated gateway against the plain translating one and against that nginx.
#
# "traced" is the translating gateway with `[tracing]` exporting its spans over OTLP/HTTP to
# examples/otlp_sink (SINK_PORT), a collector that accepts everything (it walks each request's
# fields and counts its spans; SINK_DECODE=1 has it decode them whole, see the example), at
# `sample_ratio = TRACE_RATIO` (1.0 unless set), the other keys at their defaults; its ratio is
# traced/wiregate, and the spans the sink took are printed at the end.
#
# "all" is the translating gateway with every feature a fleet's gateway runs, at once: the
# fleet's three endpoints (`least_request`, the posted method retried) with active health checks
# (`[upstreams.health] path = "/health"`, every second), the gate's JWT and rate limit, and
# `[tracing]` to the sink at `sample_ratio = ALL_RATIO` (0.01 unless set); its ratio is
# all/wiregate.
#
# "fleet" runs three upstream processes (ports FLEET_UP1_PORT, FLEET_UP2_PORT, FLEET_UP3_PORT) and
# measures balancing over them, each proxy least-loaded first: nginx's `upstream` block with the
# three servers, `least_conn` and `keepalive 256` (the proxy settings of the nginx row); haproxy's
# backend with the three servers and `balance leastconn`; and the translating gateway (the
# settings of the wiregate row) with `endpoints = [the three URLs]` instead of `url`,
# `balance = "least_request"` and `[upstreams.retry]` with `attempts = 2` and `methods` the method
# the JSON-RPC body calls. A wiregate that does not start or answer is reported with its log's
# last lines, and its row is left out. benches/fleet_kill.sh runs the same gateway while one of
# the three upstreams is killed.
#
# "pipelined" is the translating gateway again with `pipeline = PIPELINE` (256 unless set) on its
# upstream: calls ready together written to the upstream in one write (HTTP/1.1 pipelining,
# `src/outbound/pipeline/`); the translating row stays the pooled default.
#
# Beside the translating rows: wiregate's pass-through (`[[passthrough]]`, the legacy envelope
# forwarded unchanged) against nginx's proxy_pass, and TLS terminated by wiregate (translating)
# against nginx terminating TLS (translating nothing), with a certificate made by openssl here.
#
# NGINX_TLS_PROTOCOLS="TLSv1.2 TLSv1.3" sets nginx's ssl_protocols (unset: nginx's default,
# TLS 1.2 only in Debian's nginx 1.22; since 1.23.4 it includes 1.3). wiregate (rustls) speaks
# TLS 1.3 to wrk. The version changes what wrk times: with TLS 1.2 the first request waits for
# the server's Finished, so the server's backlog of handshakes is outside the timed calls; with
# TLS 1.3 the request goes with the client's Finished and that backlog is timed.
#
# The pass-through's row has two nginx peers: "nginx" (proxy_pass forwarding the client's headers
# only) and "nginx_forwarding" (proxy_pass telling the upstream what the gateway's pass-through
# must tell it: X-Forwarded-For, X-Forwarded-Proto, X-Forwarded-Host, Forwarded, Via and a
# traceparent; nginx's $request_id stands in for the trace id). Behind plain nginx the upstream
# parses six headers fewer per call than behind the gateway; measured in one run, the two nginx
# rows show what those headers cost the upstream.
#
# "defaults" is the translating gateway at its shipped thread settings, twice: `worker_threads =
# 0` (a worker per core) with `runtime = "work_stealing"` (one runtime whose workers share every
# task) and with `runtime = "per_core"` (a thread per core, each with its own runtime, socket and
# upstream connections); its ratios are each against nginx and haproxy (one worker each, as
# everywhere here). BASE_BIN's translating row beside them runs BASE_BIN with WG_THREADS.
#
# Installs wrk, nginx and haproxy with apt-get when they are missing. Only loopback is used.
# Each proxy gets one thread, as the peers are configured (nginx 1 worker, haproxy nbthread 1);
# WG_THREADS=0 runs wiregate with its default of one worker per core.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-1}
CONNS=${CONNS:-"32 256"}
THREADS=${THREADS:-2}
UP_PORT=${UP_PORT:-19000}
NGINX_PORT=${NGINX_PORT:-19001}
HAPROXY_PORT=${HAPROXY_PORT:-19002}
GW_PORT=${GW_PORT:-19003}
NGINX_TLS_PORT=${NGINX_TLS_PORT:-19004}
GW_TLS_PORT=${GW_TLS_PORT:-19005}
BASE_PORT=${BASE_PORT:-19006}
BASE_TLS_PORT=${BASE_TLS_PORT:-19007}
PIPE_PORT=${PIPE_PORT:-19008}
BASE_PIPE_PORT=${BASE_PIPE_PORT:-19009}
NGINX_FWD_PORT=${NGINX_FWD_PORT:-19010}
FLEET_UP1_PORT=${FLEET_UP1_PORT:-19011}
FLEET_UP2_PORT=${FLEET_UP2_PORT:-19012}
FLEET_UP3_PORT=${FLEET_UP3_PORT:-19013}
NGINX_FLEET_PORT=${NGINX_FLEET_PORT:-19014}
HAPROXY_FLEET_PORT=${HAPROXY_FLEET_PORT:-19015}
GW_FLEET_PORT=${GW_FLEET_PORT:-19016}
GW_GATE_PORT=${GW_GATE_PORT:-19017}
NGINX_LIMIT_PORT=${NGINX_LIMIT_PORT:-19018}
GW_TRACED_PORT=${GW_TRACED_PORT:-19019}
SINK_PORT=${SINK_PORT:-19020}
ALL_PORT=${ALL_PORT:-19021}
STEAL_PORT=${STEAL_PORT:-19022}
PERCORE_PORT=${PERCORE_PORT:-19023}
ALL_RATIO=${ALL_RATIO:-0.01}
TRACE_RATIO=${TRACE_RATIO:-1.0}
GATE_RATE=${GATE_RATE:-1000000}
PIPELINE=${PIPELINE:-256}
WG_BIN=${WG_BIN:-./target/release/wiregate}
NGINX_TLS_PROTOCOLS=${NGINX_TLS_PROTOCOLS:-}
nginx_forwards='proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; proxy_set_header Forwarded "for=$remote_addr;proto=$scheme;host=\"$http_host\""; proxy_set_header X-Forwarded-Proto $scheme; proxy_set_header X-Forwarded-Host $http_host; proxy_set_header Via "1.1 nginx"; proxy_set_header traceparent "00-$request_id-b7ad6b7169203331-01";'
ROWS=${ROWS:-"direct nginx nginx_forwarding haproxy wiregate defaults pipelined passthrough tls fleet gate traced all"}
# wants ROW -> exit 0 when ROW was asked for.
wants() { [[ " $ROWS " == *" $1 "* ]]; }

# need, begin_run (the build, $work, $pids, cleanup on exit), the bodies, the right answers, the
# wrk script and the fleet's configuration.
# shellcheck source=benches/common.sh
. benches/common.sh

need wrk wrk
need nginx nginx-light
need haproxy haproxy
begin_run

./target/release/examples/legacy_upstream "127.0.0.1:$UP_PORT" >/dev/null &
up_pid=$!
pids+=($!)
# The fleet's three upstreams.
if wants fleet || wants all; then
  for port in "$FLEET_UP1_PORT" "$FLEET_UP2_PORT" "$FLEET_UP3_PORT"; do
    ./target/release/examples/legacy_upstream "127.0.0.1:$port" >/dev/null &
    pids+=($!)
  done
fi

openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
  -keyout "$work/key.pem" -out "$work/cert.pem" >/dev/null 2>&1

{
  nginx_head
  cat <<NGINX
  limit_req_zone \$binary_remote_addr zone=gate:1m rate=${GATE_RATE}r/s;
  upstream fleet {
    least_conn;
    server 127.0.0.1:$FLEET_UP1_PORT;
    server 127.0.0.1:$FLEET_UP2_PORT;
    server 127.0.0.1:$FLEET_UP3_PORT;
    keepalive 256;
  }
  server {
    listen 127.0.0.1:$NGINX_PORT;
    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
  server {
    listen 127.0.0.1:$NGINX_FWD_PORT;
    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; $nginx_forwards }
  }
  server {
    listen 127.0.0.1:$NGINX_LIMIT_PORT;
    location / { limit_req zone=gate burst=$GATE_RATE nodelay; proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
  server {
    listen 127.0.0.1:$NGINX_FLEET_PORT;
    location / { proxy_pass http://fleet; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
  server {
    listen 127.0.0.1:$NGINX_TLS_PORT ssl;
    ${NGINX_TLS_PROTOCOLS:+ssl_protocols $NGINX_TLS_PROTOCOLS;}
    ssl_certificate $work/cert.pem;
    ssl_certificate_key $work/key.pem;
    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
NGINX
} >"$work/nginx.conf"
nginx -c "$work/nginx.conf" -p "$work" &
nginx_pid=$!
pids+=($!)

cat >"$work/haproxy.cfg" <<HAPROXY
global
  nbthread 1
  maxconn 4096
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  http-reuse always
frontend f
  bind 127.0.0.1:$HAPROXY_PORT
  default_backend b
backend b
  server up 127.0.0.1:$UP_PORT
frontend fleet
  bind 127.0.0.1:$HAPROXY_FLEET_PORT
  default_backend fleet
backend fleet
  balance leastconn
  server up1 127.0.0.1:$FLEET_UP1_PORT
  server up2 127.0.0.1:$FLEET_UP2_PORT
  server up3 127.0.0.1:$FLEET_UP3_PORT
HAPROXY
haproxy -f "$work/haproxy.cfg" -db >/dev/null 2>&1 &
haproxy_pid=$!
pids+=($!)

cat >"$work/gateway.toml" <<TOML
[server]
listen = "127.0.0.1:$GW_PORT"
worker_threads = ${WG_THREADS:-1}
[[upstreams]]
name = "legacy"
url = "http://127.0.0.1:$UP_PORT/a2a"
dialect = "legacy"
[[routes]]
methods = ["*"]
upstream = "legacy"
TOML
# The same gateway, with everything not /rpc passed through (POST /a2a reaches the upstream as
# is), and a second one terminating TLS.
cp "$work/gateway.toml" "$work/base.toml"
sed -i "s/127.0.0.1:$GW_PORT/127.0.0.1:$BASE_PORT/" "$work/base.toml"
printf '[[passthrough]]\nprefix = "/"\nupstream = "legacy"\n' >>"$work/gateway.toml"
sed "s/127.0.0.1:$GW_PORT/127.0.0.1:$GW_TLS_PORT/" "$work/base.toml" | sed "s/127.0.0.1:$BASE_PORT/127.0.0.1:$GW_TLS_PORT/" >"$work/tls.toml"
printf '[server.tls]\ncert = "%s"\nkey = "%s"\n' "$work/cert.pem" "$work/key.pem" >>"$work/tls.toml"
# (TOML: a table after [[routes]] is fine; [server.tls] belongs to [server] by its dotted name.)
# The pipelined gateway: the translating one with its upstream pipelined.
sed "s/127.0.0.1:$BASE_PORT/127.0.0.1:$PIPE_PORT/" "$work/base.toml" |
  sed "s/^dialect = \"legacy\"$/dialect = \"legacy\"\npipeline = $PIPELINE/" >"$work/pipe.toml"

RUST_LOG=warn "$WG_BIN" --config "$work/gateway.toml" >/dev/null 2>&1 &
gw_pid=$!
pids+=($!)
RUST_LOG=warn "$WG_BIN" --config "$work/tls.toml" >/dev/null 2>&1 &
gw_tls_pid=$!
pids+=($!)
RUST_LOG=warn "$WG_BIN" --config "$work/pipe.toml" >/dev/null 2>&1 &
pipe_pid=$!
pids+=($!)
if [ -n "${BASE_BIN:-}" ]; then
  RUST_LOG=warn "$BASE_BIN" --config "$work/base.toml" >/dev/null 2>&1 &
  base_pid=$!
  pids+=($!)
  sed "s/127.0.0.1:$GW_TLS_PORT/127.0.0.1:$BASE_TLS_PORT/" "$work/tls.toml" >"$work/base_tls.toml"
  RUST_LOG=warn "$BASE_BIN" --config "$work/base_tls.toml" >/dev/null 2>&1 &
  base_tls_pid=$!
  pids+=($!)
  sed "s/127.0.0.1:$PIPE_PORT/127.0.0.1:$BASE_PIPE_PORT/" "$work/pipe.toml" >"$work/base_pipe.toml"
  RUST_LOG=warn "$BASE_BIN" --config "$work/base_pipe.toml" >/dev/null 2>&1 &
  base_pipe_pid=$!
  pids+=($!)
fi
# The gate's key set, token and `[auth]` (the gated gateway's and everything's).
if wants gate || wants all; then
  ./target/release/examples/jwt_mint "$work"
  cat >"$work/limit.toml" <<TOML
[[rate_limits]]
name = "per-caller"
match = ["*"]
key = "caller"
rate_per_s = $GATE_RATE
burst = $GATE_RATE
TOML
fi
# The gated gateway: the translating one behind a JWT and a rate limit.
if wants gate; then
  sed "s/127.0.0.1:$BASE_PORT/127.0.0.1:$GW_GATE_PORT/" "$work/base.toml" >"$work/gate.toml"
  cat "$work/auth.toml" "$work/limit.toml" >>"$work/gate.toml"
  RUST_LOG=warn "$WG_BIN" --config "$work/gate.toml" >/dev/null 2>&1 &
  gate_pid=$!
  pids+=($!)
fi
# The traced gateway: the translating one exporting its spans to the sink.
if wants traced || wants all; then
  ./target/release/examples/otlp_sink "127.0.0.1:$SINK_PORT" ${SINK_DECODE:+--decode} >/dev/null &
  sink_pid=$!
  pids+=($!)
fi
if wants traced; then
  sed "s/127.0.0.1:$BASE_PORT/127.0.0.1:$GW_TRACED_PORT/" "$work/base.toml" >"$work/traced.toml"
  printf '[tracing]\notlp_endpoint = "http://127.0.0.1:%s"\nsample_ratio = %s\n' \
    "$SINK_PORT" "$TRACE_RATIO" >>"$work/traced.toml"
  RUST_LOG=warn "$WG_BIN" --config "$work/traced.toml" >/dev/null 2>&1 &
  traced_pid=$!
  pids+=($!)
fi
# The translating gateway at its shipped thread settings, on each runtime.
if wants defaults; then
  for rt in work_stealing per_core; do
    port=$STEAL_PORT
    [ "$rt" = per_core ] && port=$PERCORE_PORT
    sed "s/127.0.0.1:$BASE_PORT/127.0.0.1:$port/" "$work/base.toml" |
      sed "s/^worker_threads = .*$/worker_threads = 0\nruntime = \"$rt\"/" >"$work/$rt.toml"
  done
  RUST_LOG=warn "$WG_BIN" --config "$work/work_stealing.toml" >/dev/null 2>&1 &
  steal_pid=$!
  pids+=($!)
  RUST_LOG=warn "$WG_BIN" --config "$work/per_core.toml" >/dev/null 2>&1 &
  percore_pid=$!
  pids+=($!)
fi
# Everything at once: the fleet's gateway, its endpoints checked, behind the gate, traced.
if wants all; then
  GW_FLEET_PORT=$ALL_PORT fleet_toml "$work/all.toml"
  cat "$work/auth.toml" "$work/limit.toml" >>"$work/all.toml"
  printf '[tracing]\notlp_endpoint = "http://127.0.0.1:%s"\nsample_ratio = %s\n' \
    "$SINK_PORT" "$ALL_RATIO" >>"$work/all.toml"
  # (TOML: [upstreams.health] after the other tables is the last [[upstreams]]' own.)
  printf '[upstreams.health]\npath = "/health"\ninterval_ms = 1000\n' >>"$work/all.toml"
  RUST_LOG=warn "$WG_BIN" --config "$work/all.toml" >/dev/null 2>&1 &
  all_pid=$!
  pids+=($!)
fi
# The fleet's gateway: the translating one with three endpoints, least_request, and the posted
# method retried; its log kept, to show why if it does not start.
fleet_gw_pid=
if wants fleet; then
  fleet_toml "$work/fleet.toml"
  RUST_LOG=warn NO_COLOR=1 "$WG_BIN" --config "$work/fleet.toml" >"$work/fleet_gw.log" 2>&1 &
  fleet_gw_pid=$!
  pids+=($!)
fi
sleep 1

lua "$legacy_body" "$work/legacy.lua"
lua "$rpc_body" "$work/rpc.lua"
gate_auth=
if wants gate || wants all; then
  gate_auth="authorization: Bearer $(cat "$work/token")"
  cp "$work/rpc.lua" "$work/gate.lua"
  printf 'wrk.headers["Authorization"] = "Bearer %s"\n' "$(cat "$work/token")" >>"$work/gate.lua"
fi


# Checks that each target answers correctly before measuring it.
answers "$legacy_ok" "$legacy_body" "http://127.0.0.1:$UP_PORT/a2a"
answers "$legacy_ok" "$legacy_body" "http://127.0.0.1:$NGINX_PORT/a2a"
answers "$legacy_ok" "$legacy_body" "http://127.0.0.1:$NGINX_FWD_PORT/a2a"
answers "$legacy_ok" "$legacy_body" "http://127.0.0.1:$HAPROXY_PORT/a2a"
answers "$rpc_ok" "$rpc_body" "http://127.0.0.1:$GW_PORT/rpc"
answers "$legacy_ok" "$legacy_body" "http://127.0.0.1:$GW_PORT/a2a"
answers "$legacy_ok" "$legacy_body" "https://127.0.0.1:$NGINX_TLS_PORT/a2a"
answers "$rpc_ok" "$rpc_body" "https://127.0.0.1:$GW_TLS_PORT/rpc"
answers "$rpc_ok" "$rpc_body" "http://127.0.0.1:$PIPE_PORT/rpc"
if wants gate; then
  answers "$legacy_ok" "$legacy_body" "http://127.0.0.1:$NGINX_LIMIT_PORT/a2a"
  answers "$rpc_ok" "$rpc_body" "http://127.0.0.1:$GW_GATE_PORT/rpc" "$gate_auth"
  ! answers "$rpc_ok" "$rpc_body" "http://127.0.0.1:$GW_GATE_PORT/rpc" || { echo "the gated gateway answered a call without a token" >&2; exit 1; }
fi
if wants traced; then
  answers "$rpc_ok" "$rpc_body" "http://127.0.0.1:$GW_TRACED_PORT/rpc"
fi
if wants defaults; then
  answers "$rpc_ok" "$rpc_body" "http://127.0.0.1:$STEAL_PORT/rpc"
  answers "$rpc_ok" "$rpc_body" "http://127.0.0.1:$PERCORE_PORT/rpc"
fi
if wants all; then
  answers "$rpc_ok" "$rpc_body" "http://127.0.0.1:$ALL_PORT/rpc" "$gate_auth"
  ! answers "$rpc_ok" "$rpc_body" "http://127.0.0.1:$ALL_PORT/rpc" || { echo "the gateway with every feature answered a call without a token" >&2; exit 1; }
fi
[ -z "${BASE_BIN:-}" ] || answers "$rpc_ok" "$rpc_body" "http://127.0.0.1:$BASE_PORT/rpc"
[ -z "${BASE_BIN:-}" ] || answers "$rpc_ok" "$rpc_body" "https://127.0.0.1:$BASE_TLS_PORT/rpc"
[ -z "${BASE_BIN:-}" ] || answers "$rpc_ok" "$rpc_body" "http://127.0.0.1:$BASE_PIPE_PORT/rpc"
fleet_gw_ok=
if wants fleet; then
  for port in "$FLEET_UP1_PORT" "$FLEET_UP2_PORT" "$FLEET_UP3_PORT" "$NGINX_FLEET_PORT" "$HAPROXY_FLEET_PORT"; do
    answers "$legacy_ok" "$legacy_body" "http://127.0.0.1:$port/a2a"
  done
  # The fleet's gateway: asked for 5 s more to answer; one that exits or does not answer is
  # reported with its log's last lines, and its row is left out.
  deadline=$((SECONDS + 5))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if answers "$rpc_ok" "$rpc_body" "http://127.0.0.1:$GW_FLEET_PORT/rpc"; then fleet_gw_ok=1; break; fi
    kill -0 "$fleet_gw_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$fleet_gw_ok" ]; then
    if kill -0 "$fleet_gw_pid" 2>/dev/null; then state="running, not answering on 127.0.0.1:$GW_FLEET_PORT/rpc"; else state="exited"; fi
    echo "wiregate x3 (fleet, $WG_BIN --config fleet.toml) did not start: $state; its log's last lines:" >&2
    tail -n 20 "$work/fleet_gw.log" | sed 's/^/  /' >&2
    echo "  (the fleet's wiregate row is left out)" >&2
  fi
fi

# sample GOOD BODY URL OUT [HEADER]: while $work/sampling exists, checks one answer every 0.2 s (beside
# wrk's load, so answers under load are seen, not just before it); writes "checked wrong".
sample() {
  local checked=0 wrong=0
  while [ -e "$work/sampling" ]; do
    checked=$((checked + 1))
    answers "$1" "$2" "$3" "${5:-}" || wrong=$((wrong + 1))
    sleep 0.2
  done
  echo "$checked $wrong" >"$4"
}

# CPU seconds (user, system) a process has used so far, from /proc.
cpu() { awk -v t="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); print $12 / t, $13 / t }' "/proc/$1/stat"; }

# once ID CONNS: one wrk run of row ID; appends "requests seconds user_s sys_s connect read write
# timeout non_2xx checked wrong" to $work/ID.acc and wrk's latency histogram to $work/ID.hist.
# CPU is the row's process's (from /proc), per request the steadier measure of what each proxy
# costs on a shared 2-core machine.
once() {
  local id=$1
  read -r u0 s0 < <(cpu "${pid[$id]}")
  : >"$work/sampling"
  sample "${good[$id]}" "${body[$id]}" "${url[$id]}" "$work/$id.sample" "${hdr[$id]:-}" &
  local sampler=$!
  WRK_HIST="$work/round.hist" wrk -t"$THREADS" -c"$2" -d"$DURATION" -s "${script[$id]}" "${url[$id]}" >"$work/$id.txt" 2>&1
  rm -f "$work/sampling"
  wait "$sampler"
  read -r u1 s1 < <(cpu "${pid[$id]}")
  read -r checked wrong <"$work/$id.sample"
  cat "$work/round.hist" >>"$work/$id.hist" 2>/dev/null || true
  awk -v u0="$u0" -v u1="$u1" -v s0="$s0" -v s1="$s1" -v checked="$checked" -v wrong="$wrong" '
    function secs(v) { if (v ~ /ms$/) return v/1000; if (v ~ /m$/) return v*60; return v+0 }
    /requests in/ { n=$1; t=secs(substr($4, 1, length($4)-1)) }
    /Socket errors:/ { conn=$4+0; rd=$6+0; wr=$8+0; to=$10+0 }
    /Non-2xx or 3xx responses:/ { bad=$NF+0 }
    END { printf "%d %.3f %.3f %.3f %d %d %d %d %d %d %d\n", n, t, u1-u0, s1-s0, conn, rd, wr, to, bad, checked, wrong }' \
    "$work/$id.txt" >>"$work/$id.acc"
}

# total ID -> "rps p50 p99 user_us sys_us errors" over all of the row's rounds: requests over
# seconds, percentiles (ms) of the merged latency histogram (nearest rank), CPU per request.
# errors is "none", or what went wrong: wrk's socket errors (connect, read, write, timeout),
# non-2xx/3xx answers, and sampled answers that were not right; such a row is no throughput
# figure, and is printed as one.
total() {
  local id=$1 p50 p99
  read -r p50 p99 < <(sort -n "$work/$id.hist" | awk '
    { v[NR]=$1; c[NR]=$2; all+=$2 }
    END {
      r50=int(0.50*all+0.5); r99=int(0.99*all+0.5); a=0; p50=p99=-1
      for (i=1; i<=NR; i++) { a+=c[i]; if (p50<0 && a>=r50) p50=v[i]; if (p99<0 && a>=r99) p99=v[i] }
      printf "%.3f %.3f\n", p50/1000, p99/1000 }')
  awk -v p50="$p50" -v p99="$p99" '
    { n+=$1; t+=$2; u+=$3; s+=$4; conn+=$5; rd+=$6; wr+=$7; to+=$8; bad+=$9; checked+=$10; wrong+=$11 }
    END {
      err = conn + rd + wr + to + bad + wrong
      if (n == 0 || checked == 0) err = 1
      errors = (err == 0) ? "none" : sprintf("socket_errors:connect=%d,read=%d,write=%d,timeout=%d;non_2xx=%d;wrong_answers=%d/%d_sampled;requests=%d", conn, rd, wr, to, bad, wrong, checked, n)
      printf "%.0f %.3f %.3f %.1f %.1f %s\n", (t ? n/t : 0), p50, p99, (n ? u*1e6/n : 0), (n ? s*1e6/n : 0), errors }' "$work/$id.acc"
}

# row LABEL CONNS RPS P50 P99 USER SYS ERRORS: a run with errors shows no throughput or latency.
row() {
  if [ "$8" = none ]; then
    printf '%-36s %6s %12s %10s %10s %12s %12s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7"
  else
    printf '%-36s %6s %12s %10s %10s %12s %12s\n' "$1" "$2" "errors" "-" "-" "$6" "$7"
    echo "  ^ not a throughput figure: ${8//;/, }"
  fi
}

nginx_worker=$(pgrep -P "$nginx_pid" | head -1)
# The rows: ID -> ROWS name, label, URL, wrk script, process measured, right answer, body.
declare -A group label url script pid good body hdr
def() { group[$1]=$2 label[$1]=$3 url[$1]=$4 script[$1]=$5 pid[$1]=$6 good[$1]=$7 body[$1]=$8 hdr[$1]=${9:-}; }
def direct direct "direct (no proxy, upstream)" "http://127.0.0.1:$UP_PORT/a2a" "$work/legacy.lua" "$up_pid" "$legacy_ok" "$legacy_body"
def nginx nginx "nginx proxy_pass" "http://127.0.0.1:$NGINX_PORT/a2a" "$work/legacy.lua" "$nginx_worker" "$legacy_ok" "$legacy_body"
def nginx_fwd nginx_forwarding "nginx proxy_pass, forwarding" "http://127.0.0.1:$NGINX_FWD_PORT/a2a" "$work/legacy.lua" "$nginx_worker" "$legacy_ok" "$legacy_body"
def haproxy haproxy "haproxy (1 thread)" "http://127.0.0.1:$HAPROXY_PORT/a2a" "$work/legacy.lua" "$haproxy_pid" "$legacy_ok" "$legacy_body"
def wiregate wiregate "wiregate (translating)" "http://127.0.0.1:$GW_PORT/rpc" "$work/rpc.lua" "$gw_pid" "$rpc_ok" "$rpc_body"
def wiregate_steal defaults "wiregate defaults, work-stealing" "http://127.0.0.1:$STEAL_PORT/rpc" "$work/rpc.lua" "${steal_pid:-}" "$rpc_ok" "$rpc_body"
def wiregate_percore defaults "wiregate defaults, per-core" "http://127.0.0.1:$PERCORE_PORT/rpc" "$work/rpc.lua" "${percore_pid:-}" "$rpc_ok" "$rpc_body"
def pipelined pipelined "wiregate transl. pipelined" "http://127.0.0.1:$PIPE_PORT/rpc" "$work/rpc.lua" "$pipe_pid" "$rpc_ok" "$rpc_body"
def passthrough passthrough "wiregate pass-through" "http://127.0.0.1:$GW_PORT/a2a" "$work/legacy.lua" "$gw_pid" "$legacy_ok" "$legacy_body"
def nginx_tls tls "nginx TLS proxy_pass" "https://127.0.0.1:$NGINX_TLS_PORT/a2a" "$work/legacy.lua" "$nginx_worker" "$legacy_ok" "$legacy_body"
def wiregate_tls tls "wiregate TLS (translating)" "https://127.0.0.1:$GW_TLS_PORT/rpc" "$work/rpc.lua" "$gw_tls_pid" "$rpc_ok" "$rpc_body"
def nginx_fleet fleet "nginx upstream x3 least_conn" "http://127.0.0.1:$NGINX_FLEET_PORT/a2a" "$work/legacy.lua" "$nginx_worker" "$legacy_ok" "$legacy_body"
def haproxy_fleet fleet "haproxy x3 leastconn" "http://127.0.0.1:$HAPROXY_FLEET_PORT/a2a" "$work/legacy.lua" "$haproxy_pid" "$legacy_ok" "$legacy_body"
def wiregate_fleet fleet "wiregate x3 ${FLEET_BALANCE:-least_request} (transl.)" "http://127.0.0.1:$GW_FLEET_PORT/rpc" "$work/rpc.lua" "$fleet_gw_pid" "$rpc_ok" "$rpc_body"
def nginx_limit gate "nginx proxy_pass + limit_req" "http://127.0.0.1:$NGINX_LIMIT_PORT/a2a" "$work/legacy.lua" "$nginx_worker" "$legacy_ok" "$legacy_body"
def wiregate_gate gate "wiregate JWT + limit (transl.)" "http://127.0.0.1:$GW_GATE_PORT/rpc" "$work/gate.lua" "${gate_pid:-}" "$rpc_ok" "$rpc_body" "$gate_auth"
def wiregate_traced traced "wiregate traced $TRACE_RATIO (transl.)" "http://127.0.0.1:$GW_TRACED_PORT/rpc" "$work/rpc.lua" "${traced_pid:-}" "$rpc_ok" "$rpc_body"
def wiregate_all all "wiregate everything (transl.)" "http://127.0.0.1:$ALL_PORT/rpc" "$work/gate.lua" "${all_pid:-}" "$rpc_ok" "$rpc_body" "$gate_auth"
order=(direct nginx nginx_fwd haproxy wiregate wiregate_steal wiregate_percore pipelined passthrough nginx_tls wiregate_tls nginx_fleet haproxy_fleet wiregate_fleet nginx_limit wiregate_gate wiregate_traced wiregate_all)
if [ -n "${BASE_BIN:-}" ]; then
  def base wiregate "wiregate BASE_BIN (transl.)" "http://127.0.0.1:$BASE_PORT/rpc" "$work/rpc.lua" "$base_pid" "$rpc_ok" "$rpc_body"
  def base_tls tls "wiregate BASE_BIN TLS" "https://127.0.0.1:$BASE_TLS_PORT/rpc" "$work/rpc.lua" "$base_tls_pid" "$rpc_ok" "$rpc_body"
  def base_pipe pipelined "BASE_BIN pipelined" "http://127.0.0.1:$BASE_PIPE_PORT/rpc" "$work/rpc.lua" "$base_pipe_pid" "$rpc_ok" "$rpc_body"
  order+=(base base_tls base_pipe)
fi
asked=()
for id in "${order[@]}"; do
  if [ "$id" = wiregate_fleet ] && [ -z "$fleet_gw_ok" ]; then continue; fi
  if wants "${group[$id]}"; then asked+=("$id"); fi
done

printf '%-36s %6s %12s %10s %10s %12s %12s\n' target conns req/s p50_ms p99_ms user_us/req sys_us/req
[ "$ROUNDS" = 1 ] || echo "(each row: $ROUNDS rounds of $DURATION, the rows in turn, the order rotated each round)"
for c in $CONNS; do
  for id in "${asked[@]}"; do : >"$work/$id.acc"; : >"$work/$id.hist"; done
  for ((r = 0; r < ROUNDS; r++)); do
    for ((i = 0; i < ${#asked[@]}; i++)); do
      once "${asked[$(((i + r) % ${#asked[@]}))]}" "$c"
    done
  done
  # Each row's totals into its variables (d_ direct, n_ nginx, nf_ nginx forwarding, h_ haproxy,
  # w_ wiregate, q_ pipelined, p_ pass-through, nt_/wt_ TLS, fn_/fh_/fw_ the fleet's nginx,
  # haproxy and wiregate, b_/bt_/bq_ BASE_BIN's), "-" for a row not asked for.
  declare -A res=()
  for id in "${asked[@]}"; do res[$id]=$(total "$id"); done
  fields() { echo "${res[$1]:-- - - - - none}"; }
  read -r d_rps d_p50 d_p99 d_u d_s d_err <<<"$(fields direct)"
  read -r n_rps n_p50 n_p99 n_u n_s n_err <<<"$(fields nginx)"
  read -r nf_rps nf_p50 nf_p99 nf_u nf_s nf_err <<<"$(fields nginx_fwd)"
  read -r h_rps h_p50 h_p99 h_u h_s h_err <<<"$(fields haproxy)"
  read -r w_rps w_p50 w_p99 w_u w_s w_err <<<"$(fields wiregate)"
  read -r q_rps q_p50 q_p99 q_u q_s q_err <<<"$(fields pipelined)"
  read -r ds_rps ds_p50 ds_p99 ds_u ds_s ds_err <<<"$(fields wiregate_steal)"
  read -r dp_rps dp_p50 dp_p99 dp_u dp_s dp_err <<<"$(fields wiregate_percore)"
  read -r p_rps p_p50 p_p99 p_u p_s p_err <<<"$(fields passthrough)"
  read -r nt_rps nt_p50 nt_p99 nt_u nt_s nt_err <<<"$(fields nginx_tls)"
  read -r wt_rps wt_p50 wt_p99 wt_u wt_s wt_err <<<"$(fields wiregate_tls)"
  read -r fn_rps fn_p50 fn_p99 fn_u fn_s fn_err <<<"$(fields nginx_fleet)"
  read -r fh_rps fh_p50 fh_p99 fh_u fh_s fh_err <<<"$(fields haproxy_fleet)"
  read -r fw_rps fw_p50 fw_p99 fw_u fw_s fw_err <<<"$(fields wiregate_fleet)"
  read -r nl_rps nl_p50 nl_p99 nl_u nl_s nl_err <<<"$(fields nginx_limit)"
  read -r g_rps g_p50 g_p99 g_u g_s g_err <<<"$(fields wiregate_gate)"
  read -r t_rps t_p50 t_p99 t_u t_s t_err <<<"$(fields wiregate_traced)"
  read -r a_rps a_p50 a_p99 a_u a_s a_err <<<"$(fields wiregate_all)"
  read -r b_rps b_p50 b_p99 b_u b_s b_err <<<"$(fields base)"
  read -r bt_rps bt_p50 bt_p99 bt_u bt_s bt_err <<<"$(fields base_tls)"
  read -r bq_rps bq_p50 bq_p99 bq_u bq_s bq_err <<<"$(fields base_pipe)"
  for id in "${order[@]}"; do
    if [ -n "${res[$id]:-}" ]; then
      # shellcheck disable=SC2086
      row "${label[$id]}" "$c" ${res[$id]}
    elif [ "$id" = wiregate_fleet ] && wants fleet; then
      printf '%-36s %6s %12s\n' "${label[$id]}" "$c" "not started"
      echo "  ^ did not start or answer; its log's last lines are printed above"
    fi
  done
  if [ "$d_err$n_err$nf_err$h_err$w_err$ds_err$dp_err$q_err$p_err$nt_err$wt_err$fn_err$fh_err$fw_err$nl_err$g_err$t_err$a_err$b_err$bt_err$bq_err" != nonenonenonenonenonenonenonenonenonenonenonenonenonenonenonenonenonenonenonenonenone ]; then
    echo "ratios @$c conns: not computed (a run had errors; see above)"
    echo
    continue
  fi
  if wants wiregate && wants direct && wants nginx && wants haproxy; then
    awk -v w="$w_rps" -v d="$d_rps" -v n="$n_rps" -v h="$h_rps" -v wp="$w_p99" -v np="$n_p99" -v hp="$h_p99" -v c="$c" 'BEGIN {
      printf "ratios @%s conns: wiregate/direct %.2f  wiregate/nginx %.2f  wiregate/haproxy %.2f  p99 wiregate/nginx %.2f  p99 wiregate/haproxy %.2f\n", c, w/d, w/n, w/h, wp/np, wp/hp }'
  fi
  if wants defaults && wants nginx && wants haproxy; then
    for d in "work-stealing $ds_rps $ds_p99" "per-core $dp_rps $dp_p99"; do
      read -r name r p <<<"$d"
      awk -v r="$r" -v p="$p" -v n="$n_rps" -v h="$h_rps" -v np="$n_p99" -v hp="$h_p99" -v c="$c" -v name="$name" 'BEGIN {
        printf "ratios @%s conns: defaults %s/nginx %.2f  /haproxy %.2f  p99 /nginx %.2f  p99 /haproxy %.2f\n", c, name, r/n, r/h, p/np, p/hp }'
    done
    awk -v s="$ds_rps" -v q="$dp_rps" -v sp="$ds_p99" -v qp="$dp_p99" -v c="$c" 'BEGIN {
      printf "ratios @%s conns: per-core/work-stealing %.2f  p99 per-core/work-stealing %.2f\n", c, q/s, qp/sp }'
  fi
  if wants pipelined && wants nginx && wants haproxy; then
    awk -v q="$q_rps" -v n="$n_rps" -v h="$h_rps" -v qp="$q_p99" -v np="$n_p99" -v hp="$h_p99" -v c="$c" 'BEGIN {
      printf "ratios @%s conns: pipelined/nginx %.2f  pipelined/haproxy %.2f  p99 pipelined/nginx %.2f  p99 pipelined/haproxy %.2f\n", c, q/n, q/h, qp/np, qp/hp }'
  fi
  if wants passthrough && wants nginx; then
    awk -v p="$p_rps" -v n="$n_rps" -v pp="$p_p99" -v np="$n_p99" -v c="$c" 'BEGIN {
      printf "ratios @%s conns: pass-through/nginx %.2f  p99 pass-through/nginx %.2f\n", c, p/n, pp/np }'
  fi
  if wants passthrough && wants nginx_forwarding; then
    awk -v p="$p_rps" -v n="$nf_rps" -v pp="$p_p99" -v np="$nf_p99" -v c="$c" 'BEGIN {
      printf "ratios @%s conns: pass-through/nginx forwarding %.2f  p99 pass-through/nginx forwarding %.2f\n", c, p/n, pp/np }'
  fi
  if wants nginx && wants nginx_forwarding; then
    awk -v f="$nf_rps" -v n="$n_rps" -v fp="$nf_p99" -v np="$n_p99" -v c="$c" 'BEGIN {
      printf "ratios @%s conns: nginx forwarding/nginx %.2f  p99 nginx forwarding/nginx %.2f (the six headers'"'"' cost, behind nginx)\n", c, f/n, fp/np }'
  fi
  if wants tls; then
    awk -v wt="$wt_rps" -v nt="$nt_rps" -v wtp="$wt_p99" -v ntp="$nt_p99" -v c="$c" 'BEGIN {
      printf "ratios @%s conns: wiregate TLS/nginx TLS %.2f  p99 %.2f\n", c, wt/nt, wtp/ntp }'
  fi
  if wants fleet && [ -n "$fleet_gw_ok" ]; then
    awk -v w="$fw_rps" -v n="$fn_rps" -v h="$fh_rps" -v wp="$fw_p99" -v np="$fn_p99" -v hp="$fh_p99" -v c="$c" 'BEGIN {
      printf "ratios @%s conns: fleet wiregate/nginx %.2f  wiregate/haproxy %.2f  p99 wiregate/nginx %.2f  p99 wiregate/haproxy %.2f\n", c, w/n, w/h, wp/np, wp/hp }'
  elif wants fleet; then
    echo "ratios @$c conns: fleet not computed (its wiregate did not start)"
  fi
  if wants gate && wants wiregate; then
    awk -v g="$g_rps" -v w="$w_rps" -v n="$nl_rps" -v gp="$g_p99" -v np="$nl_p99" -v c="$c" 'BEGIN {
      printf "ratios @%s conns: gated/wiregate %.2f  gated/nginx limit_req %.2f  p99 gated/nginx limit_req %.2f\n", c, g/w, g/n, gp/np }'
  fi
  if wants traced && wants wiregate; then
    awk -v t="$t_rps" -v w="$w_rps" -v tp="$t_p99" -v wp="$w_p99" -v c="$c" 'BEGIN {
      printf "ratios @%s conns: traced/wiregate %.2f  p99 traced/wiregate %.2f\n", c, t/w, tp/wp }'
  fi
  if wants all && wants wiregate; then
    awk -v a="$a_rps" -v w="$w_rps" -v ap="$a_p99" -v wp="$w_p99" -v c="$c" 'BEGIN {
      printf "ratios @%s conns: everything/wiregate %.2f  p99 everything/wiregate %.2f\n", c, a/w, ap/wp }'
  fi
  if [ -n "${BASE_BIN:-}" ] && wants wiregate && wants nginx; then
    awk -v w="$w_rps" -v b="$b_rps" -v n="$n_rps" -v wp="$w_p99" -v bp="$b_p99" -v c="$c" 'BEGIN {
      printf "ratios @%s conns: wiregate/BASE_BIN %.2f  wiregate/nginx %.2f vs BASE_BIN/nginx %.2f  p99 wiregate/BASE_BIN %.2f\n", c, w/b, w/n, b/n, wp/bp }'
  fi
  if [ -n "${BASE_BIN:-}" ] && wants pipelined && wants nginx && wants haproxy; then
    awk -v q="$bq_rps" -v n="$n_rps" -v h="$h_rps" -v qp="$bq_p99" -v np="$n_p99" -v hp="$h_p99" -v c="$c" 'BEGIN {
      printf "ratios @%s conns: BASE_BIN pipelined/nginx %.2f  /haproxy %.2f  p99 BASE_BIN pipelined/nginx %.2f  p99 /haproxy %.2f\n", c, q/n, q/h, qp/np, qp/hp }'
  fi
  if [ -n "${BASE_BIN:-}" ] && wants tls; then
    awk -v wt="$wt_rps" -v bt="$bt_rps" -v nt="$nt_rps" -v wtp="$wt_p99" -v btp="$bt_p99" -v ntp="$nt_p99" -v c="$c" 'BEGIN {
      printf "ratios @%s conns: TLS wiregate/BASE_BIN %.2f  TLS/nginx TLS %.2f vs BASE_BIN %.2f  p99 TLS/nginx TLS %.2f vs BASE_BIN %.2f\n", c, wt/bt, wt/nt, bt/nt, wtp/ntp, btp/ntp }'
  fi
  echo
done
if wants traced; then
  sleep 0.5
  echo "spans the sink took (the traced row's, and the everything row's when it ran): $(curl -s "http://127.0.0.1:$SINK_PORT/spans"); dropped at its full queue: $(curl -s "http://127.0.0.1:$GW_TRACED_PORT/metrics" | awk '/^wiregate_trace_spans_dropped_total/ { print $2; f = 1 } END { if (!f) print 0 }'); the sink's CPU (user, system s): $(cpu "$sink_pid")"
fi
