# Shared by benches/load.sh and benches/fleet_kill.sh (sourced, not run): installing what is
# missing, the build, the scratch directory and the processes stopped on exit, the bodies wrk
# posts, what a right answer looks like, the wrk script, and the three-endpoint gateway's
# configuration.

# need COMMAND PACKAGE -> installs PACKAGE with apt-get when COMMAND is missing.
need() { command -v "$1" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "$2" >/dev/null; }; }

# begin_run -> builds the release binaries (unless NO_BUILD is set), makes the scratch directory
# $work and the empty list $pids of the processes the script starts, and runs cleanup on exit.
begin_run() {
  [ -n "${NO_BUILD:-}" ] || cargo build --release --quiet --bin wiregate --example legacy_upstream --example jwt_mint --example otlp_sink
  work=$(mktemp -d)
  pids=()
  trap cleanup EXIT
}

# Stops every process in $pids and waits until each has exited, so that a run that follows at
# once finds its ports free (without the wait, the next run's upstream or gateway could fail to
# bind: "Address already in use"); removes $work.
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}

legacy_body='{"a2a_version":"1.0","request_id":"r-1","operation":"echo","params":{"plan_id":"P1","n":1},"auth":null}'
rpc_body='{"jsonrpc":"2.0","id":1,"method":"echo","params":{"plan_id":"P1","n":1}}'
# The method the JSON-RPC body calls (the fleet gateway retries it).
rpc_method=${rpc_body#*\"method\":\"}
rpc_method=${rpc_method%%\"*}

# What a right answer looks like, per dialect: the legacy envelope's success, and a JSON-RPC
# result carrying the echoed params (a JSON-RPC error, even with HTTP 200, is wrong).
legacy_ok='"status":"success"'
rpc_ok='"result":{'
# answers GOOD BODY URL [HEADER] -> exit 0 when the answer has GOOD and no "error" member, HEADER
# (`name: value`) sent with the request ($work/cert.pem, when there is one, verifies an https://
# URL).
answers() {
  local got cacert=() extra=()
  [ -f "$work/cert.pem" ] && cacert=(--cacert "$work/cert.pem")
  [ -n "${4:-}" ] && extra=(-H "$4")
  got=$(curl -s -m 5 "${cacert[@]}" "${extra[@]}" -H 'content-type: application/json' -d "$2" "$3" 2>/dev/null) || return 1
  [[ $got == *"$1"* && $got == *'"plan_id":"P1"'* && $got != *'"error"'* ]]
}

# nginx_head -> the start of an nginx configuration: one worker in the foreground, its logs in
# $work, no access log, `upstream up` (keepalive 256) on $UP_PORT; the caller adds its servers and
# closes the http block.
nginx_head() {
  cat <<NGINX
worker_processes 1;
daemon off;
error_log $work/nginx.err;
pid $work/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  upstream up { server 127.0.0.1:$UP_PORT; keepalive 256; }
NGINX
}

# lua BODY FILE -> the wrk script posting BODY, with a done() that writes wrk's latency histogram
# (each distinct latency in µs and its count) to $WRK_HIST, so that runs merge into one
# distribution, percentiles computed as wrk computes them.
lua() {
  printf 'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = [[%s]]\n' "$1" >"$2"
  cat >>"$2" <<'LUA'
done = function(summary, latency, requests)
  local f = assert(io.open(os.getenv("WRK_HIST"), "w"))
  for i = 1, #latency do local v, n = latency(i); f:write(string.format("%d %d\n", v, n)) end
  f:close()
end
LUA
}

# fleet_toml FILE -> the translating gateway on $GW_FLEET_PORT (worker_threads = $WG_THREADS, 1
# unset) with the upstream as three endpoints ($FLEET_UP1_PORT..3), balanced by $FLEET_BALANCE
# (least_request unset), the posted method in retry.methods.
fleet_toml() {
  cat >"$1" <<TOML
[server]
listen = "127.0.0.1:$GW_FLEET_PORT"
worker_threads = ${WG_THREADS:-1}
[[upstreams]]
name = "legacy"
endpoints = ["http://127.0.0.1:$FLEET_UP1_PORT/a2a", "http://127.0.0.1:$FLEET_UP2_PORT/a2a", "http://127.0.0.1:$FLEET_UP3_PORT/a2a"]
balance = "${FLEET_BALANCE:-least_request}"
dialect = "legacy"
[upstreams.retry]
attempts = 2
methods = ["$rpc_method"]
[[routes]]
methods = ["*"]
upstream = "legacy"
TOML
}
