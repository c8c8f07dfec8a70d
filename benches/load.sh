#!/usr/bin/env bash
# Load test: the same fixed-answer legacy upstream reached directly, through nginx and haproxy as
# plain proxies (no translation), and through wiregate translating JSON-RPC -> legacy. One run,
# the same load for each; prints requests/s, p50/p99 latency, and wiregate's ratios.
#
#   benches/load.sh                 # 32 and 256 connections, 10 s each
#   DURATION=5s CONNS="32" benches/load.sh
#
# Installs wrk, nginx and haproxy with apt-get when they are missing. Only loopback is used.
# Each proxy gets one thread, as the peers are configured (nginx 1 worker, haproxy nbthread 1);
# WG_THREADS=0 runs wiregate with its default of one worker per core.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10s}
CONNS=${CONNS:-"32 256"}
THREADS=${THREADS:-2}
UP_PORT=${UP_PORT:-19000}
NGINX_PORT=${NGINX_PORT:-19001}
HAPROXY_PORT=${HAPROXY_PORT:-19002}
GW_PORT=${GW_PORT:-19003}

need() { command -v "$1" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "$2" >/dev/null; }; }
need wrk wrk
need nginx nginx-light
need haproxy haproxy

cargo build --release --quiet --bin wiregate --example legacy_upstream
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

./target/release/examples/legacy_upstream "127.0.0.1:$UP_PORT" >/dev/null &
up_pid=$!
pids+=($!)

cat >"$work/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
error_log $work/nginx.err;
pid $work/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  upstream up { server 127.0.0.1:$UP_PORT; keepalive 256; }
  server {
    listen 127.0.0.1:$NGINX_PORT;
    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
NGINX
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
RUST_LOG=warn ./target/release/wiregate --config "$work/gateway.toml" >/dev/null 2>&1 &
gw_pid=$!
pids+=($!)
sleep 1

legacy_body='{"a2a_version":"1.0","request_id":"r-1","operation":"echo","params":{"plan_id":"P1","n":1},"auth":null}'
rpc_body='{"jsonrpc":"2.0","id":1,"method":"echo","params":{"plan_id":"P1","n":1}}'
lua() { printf 'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = [[%s]]\n' "$1" >"$2"; }
lua "$legacy_body" "$work/legacy.lua"
lua "$rpc_body" "$work/rpc.lua"

# Checks that each target answers correctly before measuring it.
curl -sf -H 'content-type: application/json' -d "$legacy_body" "http://127.0.0.1:$NGINX_PORT/a2a" | grep -q '"status":"success"'
curl -sf -H 'content-type: application/json' -d "$legacy_body" "http://127.0.0.1:$HAPROXY_PORT/a2a" | grep -q '"status":"success"'
curl -sf -H 'content-type: application/json' -d "$rpc_body" "http://127.0.0.1:$GW_PORT/rpc" | grep -q '"result"'

# CPU seconds (user, system) a process has used so far, from /proc.
cpu() { awk -v t="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); print $12 / t, $13 / t }' "/proc/$1/stat"; }

# run NAME URL SCRIPT CONNS PID -> "rps p50 p99 non2xx user_us sys_us" (latencies in ms; CPU of
# PID per request: on a shared 2-core machine the steadier measure of what each proxy costs)
run() {
  read -r u0 s0 < <(cpu "$5")
  wrk -t"$THREADS" -c"$4" -d"$DURATION" --latency -s "$3" "$2" >"$work/$1.txt" 2>&1
  read -r u1 s1 < <(cpu "$5")
  awk -v u0="$u0" -v u1="$u1" -v s0="$s0" -v s1="$s1" '
    function ms(v) { if (v ~ /us$/) return v/1000; if (v ~ /ms$/) return v+0; if (v ~ /s$/) return v*1000; return v }
    /requests in/ { n=$1 }
    /Requests\/sec/ { rps=$2 }
    $1=="50%" { p50=ms($2) }
    $1=="99%" { p99=ms($2) }
    /Non-2xx/ { bad=$NF }
    END { printf "%.0f %.3f %.3f %s %.1f %.1f\n", rps, p50, p99, (bad==""?0:bad), (u1-u0)*1e6/n, (s1-s0)*1e6/n }' "$work/$1.txt"
}

nginx_worker=$(pgrep -P "$nginx_pid" | head -1)
printf '%-28s %6s %12s %10s %10s %12s %12s\n' target conns req/s p50_ms p99_ms user_us/req sys_us/req
for c in $CONNS; do
  read -r d_rps d_p50 d_p99 _ d_u d_s < <(run direct "http://127.0.0.1:$UP_PORT/a2a" "$work/legacy.lua" "$c" "$up_pid")
  read -r n_rps n_p50 n_p99 _ n_u n_s < <(run nginx "http://127.0.0.1:$NGINX_PORT/a2a" "$work/legacy.lua" "$c" "$nginx_worker")
  read -r h_rps h_p50 h_p99 _ h_u h_s < <(run haproxy "http://127.0.0.1:$HAPROXY_PORT/a2a" "$work/legacy.lua" "$c" "$haproxy_pid")
  read -r w_rps w_p50 w_p99 w_bad w_u w_s < <(run wiregate "http://127.0.0.1:$GW_PORT/rpc" "$work/rpc.lua" "$c" "$gw_pid")
  printf '%-28s %6s %12s %10s %10s %12s %12s\n' "direct (no proxy, upstream)" "$c" "$d_rps" "$d_p50" "$d_p99" "$d_u" "$d_s"
  printf '%-28s %6s %12s %10s %10s %12s %12s\n' "nginx proxy_pass" "$c" "$n_rps" "$n_p50" "$n_p99" "$n_u" "$n_s"
  printf '%-28s %6s %12s %10s %10s %12s %12s\n' "haproxy (1 thread)" "$c" "$h_rps" "$h_p50" "$h_p99" "$h_u" "$h_s"
  printf '%-28s %6s %12s %10s %10s %12s %12s\n' "wiregate (translating)" "$c" "$w_rps" "$w_p50" "$w_p99" "$w_u" "$w_s"
  [ "$w_bad" = "0" ] || echo "warning: wiregate answered $w_bad non-2xx"
  awk -v w="$w_rps" -v d="$d_rps" -v n="$n_rps" -v h="$h_rps" -v wp="$w_p99" -v np="$n_p99" -v hp="$h_p99" -v c="$c" 'BEGIN {
    printf "ratios @%s conns: wiregate/direct %.2f  wiregate/nginx %.2f  wiregate/haproxy %.2f  p99 wiregate/nginx %.2f  p99 wiregate/haproxy %.2f\n\n", c, w/d, w/n, w/h, wp/np, wp/hp }'
done
