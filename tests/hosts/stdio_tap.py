#!/usr/bin/env python3
"""stdio_tap.py [--echo-version] LOG CMD ARGS...: run CMD as a stdio MCP server, copying
every line between the host and it unchanged, and appending each to LOG as
{"t": seconds, "dir": "host>bridge" | "bridge>host", "msg": <the JSON>}.
Shows the host's side of the protocol (clientInfo, capabilities, params, progress).

--echo-version (the version shim, see README): the one line it changes is the bridge's
initialize result, whose protocolVersion becomes the one the host asked for; logged as
{"dir": "shim", "msg": {"protocolVersion": [bridge's, host's]}}. For a host whose MCP
SDK refuses the bridge's 2025-11-25 (the Gemini CLI)."""
import json, os, signal, subprocess, sys, threading, time

args = sys.argv[1:]
echo_version = args[:1] == ["--echo-version"]
log_path, cmd = args[echo_version:][0], args[echo_version:][1:]
t0 = time.monotonic()
lock = threading.Lock()
child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
asked = {}  # the host's initialize request id -> the protocolVersion it asked for


def record(direction, line):
    try:
        msg = json.loads(line)
    except ValueError:
        msg = line.decode("utf-8", "replace")
    with lock, open(log_path, "a") as f:
        f.write(json.dumps({"t": round(time.monotonic() - t0, 3), "dir": direction, "msg": msg}) + "\n")


def shim(direction, line):
    """The bridge's initialize result with the host's protocolVersion (--echo-version)."""
    try:
        msg = json.loads(line)
    except ValueError:
        return line
    if not isinstance(msg, dict):
        return line
    if direction == "host>bridge" and msg.get("method") == "initialize":
        asked[json.dumps(msg.get("id"))] = (msg.get("params") or {}).get("protocolVersion")
    elif direction == "bridge>host" and json.dumps(msg.get("id")) in asked and isinstance(msg.get("result"), dict):
        want, got = asked.pop(json.dumps(msg.get("id"))), msg["result"].get("protocolVersion")
        if want and got and want != got:
            msg["result"]["protocolVersion"] = want
            record("shim", json.dumps({"protocolVersion": [got, want]}).encode())
            return (json.dumps(msg) + "\n").encode()
    return line


def pump(src, dst, direction):
    for line in iter(src.readline, b""):
        record(direction, line)
        if echo_version:
            line = shim(direction, line)
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
