#!/usr/bin/env python3
"""Opens N `tools/call` SSE streams that wait on the bridge at ADDR, each on its own
keep-alive HTTP/1.1 connection: initialize a session that declares `elicitation`, then
call `cyberos.memory.append_audit`, which asks the client to confirm on the call's own
SSE stream and waits for the answer. Prints `held N` once every stream has its
`elicitation/create`, then holds them until stdin closes or HOLD seconds pass, and closes
them unanswered (nothing is written).

Stream i uses the token on line i // PER of TOKENS (the bridge keeps at most 16 open
questions per subject and 256 per tenant, so the tokens are of several tenants and
subjects).

usage: waiting_streams.py ADDR N TOKENS_FILE [HOLD=30]   (loopback only; bounded)
env: BATCH=200 streams opened at once (each batch within 20 s), PER=16
"""
import asyncio
import json
import os
import sys


def request(host, port, token, body, session=None):
    extra = b"MCP-Session-Id: %s\r\n" % session.encode() if session else b""
    return (
        b"POST /mcp HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n"
        b"Authorization: Bearer %s\r\n%sContent-Length: %d\r\n\r\n%s"
        % (host.encode(), port, token.encode(), extra, len(body), body)
    )


async def answer(reader):
    """The status, headers and body of a response with a Content-Length (or none)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if b":" in line:
            k, v = line.split(b":", 1)
            headers[k.strip().lower()] = v.strip()
    length = int(headers.get(b"content-length", b"0"))
    body = await reader.readexactly(length) if length else b""
    return status, headers, body


async def one(host, port, token, i):
    reader, writer = await asyncio.open_connection(host, port)
    init = json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                   "clientInfo": {"name": "waiting-streams", "version": "1"}},
    }).encode()
    writer.write(request(host, port, token, init))
    status, headers, body = await answer(reader)
    session = headers.get(b"mcp-session-id")
    if status != 200 or not session:
        raise SystemExit("initialize: %d %r" % (status, body[:200]))
    session = session.decode()
    done = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    writer.write(request(host, port, token, done, session))
    status, _, body = await answer(reader)
    if status != 202:
        raise SystemExit("notifications/initialized: %d %r" % (status, body[:200]))
    call = json.dumps({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "cyberos.memory.append_audit",
                   "arguments": {"kind": "note", "body": {"n": i}}},
    }).encode()
    writer.write(request(host, port, token, call, session))
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200") or b"text/event-stream" not in head:
        rest = await reader.read(300)
        raise SystemExit("tools/call: not a stream: %r" % (head[:200] + rest))
    seen = b""
    while b"elicitation/create" not in seen:
        chunk = await reader.read(4096)
        if not chunk:
            raise SystemExit("the stream ended before its question: %r" % seen[-200:])
        seen = (seen + chunk)[-8192:]
    return writer


async def main():
    addr, n, tokens_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    hold = float(sys.argv[4]) if len(sys.argv) > 4 else 30.0
    host, port = addr.rsplit(":", 1)
    if host not in ("127.0.0.1", "localhost", "[::1]"):
        raise SystemExit("loopback only")
    with open(tokens_file) as f:
        tokens = [t.strip() for t in f if t.strip()]
    per = int(os.environ.get("PER", "16"))
    if n > len(tokens) * per:
        raise SystemExit("need %d tokens for %d streams" % (-(-n // per), n))
    step = int(os.environ.get("BATCH", "200"))
    writers = []
    for start in range(0, n, step):
        batch = [one(host, int(port), tokens[i // per], i)
                 for i in range(start, min(n, start + step))]
        writers += await asyncio.wait_for(asyncio.gather(*batch), 20)
    print("held", len(writers), flush=True)
    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(loop.run_in_executor(None, sys.stdin.read), hold)
    except asyncio.TimeoutError:
        pass
    for w in writers:
        w.close()


asyncio.run(main())
