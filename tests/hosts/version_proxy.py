#!/usr/bin/env python3
"""version_proxy.py BRIDGE_URL PORT_FILE LOG: the version shim over Streamable HTTP (see
README). A loopback proxy in front of the bridge's /mcp that passes every request and
response through, except: the bridge's initialize result gets the protocolVersion the
host asked for, and the host's later `MCP-Protocol-Version: <that>` header goes to the
bridge as the bridge's own version. Each change is appended to LOG as one JSON line.
For a host whose MCP SDK refuses the bridge's 2025-11-25 (the Gemini CLI)."""
import json, re, sys, threading, urllib.error, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

target, port_file, log_path = sys.argv[1], sys.argv[2], sys.argv[3]
lock = threading.Lock()
state = {"asked": None, "answered": None}


def note(**kv):
    with lock, open(log_path, "a") as f:
        f.write(json.dumps(kv) + "\n")


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def forward(self):
        n = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(n) if n else None
        try:
            msg = json.loads(body) if body else None
        except ValueError:
            msg = None
        init = isinstance(msg, dict) and msg.get("method") == "initialize"
        if init:
            state["asked"] = (msg.get("params") or {}).get("protocolVersion")
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length", "connection")}
        for k in list(headers):
            if k.lower() == "mcp-protocol-version" and headers[k] == state["asked"] and state["answered"]:
                headers[k] = state["answered"]
                note(header=[state["asked"], state["answered"]])
        req = urllib.request.Request(target, data=body, headers=headers, method=self.command)
        try:
            resp = urllib.request.urlopen(req, timeout=120)
        except urllib.error.HTTPError as e:
            resp = e
        data = resp.read()
        if init and state["asked"]:
            m = re.search(rb'"protocolVersion":"([^"]+)"', data)
            if m and m.group(1).decode() != state["asked"]:
                state["answered"] = m.group(1).decode()
                data = data[:m.start(1)] + state["asked"].encode() + data[m.end(1):]
                note(protocolVersion=[state["answered"], state["asked"]])
        self.send_response(resp.status)
        for k, v in resp.headers.items():
            if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(k, v)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_POST = do_GET = do_DELETE = do_OPTIONS = forward


srv = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
srv.daemon_threads = True
with open(port_file, "w") as f:
    f.write(str(srv.server_address[1]))
srv.serve_forever()
