#!/usr/bin/env python3
"""A bounded fault-and-load run against the built bridge over Streamable HTTP (loopback).

For each store (SQLite in a temp data dir; Postgres when --postgres-admin is given) it
starts `cyberos-mcp-bridge --dev --transport http --listen 127.0.0.1:0` with paced CUO
children, then for LOAD_S seconds mixes:
  - authorised calls from three tenants (workflow tasks, short tools, tasks/get, tasks/list);
  - unauthenticated floods (no token, a bad token, 1 MiB bodies, slow bodies);
  - CUO children killed with SIGKILL mid-run;
  - the store made unavailable for OUTAGE_S seconds (SQLite: another process holds an
    exclusive lock on the file; Postgres: the database refuses connections and the
    bridge's sessions are terminated).
Then it stops the load, waits (bounded) for every task to end, and prints: calls made,
tasks started, tasks ended per status, tasks left running (must be 0), errors by class,
and the bridge's peak RSS. Exits 1 when a task is left running or the bridge died.

Standard library only; every loop is bounded in count and time.
"""

import argparse
import collections
import http.client
import json
import os
import random
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

ADR = {"persona": "chief-technology-officer", "workflow": "adr-quick-capture"}
TENANTS = [
    "aaaaaaaa-0000-4000-8000-00000000000a",
    "bbbbbbbb-0000-4000-8000-00000000000b",
    "cccccccc-0000-4000-8000-00000000000c",
]


class Tally:
    """Thread-safe counters."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = collections.Counter()
        self.task_ids = collections.defaultdict(set)

    def add(self, key, n=1):
        with self.lock:
            self.counts[key] += n

    def task(self, token, task_id):
        with self.lock:
            self.task_ids[token].add(task_id)


def post(conn, body, token=None, timeout=30):
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
    }
    if token:
        headers["authorization"] = "Bearer " + token
    conn.timeout = timeout
    conn.request("POST", "/mcp", body=body, headers=headers)
    resp = conn.getresponse()
    raw = resp.read()
    text = raw.decode("utf-8", "replace")
    if "text/event-stream" in (resp.getheader("content-type") or ""):
        # The last `data:` line carries the response.
        data = [l[5:].strip() for l in text.splitlines() if l.startswith("data:")]
        text = data[-1] if data else ""
    try:
        frame = json.loads(text) if text else None
    except ValueError:
        frame = None
    return resp.status, frame


def rpc(method, params, rid=1):
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def outcome(status, frame):
    """One word for what a call got: ok, an error class, or an HTTP status."""
    if isinstance(frame, dict) and "error" in frame:
        data = frame["error"].get("data") or {}
        return "error:" + str(data.get("class", frame["error"].get("code")))
    if isinstance(frame, dict) and "result" in frame:
        if frame["result"].get("isError"):
            return "error:tool_result"
        return "ok"
    return "http:%d" % status


def authorised(addr, token, tally, stop):
    conn = http.client.HTTPConnection(*addr, timeout=30)
    known = []
    rid = 0
    while not stop.is_set():
        rid += 1
        pick = random.random()
        if pick < 0.4:
            body = rpc("tools/call", {"name": "cyberos.cuo.execute_workflow",
                                      "arguments": dict(ADR, inputs={"title": "load %d" % rid})}, rid)
        elif pick < 0.7:
            body = rpc("tools/call", {"name": "cyberos.skill.list_skills", "arguments": {}}, rid)
        elif pick < 0.9 and known:
            body = rpc("tasks/get", {"taskId": random.choice(known)}, rid)
        else:
            body = rpc("tasks/list", {}, rid)
        try:
            status, frame = post(conn, body, token)
        except (OSError, http.client.HTTPException):
            tally.add("calls")
            tally.add("transport_error")
            conn.close()
            conn = http.client.HTTPConnection(*addr, timeout=30)
            time.sleep(0.2)
            continue
        tally.add("calls")
        tally.add(outcome(status, frame))
        if isinstance(frame, dict):
            sc = (frame.get("result") or {}).get("structuredContent") or {}
            if isinstance(sc, dict) and sc.get("task_id"):
                known.append(sc["task_id"])
                tally.task(token, sc["task_id"])
                tally.add("tasks_started")
        if status in (429, 503):
            time.sleep(0.2)
    conn.close()


def flood(addr, tally, stop, kind):
    big = rpc("tools/list", {"pad": "x" * (1024 * 1024)})
    small = rpc("tools/list", {})
    while not stop.is_set():
        try:
            if kind == "slow":
                # A 1 MiB body, sent 4 KiB every 50 ms until stopped or sent.
                s = socket.create_connection(addr, timeout=10)
                s.sendall(("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           "Content-Length: %d\r\n\r\n" % len(big)).encode())
                sent = 0
                while sent < len(big) and not stop.is_set():
                    s.sendall(big[sent:sent + 4096].encode())
                    sent += 4096
                    time.sleep(0.05)
                s.close()
                tally.add("flood_slow")
                continue
            conn = http.client.HTTPConnection(*addr, timeout=30)
            token = None if kind == "none" else "not-a-token"
            status, _ = post(conn, big if kind == "big" else small, token)
            conn.close()
            tally.add("flood_%d" % status)
        except (OSError, http.client.HTTPException):
            tally.add("flood_transport_error")
            time.sleep(0.05)


def children(pid):
    """Pids of the bridge's CUO children (direct children running `cuo-runner`)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid != pid:
                continue
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                if b"cuo-runner" in f.read():
                    found.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return found


def killer(pid, tally, stop):
    while not stop.wait(3):
        kids = children(pid)
        if kids:
            try:
                os.kill(random.choice(kids), signal.SIGKILL)
                tally.add("children_killed")
            except OSError:
                pass


def peak_rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def outage_sqlite(db_path, seconds, tally):
    conn = sqlite3.connect(db_path, timeout=30, isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    tally.add("outage_started")
    time.sleep(seconds)
    conn.execute("ROLLBACK")
    conn.close()


def psql(admin, sql):
    subprocess.run(["psql", admin, "-v", "ON_ERROR_STOP=1", "-qAtc", sql], check=True,
                   stdout=subprocess.DEVNULL)


def outage_postgres(admin, db, seconds, tally):
    psql(admin, 'ALTER DATABASE "%s" ALLOW_CONNECTIONS false' % db)
    psql(admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '%s'" % db)
    tally.add("outage_started")
    time.sleep(seconds)
    psql(admin, 'ALTER DATABASE "%s" ALLOW_CONNECTIONS true' % db)


def list_tasks(addr, token):
    """Every task of the token's tenant: {id: status}."""
    conn = http.client.HTTPConnection(*addr, timeout=30)
    tasks, cursor = {}, None
    for _ in range(400):
        params = {"cursor": cursor} if cursor else {}
        status, frame = post(conn, rpc("tasks/list", params), token)
        if status == 429:
            # tasks/* count against the tenant's rate: wait as told.
            time.sleep(1)
            continue
        result = (frame or {}).get("result")
        if status != 200 or not result:
            raise RuntimeError("tasks/list failed: %s %s" % (status, frame))
        for t in result.get("tasks", []):
            tasks[t["taskId"]] = t["status"]
        cursor = result.get("nextCursor")
        if not cursor:
            break
    conn.close()
    return tasks


def run(store, bridge, skills, args, admin=None):
    tmp = tempfile.mkdtemp(prefix="fault-load-")
    data = os.path.join(tmp, "data")
    extra = []
    db = None
    if store == "postgres":
        db = "cyberos_fault_%d" % os.getpid()
        psql(admin, 'CREATE DATABASE "%s"' % db)
        url = re.sub(r"/[^/?]*(\?|$)", "/%s\\1" % db, admin.split("://", 1)[1], count=1)
        url = admin.split("://", 1)[0] + "://" + url
        subprocess.run([bridge, "migrate", "--database-url", url], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        extra = ["--database-url", url]
    cuo = "%s cuo-runner --pace-ms %d" % (bridge, args.pace_ms)
    log = open(os.path.join(tmp, "bridge.log"), "w+")
    proc = subprocess.Popen(
        [bridge, "--dev", "--transport", "http", "--listen", "127.0.0.1:0", "--data-dir", data,
         "--skills-dir", skills, "--cuo-command", cuo] + extra,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    try:
        addr = None
        for _ in range(200):
            log.seek(0)
            m = re.search(r"listening on (\S+)", log.read())
            if m:
                host, port = m.group(1).rsplit(":", 1)
                addr = (host, int(port))
                break
            time.sleep(0.05)
        if not addr:
            raise RuntimeError("the bridge did not start")
        tokens = [subprocess.run([bridge, "--data-dir", data, "dev-token", "--tenant", t],
                                 check=True, capture_output=True, text=True).stdout.strip()
                  for t in TENANTS]
        tally, stop = Tally(), threading.Event()
        threads = [threading.Thread(target=authorised, args=(addr, tokens[i % 3], tally, stop))
                   for i in range(args.clients)]
        threads += [threading.Thread(target=flood, args=(addr, tally, stop, k))
                    for k in ("none", "bad", "big", "big", "slow", "slow")]
        threads.append(threading.Thread(target=killer, args=(proc.pid, tally, stop)))
        start = time.time()
        for t in threads:
            t.start()
        time.sleep(args.outage_at)
        if store == "sqlite":
            outage_sqlite(os.path.join(data, "bridge.sqlite3"), args.outage_s, tally)
        else:
            outage_postgres(admin, db, args.outage_s, tally)
        time.sleep(max(0, args.load_s - (time.time() - start)))
        stop.set()
        for t in threads:
            t.join(timeout=60)
        # Every task must end: wait (bounded) until none is running.
        deadline = time.time() + args.drain_s
        while True:
            statuses = {}
            for tok in tokens:
                statuses.update(list_tasks(addr, tok))
            running = sum(1 for s in statuses.values() if s == "working")
            if running == 0 or time.time() > deadline:
                break
            time.sleep(1)
        ended = collections.Counter(s for s in statuses.values() if s != "working")
        alive = proc.poll() is None
        report = {
            "store": store,
            "seconds": round(time.time() - start, 1),
            "calls": tally.counts["calls"],
            "tasks_started": tally.counts["tasks_started"],
            "tasks_stored": len(statuses),
            "tasks_ended": dict(ended),
            "tasks_left_running": running,
            "errors_by_class": {k: v for k, v in tally.counts.items() if k.startswith(("error:", "http:", "transport"))},
            "ok_calls": tally.counts["ok"],
            "unauthenticated": {k: v for k, v in tally.counts.items() if k.startswith("flood")},
            "children_killed": tally.counts["children_killed"],
            "peak_rss_mib": round(peak_rss_kib(proc.pid) / 1024, 1),
            "bridge_alive": alive,
        }
        return report
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        if db:
            subprocess.run(["psql", admin, "-qAtc", 'DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % db],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bridge")
    p.add_argument("skills")
    p.add_argument("--postgres-admin", help="admin URL; runs the Postgres part too")
    p.add_argument("--load-s", type=float, default=75)
    p.add_argument("--outage-at", type=float, default=15)
    p.add_argument("--outage-s", type=float, default=40)
    p.add_argument("--drain-s", type=float, default=120)
    p.add_argument("--clients", type=int, default=6)
    p.add_argument("--pace-ms", type=int, default=400)
    args = p.parse_args()
    failed = False
    stores = ["sqlite"] + (["postgres"] if args.postgres_admin else [])
    for store in stores:
        report = run(store, args.bridge, args.skills, args, args.postgres_admin)
        print(json.dumps(report, indent=2, sort_keys=True))
        sys.stdout.flush()
        failed |= report["tasks_left_running"] != 0 or not report["bridge_alive"]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
