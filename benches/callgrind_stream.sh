#!/usr/bin/env bash
# Instructions per delivered event on the SSE path (callgrind), which do not move with the
# machine's load: the release gateway under callgrind, the fake sid flooding one context, one
# subscriber reading its stream; a short and a long flood subtracted, so start-up, the first turn
# and shutdown cancel out. Counts the gateway process only (every thread, user space), not the
# child sid or the client.
#
#   benches/callgrind_stream.sh                      # this tree (builds it)
#   BIN_DIR=/path/to/target/release benches/callgrind_stream.sh   # another build
#   SHORT=2000 LONG=10000 benches/callgrind_stream.sh
#   PORT_BASE=23300 benches/callgrind_stream.sh       # the gateway on PORT_BASE + 0..199 (default 19300)
#   A2A=0.3 benches/callgrind_stream.sh               # the subscriber an A2A spec stream (0.3 or 1.0)
#
# The subscriber reads GET /contexts/{id}/events (the seed dialect's shared frames); with A2A=
# it is instead the flood's own streaming call in that version's dialect (`message/stream` with
# `A2A-Version: 0.3`, `SendStreamingMessage` with 1.0), whose frames each stream encodes itself.
#
# Runs with the shipped defaults but for one: sid.subscriber_buffer = 65 536, which older builds
# need to deliver the flood at all and current ones ignore. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
SHORT=${SHORT:-2000}
LONG=${LONG:-10000}
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind >/dev/null; }
if [ -z "${BIN_DIR:-}" ]; then
  # Apart: with an example, the gateway would get tokio's `test-util` (a dev-dependency's).
  cargo build --release --quiet --bin wiregate && cargo build --release --quiet --example fake_sid
  BIN_DIR=$PWD/target/release
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/flood.py" <<'PY'
import json, socket, sys, threading, uuid
port, n, a2a = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def post(body):
    s = socket.create_connection(("127.0.0.1", port))
    b = json.dumps(body).encode()
    s.sendall(b"POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
              b"connection: close\r\ncontent-length: %d\r\n\r\n" % len(b) + b)
    out = b""
    while (d := s.recv(65536)):
        out += d
    return out.decode()
msg = lambda text, **kw: {"jsonrpc": "2.0", "id": 1, "method": "message/send",
                          "params": {"message": {"parts": [{"text": text}]}, **kw}}
def spec_stream(version, text):
    if version == "0.3":
        method, parts, role = "message/stream", [{"kind": "text", "text": text}], "user"
    else:
        method, parts, role = "SendStreamingMessage", [{"text": text}], "ROLE_USER"
    b = json.dumps({"jsonrpc": "2.0", "id": 7, "method": method, "params": {"message": {
        "messageId": str(uuid.uuid4()), "role": role, "parts": parts}}}).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
              b"a2a-version: %s\r\ncontent-length: %d\r\n\r\n" % (version.encode(), len(b)) + b)
    return s
if a2a:
    s, t, mark = spec_stream(a2a, "flood %d" % n), None, b'"artifactId":"response"'
else:
    r = post(msg("hello"))
    ctx = r[r.index('"contextId":"') + 13:][:36]
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(("GET /contexts/%s/events HTTP/1.1\r\nhost: x\r\nlast-event-id: 999999999\r\n\r\n" % ctx).encode())
    t = threading.Thread(target=post, args=(msg("flood %d" % n, contextId=ctx),))
    t.start()
    mark = b'"artifact":"response"'
seen, carry = 0, b""
while seen < n:
    d = s.recv(262144)
    if not d:
        sys.exit("the stream ended after %d of %d deltas" % (seen, n))
    carry += d
    frames = carry.split(b"\n\n")
    carry = frames.pop()
    seen += sum(mark in f for f in frames)
if t:
    t.join()
PY
count() { # lines -> instructions of the gateway process
  local port=$((${PORT_BASE:-19300} + RANDOM % 200))
  (cd "$work" && WIREGATE_SERVER__LISTEN=127.0.0.1:$port WIREGATE_SID__ENABLED=true \
    WIREGATE_SID__COMMAND="[\"$BIN_DIR/examples/fake_sid\",\"--raw\"]" \
    WIREGATE_SID__SUBSCRIBER_BUFFER=65536 RUST_LOG=error \
    exec valgrind --tool=callgrind --callgrind-out-file="$work/cg.$1" "$BIN_DIR/wiregate" \
    >"$work/vg.$1" 2>&1) &
  local vg=$!
  for _ in $(seq 100); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $port))" 2>/dev/null && break
    sleep 0.2
  done
  python3 "$work/flood.py" "$port" "$1" "${A2A:-}"
  kill -INT "$vg"; wait "$vg" || true
  grep -o 'refs: *[0-9,]*' "$work/vg.$1" | tr -dc '0-9'
}
short=$(count "$SHORT")
long=$(count "$LONG")
echo "instructions per delivered event: $(( (long - short) / (LONG - SHORT) ))  ($BIN_DIR; floods of $SHORT and $LONG lines${A2A:+; A2A $A2A stream})"
