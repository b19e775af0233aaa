"""A bounded load through the cluster's balancer (bench/cluster_load.sh starts the cluster
and reads the store's counters around each phase). Python 3 standard library only.

    cluster_load.py MODE LB_URL TOKEN_FILE SECONDS CONCURRENCY PIDS

MODE `calls`: wrk (CONCURRENCY keep-alive connections, two threads) sends
`tools/call cyberos.cuo.list_personas` (a round trip to the instance's shared CUO child)
back to back for SECONDS, after one checked call. MODE `long`: each worker runs one task to
its end, polling every second (for a paced CUO: the writes of one long run). MODE `tasks`: each worker creates a task (`cyberos.cuo.execute_workflow` with `params.task`) and polls `tasks/get`
every 100 ms until it ends, then starts the next; tasks still running at SECONDS are
waited for (at most 30 s) and not counted. TOKEN_FILE holds one token a line (one per
tenant); worker i uses line i modulo their number. PIDS is `name=pid,...` (bridges, haproxy,
postmaster): the CPU each used is read from /proc before and after, a bridge's CUO
children (reaped) apart from the bridge itself, the postmaster with its live backends.
"""

import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
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


def machine():
    """(busy, total) CPU seconds of the whole machine, all cores, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return (sum(v) - idle) / TICK, sum(v) / TICK


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


WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = os.getenv("LOAD_BODY")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = os.getenv("LOAD_PROTOCOL")
wrk.headers["Authorization"] = "Bearer " .. os.getenv("LOAD_TOKEN")
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %d %d %d %d\\n", summary.requests, summary.duration,
    e.connect + e.read + e.write + e.status + e.timeout, latency:percentile(50), latency:percentile(99)))
end
"""


def calls(base, token, seconds, conc):
    """wrk against the balancer: (succeeded, failed, p50 s, p99 s)."""
    call = {"name": "cyberos.cuo.list_personas", "arguments": {}}
    r = Client(base, token).rpc("tools/call", call)
    if not (r and "result" in r and not r["result"].get("isError")):
        sys.exit(f"the call fails: {r}")
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as lua:
        lua.write(WRK_SCRIPT)
        lua.flush()
        env = dict(os.environ, LOAD_BODY=body, LOAD_TOKEN=token, LOAD_PROTOCOL=PROTOCOL)
        out = subprocess.run(
            ["wrk", "-t2", f"-c{conc}", f"-d{int(seconds)}s", "--timeout", "10s", "-s", lua.name, base + "/mcp"],
            env=env, capture_output=True, text=True, timeout=seconds + 30, check=True,
        ).stdout
    n, _, errors, p50, p99 = (int(x) for x in out.split("RESULT ")[1].split())
    return n - errors, errors, p50 / 1e6, p99 / 1e6


def worker(base, token, stop_at, results, once=False):
    c = Client(base, token)
    while time.monotonic() < stop_at or once:
        t0 = time.monotonic()
        r = c.rpc("tools/call", {"name": "cyberos.cuo.execute_workflow", "arguments": ARGS, "task": {}})
        tid = ((r or {}).get("result") or {}).get("task", {}).get("taskId")
        if not tid:
            results.append((False, time.monotonic() - t0, True))
            continue
        status = "working"
        while status == "working" and time.monotonic() < stop_at + DRAIN:
            time.sleep(1.0 if once else POLL)
            g = c.rpc("tasks/get", {"taskId": tid})
            status = ((g or {}).get("result") or {}).get("status", "error")
        done = time.monotonic()
        results.append((status == "completed", done - t0, once or done <= stop_at))
        if once:
            return


def main():
    mode, base, token_file, seconds, conc, pids = sys.argv[1:7]
    tokens = open(token_file).read().split()
    pids = {k: int(v) for k, v in (p.split("=") for p in pids.split(","))}
    seconds, conc = float(seconds), int(conc)
    results = []
    before, client_before, machine_before = cpu(pids), os.times(), machine()
    if mode == "calls":
        n, failed, p50, p99 = calls(base, tokens[0], seconds, conc)
        unit = "calls"
    else:
        stop_at = time.monotonic() + seconds
        threads = [
            threading.Thread(target=worker, args=(base, tokens[i % len(tokens)], stop_at, results, mode == "long"))
            for i in range(conc)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(seconds + DRAIN + 35)
        within = [r for r in results if r[2]]
        lat = sorted(r[1] for r in within if r[0])
        n, failed, unit = len(lat), len(within) - len(lat), "tasks"
        p50 = statistics.median(lat) if lat else 0
        p99 = lat[int(0.99 * (len(lat) - 1))] if lat else 0
    after, client_after, machine_after = cpu(pids), os.times(), machine()
    print(f"{mode}: {n} {unit} succeeded within {seconds:.0f} s, {conc} at a time: "
          f"{n / seconds:.1f} {unit}/s; failed {failed}; latency p50 {1000 * p50:.0f} ms, p99 {1000 * p99:.0f} ms")
    total = 0.0
    for name in sorted(after):
        own = after[name][0] - before.get(name, (0, 0))[0]
        kids = after[name][1] - before.get(name, (0, 0))[1]
        total += own + kids
        extra = f" + CUO children {kids:.1f} s" if name.startswith("b") else ""
        print(f"  cpu {name}: {own:.1f} s{extra}")
    per = 1000 * total / n if n else 0
    print(f"  cpu of the cluster: {total:.1f} s in {seconds:.0f} s ({total / seconds:.2f} cores), {per:.2f} ms per {unit[:-1]}")
    load = sum(client_after[:4]) - sum(client_before[:4])  # this process and wrk (a reaped child)
    print(f"  cpu of the load generator: {load:.1f} s ({load / seconds:.2f} cores)")
    busy, all_ = (a - b for a, b in zip(machine_after, machine_before))
    cores = os.cpu_count()
    print(f"  machine: {busy / all_ * cores:.2f} of {cores} cores busy (the cluster, the load and anything else running)")
    sys.exit(0 if n and not failed else 1)


if __name__ == "__main__":
    main()
