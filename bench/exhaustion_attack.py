#!/usr/bin/env python3
"""Slow partial requests and a one-address flood, to check a node's
exhaustion limits by hand (figures in docs/operations.md).

Usage: python3 bench/exhaustion_attack.py HTTP_PORT WS_PORT [FLOOD]
against a node on 127.0.0.1 (needs 127.0.0.2 as a second source address,
as on Linux). Only for nodes you operate.

Phase 1: 300 partial HTTP requests from 127.0.0.1; how many are still open
after 5 s and after 12 s (header timeout 10 s).
Phase 2: one address opens N partial connections (flood); how many the node
keeps; then from 127.0.0.2: /health, device login, WebSocket upgrade.
"""
import asyncio, base64, json, os, resource, sys, time

HTTP = ("127.0.0.1", int(sys.argv[1]))
WS = ("127.0.0.1", int(sys.argv[2]))
FLOOD = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
PARTIAL = b"GET /health HTTP/1.1\r\nHost: x\r\n"

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def open_partial(src):
    r, w = await asyncio.open_connection(*HTTP, local_addr=(src, 0))
    w.write(PARTIAL)
    await w.drain()
    return r, w


async def is_open(r):
    try:
        data = await asyncio.wait_for(r.read(1), 0.05)
        return False if data == b"" else True
    except asyncio.TimeoutError:
        return True
    except ConnectionError:
        return False


async def request(src, addr, raw):
    t0 = time.monotonic()
    r, w = await asyncio.open_connection(*addr, local_addr=(src, 0))
    w.write(raw)
    await w.drain()
    head = await asyncio.wait_for(r.read(65536), 10)
    w.close()
    return head.split(b"\r\n", 1)[0].decode(), (time.monotonic() - t0) * 1000


async def phase1():
    conns = [await open_partial("127.0.0.1") for _ in range(300)]
    t0 = time.monotonic()
    await asyncio.sleep(5)
    at5 = sum(await asyncio.gather(*[is_open(r) for r, _ in conns]))
    await asyncio.sleep(12 - (time.monotonic() - t0))
    at12 = sum(await asyncio.gather(*[is_open(r) for r, _ in conns]))
    for _, w in conns:
        w.close()
    print(f"phase1: 300 partial requests; open after 5 s: {at5}; open after 12 s: {at12}")


async def phase2():
    held = []
    refused = 0
    t0 = time.monotonic()
    sem = asyncio.Semaphore(500)

    async def one():
        nonlocal refused
        async with sem:
            try:
                r, w = await open_partial("127.0.0.1")
            except OSError:
                refused += 1
                return
            held.append((r, w))

    await asyncio.gather(*[one() for _ in range(FLOOD)])
    await asyncio.sleep(1)
    still = sum(await asyncio.gather(*[is_open(r) for r, _ in held]))
    print(f"phase2: {FLOOD} attempts from 127.0.0.1 in {time.monotonic() - t0:.1f} s; "
          f"connect errors {refused}; still open after 1 s: {still}")
    status, ms = await request("127.0.0.2", HTTP, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    print(f"  127.0.0.2 GET /health: {status} in {ms:.1f} ms")
    body = json.dumps({"id": f"attack-check-{os.getpid()}", "create": True, "username": f"p{os.getpid()}"}).encode()
    raw = (b"POST /v1/auth/device HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
           b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    status, ms = await request("127.0.0.2", HTTP, raw)
    print(f"  127.0.0.2 POST /v1/auth/device: {status} in {ms:.1f} ms")
    key = base64.b64encode(os.urandom(16))
    raw = (b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + key + b"\r\n\r\n")
    status, ms = await request("127.0.0.2", WS, raw)
    print(f"  127.0.0.2 WebSocket upgrade: {status} in {ms:.1f} ms")
    status, _ = await request("127.0.0.2", HTTP, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    r, w = await asyncio.open_connection(*HTTP, local_addr=("127.0.0.2", 0))
    w.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    text = (await asyncio.wait_for(r.read(), 10)).decode()
    for line in text.splitlines():
        if line.startswith(("citadel_connections_refused_total{", "citadel_accept_errors_total{", "citadel_http_connections_open ")):
            print("  " + line)
    for _, w in held:
        w.close()


async def main():
    await phase1()
    await phase2()


asyncio.run(main())
