#!/usr/bin/env python3
"""SSE subscription churn against a running gateway, with the gateway's RSS sampled.

    benches/sse_churn.py PORT GATEWAY_PID TOTAL [PATHS]
    benches/sse_churn.py 19302 "$(pgrep -f 'wiregate --config')" 40000 /events

Opens TOTAL subscriptions (32 at a time) to PATHS (comma-separated, default /events), each with
`Last-Event-ID: 1`: reads its first chunk, keeps it 20 ms, closes it. After every 5 000 it reads
`/metrics` once and prints the gateway's VmRSS (kB). Standard library only; loopback only.
Used for benches/SOAK.md ("The slower growth").
"""
import asyncio
import sys

HOST = "127.0.0.1"
PORT = int(sys.argv[1])
PID = int(sys.argv[2])
TOTAL = int(sys.argv[3])
PATHS = sys.argv[4].split(",") if len(sys.argv) > 4 else ["/events"]
CONC = 32
EVERY = 5000


def rss():
    with open(f"/proc/{PID}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])


async def scrape():
    r, w = await asyncio.open_connection(HOST, PORT)
    w.write(b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
    await w.drain()
    await r.read()
    w.close()


async def one(i):
    r, w = await asyncio.open_connection(HOST, PORT)
    path = PATHS[i % len(PATHS)]
    w.write(
        f"GET {path} HTTP/1.1\r\nhost: x\r\nlast-event-id: 1\r\n"
        "accept: text/event-stream\r\n\r\n".encode()
    )
    await w.drain()
    try:
        await asyncio.wait_for(r.read(4096), 1.0)
        await asyncio.sleep(0.02)
    except asyncio.TimeoutError:
        pass
    w.close()


async def main():
    sem = asyncio.Semaphore(CONC)
    errors = 0

    async def run(i):
        nonlocal errors
        async with sem:
            try:
                await one(i)
            except OSError:
                errors += 1

    print("subscriptions,rss_kb", flush=True)
    print(f"0,{rss()}", flush=True)
    for base in range(0, TOTAL, EVERY):
        await asyncio.gather(*(run(i) for i in range(base, min(TOTAL, base + EVERY))))
        await scrape()
        await asyncio.sleep(0.5)
        print(f"{min(TOTAL, base + EVERY)},{rss()}", flush=True)
    if errors:
        print(f"{errors} subscriptions failed", file=sys.stderr)
        sys.exit(1)


asyncio.run(main())
