#!/usr/bin/env python3
"""stdio_tap.py LOG CMD ARGS...: run CMD as a stdio MCP server, copying every line
between the host and it unchanged, and appending each to LOG as
{"t": seconds, "dir": "host>bridge" | "bridge>host", "msg": <the JSON>}.
Shows the host's side of the protocol (clientInfo, capabilities, params, progress)."""
import json, os, signal, subprocess, sys, threading, time

log_path, cmd = sys.argv[1], sys.argv[2:]
t0 = time.monotonic()
lock = threading.Lock()
child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def record(direction, line):
    try:
        msg = json.loads(line)
    except ValueError:
        msg = line.decode("utf-8", "replace")
    with lock, open(log_path, "a") as f:
        f.write(json.dumps({"t": round(time.monotonic() - t0, 3), "dir": direction, "msg": msg}) + "\n")


def pump(src, dst, direction):
    for line in iter(src.readline, b""):
        record(direction, line)
        try:
            dst.write(line)
            dst.flush()
        except (BrokenPipeError, ValueError):
            break
    try:
        dst.close()
    except OSError:
        pass


signal.signal(signal.SIGTERM, lambda *_: child.terminate())
up = threading.Thread(target=pump, args=(sys.stdin.buffer, child.stdin, "host>bridge"), daemon=True)
up.start()
pump(child.stdout, sys.stdout.buffer, "bridge>host")
sys.exit(child.wait())
