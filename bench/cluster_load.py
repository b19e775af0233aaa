"""A bounded load through the cluster's balancer (bench/cluster_load.sh starts the cluster
and reads the store's counters around each phase). Python 3 standard library only.

    cluster_load.py MODE LB_URL TOKEN_FILE SECONDS CONCURRENCY PIDS

MODE `calls`: CONCURRENCY workers send `tools/call cyberos.cuo.list_personas` (a round trip
to the instance's shared CUO child) back to back for SECONDS. MODE `tasks`: each worker
creates a task (`cyberos.cuo.execute_workflow` with `params.task`) and polls `tasks/get`
every 100 ms until it ends, then starts the next; tasks still running at SECONDS are
waited for (at most 30 s) and not counted. PIDS is `name=pid,...` (bridges, haproxy,
postmaster): the CPU each used is read from /proc before and after, a bridge's CUO
children (reaped) apart from the bridge itself, the postmaster with its live backends.
"""

import http.client
import json
import os
import statistics
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "cluster"))
from cluster import PROTOCOL  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
ARGS = {"persona": "chief-technology-officer", "workflow": "adr-quick-capture", "inputs": {"title": "load"}}
POLL = 0.1
DRAIN = 30.0


def stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # After the command: state ppid ... utime(14) stime(15) cutime(16) cstime(17), 1-based.
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK, (int(fields[13]) + int(fields[14])) / TICK


def cpu(pids):
    """name -> (own CPU s, reaped children's CPU s); the postmaster's live backends count as own."""
    out = {}
    for name, pid in pids.items():
        try:
            _, own, kids = stat(pid)
        except OSError:
            continue
        if name == "postgres":
            for p in os.listdir("/proc"):
                if p.isdigit():
                    try:
                        ppid, o, _ = stat(int(p))
                    except (OSError, IndexError, ValueError):
                        continue
                    if ppid == pid:
                        own += o
        out[name] = (own, kids)
    return out


class Client:
    """One keep-alive connection to the balancer."""

    def __init__(self, base, token):
        u = urllib.parse.urlsplit(base)
        self.host, self.port, self.token, self.conn = u.hostname, u.port, token, None

    def rpc(self, method, params):
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": PROTOCOL,
            "authorization": "Bearer " + self.token,
        }
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
            try:
                self.conn.request("POST", "/mcp", body, headers)
                resp = self.conn.getresponse()
                text = resp.read().decode()
                break
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt:
                    return None
        if resp.getheader("content-type", "").startswith("text/event-stream"):
            data = [l[5:].strip() for l in text.splitlines() if l.startswith("data:")]
            text = data[-1] if data else "{}"
        return json.loads(text) if resp.status == 200 else None


def worker(mode, base, token, stop_at, results):
    c = Client(base, token)
    while time.monotonic() < stop_at:
        t0 = time.monotonic()
        if mode == "calls":
            r = c.rpc("tools/call", {"name": "cyberos.cuo.list_personas", "arguments": {}})
            ok = r is not None and "result" in r and not r["result"].get("isError")
            results.append((ok, time.monotonic() - t0, t0 < stop_at))
            continue
        r = c.rpc("tools/call", {"name": "cyberos.cuo.execute_workflow", "arguments": ARGS, "task": {}})
        tid = ((r or {}).get("result") or {}).get("task", {}).get("taskId")
        if not tid:
            results.append((False, time.monotonic() - t0, True))
            continue
        status = "working"
        while status == "working" and time.monotonic() < stop_at + DRAIN:
            time.sleep(POLL)
            g = c.rpc("tasks/get", {"taskId": tid})
            status = ((g or {}).get("result") or {}).get("status", "error")
        done = time.monotonic()
        results.append((status == "completed", done - t0, done <= stop_at))


def main():
    mode, base, token_file, seconds, conc, pids = sys.argv[1:7]
    token = open(token_file).read().strip()
    pids = {k: int(v) for k, v in (p.split("=") for p in pids.split(","))}
    seconds, conc = float(seconds), int(conc)
    results = []
    before = cpu(pids)
    start = time.monotonic()
    stop_at = start + seconds
    threads = [threading.Thread(target=worker, args=(mode, base, token, stop_at, results)) for _ in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + DRAIN + 35)
    after = cpu(pids)
    within = [r for r in results if r[2]]
    ok = [r for r in within if r[0]]
    lat = sorted(r[1] for r in ok)
    unit = "tasks" if mode == "tasks" else "calls"
    print(f"{mode}: {len(ok)} {unit} succeeded within {seconds:.0f} s with {conc} workers: "
          f"{len(ok) / seconds:.1f} {unit}/s; failed {len(within) - len(ok)}; "
          f"latency p50 {1000 * statistics.median(lat) if lat else 0:.0f} ms, "
          f"p99 {1000 * lat[int(0.99 * (len(lat) - 1))] if lat else 0:.0f} ms")
    total = 0.0
    for name in sorted(after):
        own = after[name][0] - before.get(name, (0, 0))[0]
        kids = after[name][1] - before.get(name, (0, 0))[1]
        total += own + kids
        extra = f" + CUO children {kids:.1f} s" if name.startswith("b") else ""
        print(f"  cpu {name}: {own:.1f} s{extra}")
    per = 1000 * total / len(ok) if ok else 0
    print(f"  cpu of the cluster: {total:.1f} s in {seconds:.0f} s ({total / seconds:.2f} cores), {per:.1f} ms per {unit[:-1]}")
    sys.exit(0 if ok and len(ok) == len(within) else 1)


if __name__ == "__main__":
    main()
