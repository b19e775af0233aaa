#!/usr/bin/env python3
"""A memory service whose capacity is the bottleneck, for bench/overload.sh: it answers
the audit log's list (`GET /v1/tenants/{tenant}/audit`, an empty page) and its health
(`GET /v1/health`) after DELAY seconds, serving at most CAP requests at once; the rest
wait their turn, as in a saturated service. HTTP/1.1 keep-alive, stdlib only, loopback.
Prints `listening on HOST:PORT` once bound.

usage: slow_memory.py [DELAY=0.05] [CAP=32]
"""
import asyncio
import sys

DELAY = float(sys.argv[1]) if len(sys.argv) > 1 else 0.05
CAP = int(sys.argv[2]) if len(sys.argv) > 2 else 32
PAGE = b'{"entries":[],"next_cursor":null}'
HEALTH = b'{"status":"ok"}'
MISSING = b'{"error":"not_found"}'


def response(status, body):
    reason = b"OK" if status == 200 else b"Not Found"
    return b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        status, reason, len(body), body)


async def serve(reader, writer, slots):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            method, target = lines[0].split(b" ")[:2]
            length = 0
            for line in lines[1:]:
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if length:
                await reader.readexactly(length)
            path = target.split(b"?", 1)[0]
            if method == b"GET" and path == b"/v1/health":
                answer = response(200, HEALTH)
            elif method == b"GET" and path.startswith(b"/v1/tenants/") and path.endswith(b"/audit"):
                async with slots:
                    await asyncio.sleep(DELAY)
                answer = response(200, PAGE)
            else:
                answer = response(404, MISSING)
            writer.write(answer)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()


async def main():
    slots = asyncio.Semaphore(CAP)
    server = await asyncio.start_server(lambda r, w: serve(r, w, slots), "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    print("listening on %s:%d" % (host, port), flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
