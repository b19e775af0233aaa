#!/usr/bin/env python3
"""Opens N keep-alive HTTP/1.1 connections to ADDR, sends one authenticated POST /mcp on
each and reads its answer, then holds them all open and idle: prints `held N` once every
connection has its answer, and closes them when stdin closes or after HOLD seconds.

usage: idle_conns.py ADDR N TOKEN [HOLD=8]     (loopback only; bounded in count and time)
env: BATCH=100 connections opened at once (each batch within 10 s)
"""
import asyncio
import os
import sys

BODY = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'


async def one(host, port, token):
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(
        b"POST /mcp HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n"
        b"Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s"
        % (host.encode(), port, token.encode(), len(BODY), BODY)
    )
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise SystemExit("not a 200: %r" % head[:80])
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    await reader.readexactly(length)
    return writer


async def main():
    addr, n, token = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    hold = float(sys.argv[4]) if len(sys.argv) > 4 else 8.0
    host, port = addr.rsplit(":", 1)
    if host not in ("127.0.0.1", "localhost", "[::1]"):
        raise SystemExit("loopback only")
    writers = []
    step = int(os.environ.get("BATCH", "100"))
    for start in range(0, n, step):
        batch = [one(host, int(port), token) for _ in range(start, min(n, start + step))]
        writers += await asyncio.wait_for(asyncio.gather(*batch), 10)
    print("held", len(writers), flush=True)
    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(loop.run_in_executor(None, sys.stdin.read), hold)
    except asyncio.TimeoutError:
        pass
    for w in writers:
        w.close()


asyncio.run(main())
