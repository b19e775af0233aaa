"""What the cluster scripts share (Python 3 standard library only): a JSON-RPC call over
Streamable HTTP, and HAProxy's per-server statistics from its stats socket.

As a command: `cluster.py wait-up SOCKET N SECONDS` waits until HAProxy sees N servers UP
(exit 1 when it does not within SECONDS); `cluster.py stats SOCKET` prints the
per-server request counts.
"""

import csv
import io
import json
import socket
import sys
import time
import urllib.error
import urllib.request

PROTOCOL = "2025-11-25"
# The header HAProxy adds to every response it relays (examples/cluster/cluster.sh).
SERVED_BY = "X-Served-By"


class Reply:
    def __init__(self, status, headers, frame):
        self.status = status
        self.headers = headers
        self.frame = frame

    @property
    def served_by(self):
        return self.headers.get(SERVED_BY, "")


def _frame(content_type, body):
    """The JSON-RPC frame of a response: the body, or the last SSE event's data."""
    text = body.decode("utf-8", "replace")
    if content_type.startswith("text/event-stream"):
        data = [l[5:].strip() for l in text.splitlines() if l.startswith("data:")]
        text = data[-1] if data else ""
    try:
        return json.loads(text)
    except ValueError:
        return {"unparsed": text[:200]}


def rpc(base, token, method, params, rid=1, timeout=30):
    """POSTs one JSON-RPC request to `base`/mcp; never raises for an HTTP status."""
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    req = urllib.request.Request(
        base + "/mcp",
        data=body.encode(),
        method="POST",
        headers={
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": PROTOCOL,
            "authorization": "Bearer " + token,
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return Reply(resp.status, resp.headers, _frame(resp.headers.get("content-type", ""), resp.read()))
    except urllib.error.HTTPError as e:
        return Reply(e.code, e.headers, _frame(e.headers.get("content-type", ""), e.read()))


class Stream:
    """An SSE response read event by event: `events` holds (id, data) pairs, `retry` the
    last `retry` field."""

    def __init__(self, resp):
        self.resp = resp
        self.status = resp.status
        self.headers = resp.headers
        self.events = []
        self.retry = None

    def next_event(self):
        """Reads one event (comments skipped); False at the end of the stream."""
        fields = {}
        while True:
            line = self.resp.readline()
            if not line:
                return False
            line = line.decode("utf-8", "replace").rstrip("\r\n")
            if line.startswith(":"):
                continue
            if line:
                name, _, value = line.partition(":")
                fields[name] = value[1:] if value.startswith(" ") else value
                continue
            if "retry" in fields:
                self.retry = fields["retry"]
            if "id" in fields or "data" in fields:
                self.events.append((fields.get("id", ""), fields.get("data", "")))
                return True
            fields = {}

    def rest(self):
        """Reads to the end of the stream."""
        while self.next_event():
            pass
        self.resp.close()
        return self


def stream(base, token, body=None, last_event_id=None, timeout=60):
    """POSTs `body` (or GETs, resuming after `last_event_id`) to `base`/mcp and returns the
    SSE response, its head read; raises for a status other than 200."""
    headers = {
        "accept": "application/json, text/event-stream" if body else "text/event-stream",
        "mcp-protocol-version": PROTOCOL,
        "authorization": "Bearer " + token,
    }
    data = None
    if body is not None:
        headers["content-type"] = "application/json"
        data = json.dumps(body).encode()
    if last_event_id is not None:
        headers["last-event-id"] = last_event_id
    req = urllib.request.Request(base + "/mcp", data=data, method="POST" if body else "GET", headers=headers)
    return Stream(urllib.request.urlopen(req, timeout=timeout))


def stats(sock_path):
    """HAProxy's `show stat` rows of the backend's servers, as dicts."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(sock_path)
        s.sendall(b"show stat\n")
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    text = b"".join(chunks).decode().lstrip("# ")
    rows = csv.DictReader(io.StringIO(text))
    return [r for r in rows if r.get("svname") not in ("FRONTEND", "BACKEND", None)]


def wait_up(sock_path, n, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if sum(1 for r in stats(sock_path) if r["status"] == "UP") >= n:
                return True
        except OSError:
            pass  # not listening yet
        time.sleep(0.2)
    return False


def print_counts(sock_path, out=sys.stdout):
    print("per-instance requests (HAProxy stats):", file=out)
    for r in stats(sock_path):
        print(
            f"  {r['svname']}: {r['status']:<5} requests={r['stot']:>5}  2xx={r['hrsp_2xx']}"
            f" 4xx={r['hrsp_4xx']} 5xx={r['hrsp_5xx']}  failed health checks={r['chkfail']}",
            file=out,
        )


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "wait-up":
        sys.exit(0 if wait_up(sys.argv[2], int(sys.argv[3]), float(sys.argv[4])) else 1)
    if len(sys.argv) == 3 and sys.argv[1] == "stats":
        print_counts(sys.argv[2])
        sys.exit(0)
    print(__doc__, file=sys.stderr)
    sys.exit(2)
