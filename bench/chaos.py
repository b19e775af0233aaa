#!/usr/bin/env python3
"""The chaos run's load, faults and invariants (bench/chaos.sh starts the cluster and calls
this). Python 3 standard library only; every loop is bounded in count and time.

For DURATION seconds, clients of two tenants work through the balancer: tasks with
`params.task` polled with `tasks/get` and read with `tasks/result`; plain calls answered
with a task handle, polled in the seed's shape; tasks waited for in `tasks/result` and
waiting `tools/call` streams (a `User-Agent` of a host that waits), both cut on purpose or
by a fault and resumed with `Last-Event-ID`; short calls; confirmed `append_audit` writes;
probes of the other tenant's tasks, streams and audit rows. Meanwhile: SIGKILL of a random
instance every 20-40 s and its restart, PostgreSQL restarted (fast) twice, a 10 s TCP cut
between one instance and PostgreSQL (bench/tcp_cut.py), the CUO children of an instance
killed every 8-15 s. Then the load drains, every task is read once more, the instances are
stopped, and the invariants are checked against the clients' records, the task store
(psql) and the audit log (the shared SQLite file). Prints the figures, the last line a
verdict; exits 1 when an invariant fails.
"""

import argparse
import collections
import hashlib
import http.client
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "cluster"))
from cluster import PROTOCOL, wait_up  # noqa: E402

WORKFLOW = {"persona": "chief-technology-officer", "workflow": "adr-quick-capture"}
SKILL = "chaos-slow"
CLASSES = {"input_validation": -32602, "authz_denied": -32000, "upstream_unavailable": -32050, "internal_error": -32603}
TRACE = re.compile(r"^[0-9a-f]{32}$")
TERMINAL = ("completed", "failed", "cancelled")
# The message of the refusal a request gets while the task store is down.
STORE_DOWN = "the task store is unavailable"
# The User-Agent product of a host that waits for long calls (`--long-running auto`).
WAITING_HOST = "claude-code/2.1.0 (chaos)"
HTTP_TIMEOUT = 30.0
# A stream read that sees nothing this long is given up (a resume follows).
STREAM_READ_TIMEOUT = 45.0
# After the load stops, the work in progress gets this long to end.
DRAIN_S = 75.0
# A request cut by a SIGKILL: one in flight at the kill, or sent this soon after it
# (before the balancer's health checks mark the instance down).
KILL_WINDOW_S = 3.0


def now():
    return time.monotonic()


def digest(value):
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


class Records:
    """Everything the clients saw, for the checks at the end."""

    def __init__(self):
        self.lock = threading.Lock()
        self.tasks = {}  # task id -> {tenant, kind, marker}
        self.views = collections.defaultdict(list)  # task id -> [(reader, status, detail)]
        self.streams = []
        self.audits = []  # {tenant, marker, answered, ok, audit_id}
        self.errors = []  # (what, class or None, ok, detail)
        self.transport = []  # (start, end, what, detail)
        self.violations = []
        self.counts = collections.Counter()
        self.listed = collections.defaultdict(set)  # tenant -> task ids it listed
        self.audit_seen = collections.defaultdict(list)  # tenant -> entries read_audit returned

    def handed(self, tid, tenant, kind, marker):
        with self.lock:
            if tid in self.tasks:
                self.violations.append(f"task {tid} handed out twice ({self.tasks[tid]['kind']}, {kind})")
            self.tasks[tid] = {"tenant": tenant, "kind": kind, "marker": marker}
            self.counts["accepted"] += 1

    def view(self, tid, reader, status, detail=None):
        with self.lock:
            self.views[tid].append((reader, status, detail))

    def violation(self, what):
        with self.lock:
            self.violations.append(what)

    def add(self, key, n=1):
        with self.lock:
            self.counts[key] += n


class Faults:
    """When each fault happened, for the error checks."""

    def __init__(self):
        self.lock = threading.Lock()
        self.kills = []  # monotonic times of SIGKILLs
        self.log = []  # (seconds since start, what)
        self.counts = collections.Counter()

    def note(self, t0, kind, what):
        with self.lock:
            self.counts[kind] += 1
            self.log.append((now() - t0, what))
        print(f"[chaos] {now() - t0:6.1f} s  {what}", flush=True)

    def excuses(self, start, end):
        """Whether a request from `start` to `end` was cut by a SIGKILL."""
        with self.lock:
            return any(start <= k + KILL_WINDOW_S and end >= k for k in self.kills)


class Http:
    """One keep-alive connection to the balancer, remade after any transport error."""

    def __init__(self, host, port, token, agent=None):
        self.host, self.port, self.token, self.agent = host, port, token, agent
        self.conn = None

    def headers(self, accept="application/json, text/event-stream"):
        h = {"accept": accept, "mcp-protocol-version": PROTOCOL, "authorization": "Bearer " + self.token}
        if self.agent:
            h["user-agent"] = self.agent
        return h

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def open(self, timeout):
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        else:
            self.conn.timeout = timeout
            if self.conn.sock is not None:
                self.conn.sock.settimeout(timeout)
        return self.conn

    def post(self, body, timeout=HTTP_TIMEOUT):
        """(HTTP status, headers, JSON-RPC frame or None); raises OSError/HTTPException."""
        h = self.headers()
        h["content-type"] = "application/json"
        try:
            conn = self.open(timeout)
            conn.request("POST", "/mcp", json.dumps(body), h)
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException):
            self.close()
            raise
        text = raw.decode("utf-8", "replace")
        if (resp.getheader("content-type") or "").startswith("text/event-stream"):
            data = [l[5:].strip() for l in text.splitlines() if l.startswith("data:")]
            text = data[-1] if data else ""
        try:
            frame = json.loads(text) if text else None
        except ValueError:
            frame = None
        return resp.status, resp.headers, frame

    def open_stream(self, body=None, last_event_id=None):
        """An SSE response on a connection of its own (so it can be cut)."""
        h = self.headers("application/json, text/event-stream" if body else "text/event-stream")
        data = None
        if body is not None:
            h["content-type"] = "application/json"
            data = json.dumps(body)
        if last_event_id is not None:
            h["last-event-id"] = last_event_id
        conn = http.client.HTTPConnection(self.host, self.port, timeout=STREAM_READ_TIMEOUT)
        conn.request("POST" if body is not None else "GET", "/mcp", data, h)
        return conn, conn.getresponse()


def sse_events(resp):
    """Yields (id, data) per SSE event; returns at the end of the stream."""
    fields = {}
    for _ in range(100000):
        line = resp.readline()
        if not line:
            return
        line = line.decode("utf-8", "replace").rstrip("\r\n")
        if line.startswith(":"):
            continue
        if line:
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value
            continue
        if "id" in fields or "data" in fields:
            yield fields.get("id", ""), fields.get("data", "")
        fields = {}


class Client(threading.Thread):
    """A client of one tenant; `kind` names its loop."""

    def __init__(self, run, kind, tenant, n):
        super().__init__(name=f"{kind}-{tenant[:4]}-{n}", daemon=True)
        self.run_, self.kind, self.tenant, self.n = run, kind, tenant, n
        agent = WAITING_HOST if kind == "stream" else None
        self.http = Http(run.host, run.port, run.tokens[tenant], agent)
        self.rid = 0
        self.rng = random.Random(f"{run.seed}-{self.name}")

    # --- plumbing ---------------------------------------------------------------------

    def next_id(self):
        self.rid += 1
        return self.rid

    def call(self, method, params, what=None, deadline=None):
        """One request, with 429/503 answered by waiting as told (bounded); returns the
        frame (None after a transport error or an answer without one)."""
        rec = self.run_.rec
        what = what or method
        deadline = deadline or (now() + HTTP_TIMEOUT * 2)
        for _ in range(20):
            body = {"jsonrpc": "2.0", "id": self.next_id(), "method": method, "params": params}
            start = now()
            try:
                status, headers, frame = self.http.post(body)
            except (OSError, http.client.HTTPException) as e:
                self.transport(start, what, f"{type(e).__name__}: {e}")
                return None
            rec.add("requests")
            self.check_error(what, status, frame, start)
            if status in (429, 503) and now() < deadline:
                rec.add(f"http_{status}")
                time.sleep(min(5.0, float(headers.get("retry-after") or 1)))
                continue
            return frame
        return None

    def transport(self, start, what, detail):
        rec = self.run_.rec
        end = now()
        with rec.lock:
            rec.transport.append((start, end, what, detail))
        rec.add("transport_errors")

    def check_error(self, what, status, frame, start):
        """Every error the bridge sends is one of the four classes with a trace id; an
        answer without a JSON-RPC frame is the balancer's (a transport error)."""
        rec = self.run_.rec
        if isinstance(frame, dict) and "error" in frame:
            err = frame["error"] or {}
            data = err.get("data") or {}
            cls = data.get("class")
            ok = cls in CLASSES and CLASSES[cls] == err.get("code") and bool(TRACE.match(str(data.get("trace_id", ""))))
            with rec.lock:
                rec.errors.append((what, cls, ok, json.dumps(err)[:300]))
            return
        if status != 200 and status != 202:
            self.transport(start, what, f"HTTP {status} without a JSON-RPC frame")

    def alive(self):
        return now() < self.run_.stop_at

    # --- loops ------------------------------------------------------------------------

    def run(self):
        loop = getattr(self, "loop_" + self.kind)
        for _ in range(100000):
            if not self.alive():
                break
            try:
                loop()
            except Exception as e:  # a bug in this script: reported, never hidden
                self.run_.rec.violation(f"client {self.name} crashed: {type(e).__name__}: {e}")
                break
            time.sleep(self.rng.uniform(0.05, 0.3))
        self.http.close()

    def marker(self):
        return f"chaos-{self.name}-{self.next_id()}"

    def long_call(self, marker, skill):
        if skill:
            return {"name": "cyberos.skill.invoke_skill", "arguments": {"skill": SKILL, "inputs": {"marker": marker}}}
        return {"name": "cyberos.cuo.execute_workflow", "arguments": dict(WORKFLOW, inputs={"title": marker})}

    def create_task(self, kind):
        """A task with `params.task`; its id, or None."""
        marker = self.marker()
        params = self.long_call(marker, skill=self.rng.random() < 0.2)
        params["task"] = {}
        frame = self.call("tools/call", params, "tools/call (params.task)")
        task = ((frame or {}).get("result") or {}).get("task") or {}
        tid = task.get("taskId")
        if tid:
            self.run_.rec.handed(tid, self.tenant, kind, marker)
        return tid

    def poll_spec(self, tid, drain):
        """tasks/get until terminal; its status, or None."""
        for _ in range(2000):
            if now() > drain:
                return None
            frame = self.call("tasks/get", {"taskId": tid})
            status = ((frame or {}).get("result") or {}).get("status")
            if status in TERMINAL:
                self.run_.rec.view(tid, "tasks/get", status)
                return status
            time.sleep(0.5)
        return None

    def result_detail(self, frame, waiting=False):
        """What a tool's answer says: ('completed', digest) or ('failed', class); None for
        no answer or a refusal to be retried. `tasks/result` gives a task's own failure
        with the related-task `_meta`, so an `upstream_unavailable` without it is a
        refusal; a waiting call's answer has no such `_meta`, and only the store's being
        down refuses it."""
        if not isinstance(frame, dict):
            return None
        if "error" in frame:
            data = (frame["error"] or {}).get("data") or {}
            if data.get("class") == "upstream_unavailable":
                if waiting and data.get("message") == STORE_DOWN:
                    return None
                if not waiting and "_meta" not in data:
                    return None
            return ("failed", data.get("class"))
        result = frame.get("result") or {}
        if result.get("isError"):
            return ("failed", (result.get("structuredContent") or {}).get("class"))
        return ("completed", digest(result.get("structuredContent")))

    def loop_task(self):
        """params.task, polled, then tasks/result."""
        tid = self.create_task("task")
        if not tid:
            return
        drain = self.run_.stop_at + DRAIN_S
        status = self.poll_spec(tid, drain)
        if status is None:
            return
        self.final_result(tid, "tasks/result")

    def final_result(self, tid, reader, deadline=None):
        """tasks/result of a task, asked again (bounded) while it is refused for now."""
        deadline = deadline or (self.run_.stop_at + DRAIN_S)
        for _ in range(10):
            frame = self.call("tasks/result", {"taskId": tid}, reader, deadline=deadline)
            detail = self.result_detail(frame)
            if detail:
                self.run_.rec.view(tid, reader, detail[0], detail[1])
                return
            if now() > deadline:
                return
            time.sleep(1)

    def loop_handle(self):
        """A plain call answered with a handle, polled in the seed's shape."""
        marker = self.marker()
        frame = self.call("tools/call", self.long_call(marker, skill=self.rng.random() < 0.2), "tools/call (handle)")
        sc = ((frame or {}).get("result") or {}).get("structuredContent") or {}
        tid = sc.get("task_id")
        if not tid:
            return
        if sc.get("status") != "running":
            self.run_.rec.violation(f"a plain call got {sc} instead of a running handle")
        self.run_.rec.handed(tid, self.tenant, "handle", marker)
        drain = self.run_.stop_at + DRAIN_S
        for _ in range(2000):
            if now() > drain:
                return
            frame = self.call("tasks/get", {"id": tid}, "tasks/get (seed)")
            got = (frame or {}).get("result") or {}
            if got.get("status") in TERMINAL:
                if got["status"] == "completed":
                    detail = digest(got.get("output"))
                else:
                    detail = (got.get("error") or {}).get("class")
                self.run_.rec.view(tid, "tasks/get (seed)", got["status"], detail)
                return
            time.sleep(0.5)

    def loop_wait(self):
        """params.task, then waiting in tasks/result (with progress), cut and resumed."""
        tid = self.create_task("wait")
        if not tid:
            return
        body = {"jsonrpc": "2.0", "id": self.next_id(), "method": "tasks/result",
                "params": {"taskId": tid, "_meta": {"progressToken": f"w{self.rid}"}}}
        self.follow(body, tid)

    def loop_stream(self):
        """A waiting tools/call (this client's User-Agent is a host that waits), cut and
        resumed."""
        marker = self.marker()
        params = self.long_call(marker, skill=self.rng.random() < 0.2)
        params["_meta"] = {"progressToken": f"s{self.rid}"}
        body = {"jsonrpc": "2.0", "id": self.next_id(), "method": "tools/call", "params": params}
        self.follow(body, None, marker)

    def follow(self, body, tid, marker=None):
        """Reads a waiting request's stream to its answer, cutting it on purpose once (half
        the time) after a random number of events and resuming after any cut."""
        rec = self.run_.rec
        rid = body["id"]
        record = {"tenant": self.tenant, "task": tid, "method": body["method"], "steps": [], "cuts": 0,
                  "resumes": 0, "answer": None, "end": None, "detail": "", "start": now(), "odd_ids": []}
        cut_after = self.rng.choice([1, 2, 3]) if self.rng.random() < 0.5 else None
        last_id = None
        seen_events = 0
        drain = self.run_.stop_at + DRAIN_S
        for attempt in range(12):
            if now() > drain:
                record["end"] = "gave up at the drain deadline"
                break
            if attempt and tid is None and last_id is None:
                record["end"] = "cut before the first event"
                break
            start = now()
            conn = None
            try:
                if attempt == 0:
                    conn, resp = self.http.open_stream(body=body)
                elif last_id is not None:
                    record["resumes"] += 1
                    conn, resp = self.http.open_stream(last_event_id=last_id)
                else:
                    # Cut before the first event: nothing to resume from; a task we know is
                    # waited for again (a stream that never primed is not a resume).
                    if tid is None:
                        record["end"] = "cut before the first event"
                        break
                    body = dict(body, id=self.next_id())
                    rid = body["id"]
                    conn, resp = self.http.open_stream(body=body)
                rec.add("requests")
                if resp.status != 200 or not (resp.getheader("content-type") or "").startswith("text/event-stream"):
                    raw = resp.read().decode("utf-8", "replace")
                    try:
                        frame = json.loads(raw)
                    except ValueError:
                        frame = None
                    self.check_error(body["method"] if attempt == 0 else "GET resume", resp.status, frame, start)
                    if resp.status in (429, 503):
                        rec.add(f"http_{resp.status}")
                        time.sleep(min(5.0, float(resp.getheader("retry-after") or 1)))
                        if attempt == 0:
                            record["end"] = "retryable"
                            record["detail"] = f"HTTP {resp.status}"
                            break
                        continue
                    if attempt == 0 and isinstance(frame, dict) and frame.get("id") == rid:
                        record["answer"] = frame  # answered as JSON at once
                        break
                    if frame is None and resp.status in (502, 504) and self.run_.faults.excuses(start, now()):
                        # The balancer's answer for an instance killed under the request.
                        record["cuts"] += 1
                        rec.add("streams_cut_by_faults")
                        time.sleep(self.rng.uniform(0.2, 1.0))
                        continue
                    record["end"] = "bad resume"
                    record["detail"] = f"HTTP {resp.status}: {raw[:200]}"
                    break
                cut = False
                for eid, data in sse_events(resp):
                    if eid:
                        last_id = eid
                        # A resumable id: `<task id>.<step>.<c|r>.<base64url>`.
                        parts = eid.split(".")
                        if len(parts) == 4 and parts[0].startswith("t-"):
                            if tid is None:
                                tid = parts[0]
                                rec.handed(tid, self.tenant, "stream", marker)
                                record["task"] = tid
                        else:
                            record["odd_ids"].append((eid, data[:120]))
                    frame = None
                    if data:
                        try:
                            frame = json.loads(data)
                        except ValueError:
                            record["detail"] = f"unparsable event {data[:100]}"
                    if isinstance(frame, dict) and frame.get("method") == "notifications/progress":
                        p = frame.get("params") or {}
                        related = ((p.get("_meta") or {}).get("io.modelcontextprotocol/related-task") or {}).get("taskId")
                        if related != tid:
                            rec.violation(f"stream of {tid} ({self.tenant}) got progress of {related}")
                        record["steps"].append(p.get("progress"))
                    elif isinstance(frame, dict) and ("result" in frame or "error" in frame):
                        if frame.get("id") != rid:
                            rec.violation(f"stream of {tid} answered id {frame.get('id')}, asked {rid}")
                        record["answer"] = frame
                        self.check_error("stream answer", 200, frame, start)
                    seen_events += 1
                    if record["answer"] is None and cut_after is not None and seen_events >= cut_after:
                        cut_after = None
                        cut = True
                        break
                if record["answer"] is not None:
                    break
                record["cuts"] += 1
                if cut:
                    rec.add("streams_cut_on_purpose")
                else:
                    rec.add("streams_cut_by_faults")
                    self.note_stream_cut(start, body["method"])
                time.sleep(self.rng.uniform(0.1, 1.0))
            except (OSError, http.client.HTTPException) as e:
                record["cuts"] += 1
                rec.add("streams_cut_by_faults")
                self.note_stream_cut(start, body["method"], f"{type(e).__name__}: {e}")
                time.sleep(self.rng.uniform(0.2, 1.0))
            finally:
                if conn is not None:
                    conn.close()
        if record["answer"] is not None:
            detail = self.result_detail(record["answer"], waiting=body["method"] == "tools/call")
            record["end"] = "answer" if detail else "retryable"
            if not detail:
                record["detail"] = json.dumps(record["answer"])[:200]
            if tid and detail:
                rec.view(tid, "stream answer", detail[0], detail[1])
        elif record["end"] is None:
            record["end"] = "no answer after 12 attempts"
        with rec.lock:
            rec.streams.append(record)

    def note_stream_cut(self, start, what, detail="the stream ended without an answer"):
        """A stream cut that no SIGKILL explains is a transport error (the TCP cut and a
        PostgreSQL restart must not end a client's stream)."""
        if not self.run_.faults.excuses(start, now()):
            self.transport(start, what + " stream", detail)

    def loop_short(self):
        """Short calls, reads of the tenant's tasks and audit rows, and probes of the other
        tenant's tasks, streams and audit rows."""
        rec = self.run_.rec
        pick = self.rng.random()
        if pick < 0.2:
            self.call("tools/call", {"name": "cyberos.cuo.list_personas", "arguments": {}}, "list_personas")
        elif pick < 0.35:
            self.call("tools/call", {"name": "cyberos.cuo.route", "arguments": {"query": "payment routing for new markets"}}, "route")
        elif pick < 0.45:
            self.call("tools/call", {"name": "cyberos.skill.list_skills", "arguments": {}}, "list_skills")
        elif pick < 0.6:
            frame = self.call("tasks/list", {})
            for t in ((frame or {}).get("result") or {}).get("tasks", []):
                with rec.lock:
                    rec.listed[self.tenant].add(t.get("taskId"))
        elif pick < 0.75:
            frame = self.call("tools/call", {"name": "cyberos.memory.read_audit", "arguments": {"limit": 50}}, "read_audit")
            entries = (((frame or {}).get("result") or {}).get("structuredContent") or {}).get("entries") or []
            with rec.lock:
                rec.audit_seen[self.tenant].extend(entries)
        else:
            self.probe_other()
        rec.add("short_calls")

    def probe_other(self):
        """The other tenant's task, progress stream and audit row must look missing."""
        rec = self.run_.rec
        with rec.lock:
            theirs = [t for t, v in rec.tasks.items() if v["tenant"] != self.tenant]
            their_audits = [a["audit_id"] for a in rec.audits if a["tenant"] != self.tenant and a.get("audit_id")]
        if not theirs:
            return
        tid = self.rng.choice(theirs[-50:])
        rec.add("isolation_probes")
        frame = self.call("tasks/get", {"taskId": tid}, "probe tasks/get")
        if not self.refused_as_missing(frame, "task not found"):
            rec.violation(f"{self.tenant} read {tid} of another tenant: {json.dumps(frame)[:200]}")
        frame = self.call("tasks/result", {"taskId": tid}, "probe tasks/result")
        if not self.refused_as_missing(frame, "task not found"):
            rec.violation(f"{self.tenant} got the result of {tid} of another tenant: {json.dumps(frame)[:200]}")
        # A resumable id of their task: answered like a missing task (404).
        start = now()
        conn = None
        try:
            conn, resp = self.http.open_stream(last_event_id=f"{tid}.1.r.WzEsInAiXQ")
            raw = resp.read().decode("utf-8", "replace")
            rec.add("requests")
            try:
                frame = json.loads(raw)
            except ValueError:
                frame = None
            if frame is None and resp.status != 404:
                self.transport(start, "probe resume", f"HTTP {resp.status} without a JSON-RPC frame")
            elif resp.status in (429, 503) and self.refused_as_missing(frame, None):
                self.check_error("probe resume", resp.status, frame, start)
            elif resp.status != 404:
                rec.violation(f"{self.tenant} resumed a stream of {tid} of another tenant: HTTP {resp.status} {raw[:200]}")
            else:
                try:
                    self.check_error("probe resume", resp.status, json.loads(raw), start)
                except ValueError:
                    self.transport(start, "probe resume", "404 without a JSON-RPC frame")
        except (OSError, http.client.HTTPException) as e:
            self.transport(start, "probe resume", f"{type(e).__name__}: {e}")
        finally:
            if conn is not None:
                conn.close()
        if their_audits:
            aid = self.rng.choice(their_audits[-50:])
            frame = self.call("tools/call", {"name": "cyberos.memory.read_audit", "arguments": {"audit_id": aid}}, "probe read_audit")
            if not self.refused_as_missing(frame, "audit entry not found"):
                rec.violation(f"{self.tenant} read audit row {aid} of another tenant: {json.dumps(frame)[:200]}")

    def refused_as_missing(self, frame, message):
        """None (a transport error, checked elsewhere), a retryable refusal, or the
        'missing' answer pass; anything else is a leak."""
        if frame is None:
            return True
        data = ((frame.get("error") or {}).get("data") or {}) if isinstance(frame, dict) else {}
        if data.get("class") == "upstream_unavailable":
            return True
        return data.get("class") == "input_validation" and data.get("message") == message

    def loop_audit(self):
        """A confirmed append_audit with a marker of its own (never retried: the marker
        must then be stored exactly once if the answer was a success, at most once if not)."""
        rec = self.run_.rec
        marker = self.marker()
        entry = {"tenant": self.tenant, "marker": marker, "answered": False, "ok": False, "audit_id": None}
        with rec.lock:
            rec.audits.append(entry)
        frame = self.call("tools/call", {
            "name": "cyberos.memory.append_audit",
            "arguments": {"kind": "chaos.note", "subject": marker, "body": {"marker": marker, "tenant": self.tenant}},
            "_meta": {"com.cyberos/confirmed": True},
        }, "append_audit")
        with rec.lock:
            entry["answered"] = frame is not None
            sc = ((frame or {}).get("result") or {}).get("structuredContent") or {}
            if sc.get("audit_id") and not (frame.get("result") or {}).get("isError"):
                entry["ok"] = True
                entry["audit_id"] = sc["audit_id"]
        time.sleep(self.rng.uniform(0.2, 0.8))


# --- the cluster's processes ------------------------------------------------------------


def proc_stat(pid):
    """(state, ppid, start time) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[1]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def alive(pid, started=None):
    st = proc_stat(pid)
    return st is not None and st[0] != "Z" and (started is None or st[2] == started)


def descendants(pid):
    """[(pid, start time, command)] of every live process below `pid`."""
    kids = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = proc_stat(int(entry))
            if st and st[0] != "Z":
                kids[st[1]].append((int(entry), st[2]))
    out, todo = [], [pid]
    for _ in range(10000):
        if not todo:
            break
        for child, started in kids.get(todo.pop(), []):
            try:
                with open(f"/proc/{child}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            except OSError:
                cmd = "?"
            out.append((child, started, cmd))
            todo.append(child)
    return out


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class Instance:
    """A bridge instance: its pid, and how to start it again (the same command line,
    environment and working directory, on the same address)."""

    def __init__(self, name, url, pid):
        self.name, self.url, self.pid = name, url, pid
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")[:-1]
        self.argv = [a.decode() for a in argv]
        i = self.argv.index("--listen")
        self.argv[i + 1] = url.split("://", 1)[1]
        with open(f"/proc/{pid}/environ", "rb") as f:
            self.env = dict(e.decode().split("=", 1) for e in f.read().split(b"\0") if b"=" in e)
        self.cwd = os.readlink(f"/proc/{pid}/cwd")
        self.proc = None
        self.incarnation = 1
        self.rss = []  # (incarnation, KiB)

    def start(self, logdir):
        self.incarnation += 1
        log = open(os.path.join(logdir, f"{self.name}.{self.incarnation}.log"), "w")
        self.proc = subprocess.Popen(self.argv, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=log)
        log.close()
        self.pid = self.proc.pid
        path = log.name
        for _ in range(300):
            with open(path) as f:
                if "listening on" in f.read():
                    return True
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        with open(path) as f:
            print(f"[chaos] {self.name} did not start again:\n{f.read()[-2000:]}", flush=True)
        return False

    def reap(self):
        if self.proc is not None:
            self.proc.poll()


class Run:
    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        u = args.lb.split("://", 1)[1]
        self.host, self.port = u.split(":")[0], int(u.split(":")[1])
        self.tokens = {}
        for line in open(args.tokens):
            tenant, token = line.split()
            self.tokens[tenant] = token
        self.rec = Records()
        self.faults = Faults()
        self.instances = []
        for i, spec in enumerate(args.instances.split(",")):
            url, pid = spec.rsplit("=", 1)
            self.instances.append(Instance(f"b{i + 1}", url, int(pid)))
        self.t0 = now()
        self.stop_at = self.t0 + args.duration
        self.orphans = []
        self.lock = threading.Lock()

    def save_pids(self):
        with open(self.args.pid_file + ".tmp", "w") as f:
            f.write(" ".join(str(i.pid) for i in self.instances) + "\n")
        os.replace(self.args.pid_file + ".tmp", self.args.pid_file)

    # --- faults -----------------------------------------------------------------------

    def as_postgres(self, argv):
        return (["runuser", "-u", "postgres", "--"] + argv) if os.getuid() == 0 else argv

    def pg_restart(self):
        t = now()
        r = subprocess.run(self.as_postgres([os.path.join(self.args.pg_bin, "pg_ctl"), "-D", os.path.join(self.args.pg_dir, "data"),
                                             "-l", os.path.join(self.args.pg_dir, "server.log"), "-m", "fast", "-w", "-t", "60", "restart"]),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=90, cwd="/")
        if r.returncode != 0:
            self.rec.violation(f"PostgreSQL did not restart: {r.stderr.strip()[:300]}")
        self.faults.note(self.t0, "pg_restarts", f"PostgreSQL restarted (fast) in {now() - t:.1f} s")

    def tcp_cut(self):
        os.kill(self.args.proxy_pid, signal.SIGUSR1)
        self.faults.note(self.t0, "tcp_cuts", f"TCP cut of {self.args.proxy_instance} from PostgreSQL for {self.args.cut_s:.0f} s")

    def kill_instance(self, rng):
        inst = rng.choice(self.instances)
        kids = descendants(inst.pid)
        with self.faults.lock:
            self.faults.kills.append(now())
        os.kill(inst.pid, signal.SIGKILL)
        self.faults.note(self.t0, "instance_kills", f"SIGKILL {inst.name} (pid {inst.pid}, {len(kids)} child process(es))")
        self.check_gone(inst, kids, f"{inst.name} SIGKILLed")
        time.sleep(rng.uniform(2.0, 4.0))
        if inst.start(self.args.log_dir):
            self.save_pids()
            self.faults.note(self.t0, "instance_restarts", f"{inst.name} restarted (pid {inst.pid})")
        else:
            self.rec.violation(f"{inst.name} did not start again")

    def check_gone(self, inst, kids, why):
        """Every process below the instance is gone within 5 s of its end."""
        deadline = now() + 5
        for _ in range(100):
            inst.reap()
            if not alive(inst.pid) and not any(alive(p, s) for p, s, _ in kids):
                return
            if now() > deadline:
                break
            time.sleep(0.1)
        left = [f"{p} ({c[:80]})" for p, s, c in kids if alive(p, s)]
        with self.lock:
            self.orphans.append(f"{why}: {', '.join(left) or 'the instance itself'} still running")

    def kill_cuo_children(self, rng):
        inst = rng.choice(self.instances)
        kids = [p for p, _, c in descendants(inst.pid) if "cuo-runner" in c and proc_stat(p) and proc_stat(p)[1] == inst.pid]
        for p in kids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        self.faults.counts["cuo_children_killed"] += len(kids)
        self.faults.note(self.t0, "cuo_kills", f"SIGKILL {len(kids)} CUO child(ren) of {inst.name}")

    def chaos(self):
        """The fault schedule: a kill every 20-40 s (and its restart), PostgreSQL restarts
        at 30 % and 70 % of the run, the TCP cut at 50 %, CUO children every 8-15 s."""
        rng = random.Random(f"{self.seed}-faults")
        d = self.args.duration
        fixed = [(0.3 * d, "pg"), (0.5 * d, "cut"), (0.7 * d, "pg")]
        next_kill = rng.uniform(20, 40)
        next_cuo = rng.uniform(8, 15)
        for _ in range(10000):
            t = now() - self.t0
            if t >= d:
                break
            if fixed and t >= fixed[0][0]:
                kind = fixed.pop(0)[1]
                self.pg_restart() if kind == "pg" else self.tcp_cut()
            elif t >= next_kill:
                self.kill_instance(rng)
                next_kill = now() - self.t0 + rng.uniform(20, 40)
            elif t >= next_cuo:
                self.kill_cuo_children(rng)
                next_cuo = now() - self.t0 + rng.uniform(8, 15)
            time.sleep(0.2)

    def sample(self, stop):
        for _ in range(100000):
            if stop.wait(1.0):
                return
            for inst in self.instances:
                inst.reap()
                kib = rss_kib(inst.pid)
                if kib:
                    inst.rss.append((inst.incarnation, kib))

    # --- the end ----------------------------------------------------------------------

    @staticmethod
    def result_detail_of(stream):
        frame = stream["answer"]
        if isinstance(frame, dict) and "result" in frame and not (frame["result"] or {}).get("isError"):
            return ("completed", None)
        return None

    def psql(self, sql):
        psql = os.path.join(self.args.pg_bin, "psql")
        if not os.path.exists(psql):
            psql = "psql"
        r = subprocess.run([psql, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(self.args.pg_port),
                            "-U", "postgres", "-d", "postgres", "-c", sql], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"psql: {r.stderr.strip()}")
        return r.stdout.strip()

    def store_tasks(self):
        out = self.psql("""SELECT coalesce(json_agg(json_build_object(
            'id', task_id, 'tenant', tenant_id, 'status', status, 'tool', tool_name, 'output', output,
            'class', error->>'class', 'marker', coalesce(input->'inputs'->>'title', input->'inputs'->>'marker'))), '[]')
            FROM plugin_host.tasks""")
        return {t["id"]: t for t in json.loads(out)}

    def drain(self):
        """Waits (bounded) until the store has no running task."""
        deadline = now() + DRAIN_S
        running = -1
        for _ in range(1000):
            try:
                running = int(self.psql("SELECT count(*) FROM plugin_host.tasks WHERE status = 'running'"))
            except (RuntimeError, ValueError, subprocess.TimeoutExpired):
                running = -1
            if running == 0 or now() > deadline:
                break
            time.sleep(1)
        return running

    def reread(self, store):
        """Every handed task read once more through the balancer (a reader of its own)."""
        clients = {t: Client(self, "short", t, 99) for t in self.tokens}
        for tid, t in list(self.rec.tasks.items()):
            c = clients[t["tenant"]]
            if t["kind"] == "handle":
                frame = c.call("tasks/get", {"id": tid}, "final tasks/get (seed)", deadline=now() + 30)
                got = (frame or {}).get("result") or {}
                if got.get("status") in TERMINAL:
                    detail = digest(got.get("output")) if got["status"] == "completed" else (got.get("error") or {}).get("class")
                    self.rec.view(tid, "final tasks/get (seed)", got["status"], detail)
            else:
                c.final_result(tid, "final tasks/result", deadline=now() + 30)
        for c in clients.values():
            c.http.close()

    def stop_instances(self):
        """SIGTERM to every instance; each must exit, and take every process below it."""
        for inst in self.instances:
            kids = descendants(inst.pid)
            try:
                os.kill(inst.pid, signal.SIGTERM)
            except OSError:
                continue
            deadline = now() + 20
            for _ in range(400):
                inst.reap()
                if not alive(inst.pid) or now() > deadline:
                    break
                time.sleep(0.05)
            self.check_gone(inst, kids, f"{inst.name} stopped (SIGTERM)")

    def main(self):
        a = self.args
        print(f"[chaos] {a.duration:.0f} s, seed {self.seed}, {len(self.tokens)} tenants, {len(self.instances)} instances", flush=True)
        self.save_pids()
        clients = []
        for tenant in self.tokens:
            for kind in ("task", "task", "handle", "wait", "stream", "stream", "short", "audit"):
                clients.append(Client(self, kind, tenant, len(clients)))
        stop_sampling = threading.Event()
        sampler = threading.Thread(target=self.sample, args=(stop_sampling,), daemon=True)
        sampler.start()
        for c in clients:
            c.start()
        self.chaos()
        print(f"[chaos] {now() - self.t0:6.1f} s  load stops; draining (at most {DRAIN_S:.0f} s)", flush=True)
        for c in clients:
            c.join(max(1.0, self.stop_at + DRAIN_S + 2 * HTTP_TIMEOUT - now()))
        stuck = [c.name for c in clients if c.is_alive()]
        if stuck:
            self.rec.violation(f"clients still waiting after the drain: {', '.join(stuck)}")
        if not wait_up(a.lb_sock, len(self.instances), 20):
            print("[chaos] not every instance is up for the final reads", flush=True)
        running = self.drain()
        store = self.store_tasks()
        self.reread(store)
        stop_sampling.set()
        sampler.join(5)
        self.stop_instances()
        self.save_pids()
        store = self.store_tasks()
        return self.verdict(store, running)

    def verdict(self, store, running):
        rec, a = self.rec, self.args
        failures = []

        def check(ok, what):
            print(("  ok   " if ok else "  FAIL ") + what)
            if not ok:
                failures.append(what)

        # Tasks: every handed task stored, ended once, every reader agreeing.
        accepted = rec.tasks
        lost = [t for t in accepted if t not in store or store[t]["status"] == "running"]
        by_status = collections.Counter(store[t]["status"] for t in accepted if t in store)
        failed_by_class = collections.Counter(store[t]["class"] for t in accepted if t in store and store[t]["status"] == "failed")
        markers = collections.Counter(t["marker"] for t in store.values() if t["marker"] and t["marker"].startswith("chaos-"))
        dup_tasks = {m: n for m, n in markers.items() if n > 1}
        disagree = []
        for tid, views in rec.views.items():
            s = store.get(tid)
            if s is None:
                continue
            want_detail = digest(s["output"]) if s["status"] == "completed" else s["class"]
            for reader, status, detail in views:
                if status != s["status"] or (detail is not None and detail != want_detail):
                    disagree.append(f"{tid}: {reader} saw {status}/{detail}, the store has {s['status']}/{want_detail}")
        unread = [t for t in accepted if t not in rec.views]
        # The audit log.
        db = sqlite3.connect(f"file:{a.sqlite}?mode=ro", uri=True)
        rows = db.execute("SELECT tenant_id, kind, subject, body, audit_id FROM audit_entries").fetchall()
        db.close()
        invoked = collections.Counter()
        invoked_tenant = {}
        notes = collections.Counter()
        note_ids = {}
        wrong_tenant_rows = []
        for tenant, kind, subject, body, audit_id in rows:
            if kind == "plugin.invoked":
                invoked[subject] += 1
                invoked_tenant[subject] = tenant
                if subject in store and store[subject]["tenant"] != tenant:
                    wrong_tenant_rows.append(f"plugin.invoked of {subject} under {tenant}")
            elif kind == "chaos.note":
                marker = json.loads(body).get("marker")
                notes[marker] += 1
                note_ids[marker] = audit_id
                if json.loads(body).get("tenant") != tenant:
                    wrong_tenant_rows.append(f"chaos.note {marker} under {tenant}")
        workflows = [t for t, s in store.items() if s["tool"] == "cyberos.cuo.execute_workflow"]
        completed_wf = [t for t in workflows if store[t]["status"] == "completed"]
        bad_invoked = [f"{t}: {invoked[t]} row(s)" for t in completed_wf if invoked[t] != 1]
        extra_invoked = [f"{t}: {n} rows" for t, n in invoked.items() if n > 1 and t not in completed_wf]
        confirmed = [x for x in rec.audits if x["ok"]]
        bad_audit = [f"{x['marker']}: {notes[x['marker']]} row(s)" for x in confirmed if notes[x["marker"]] != 1
                     or note_ids.get(x["marker"]) != x["audit_id"]]
        dup_audit = [f"{x['marker']}: {notes[x['marker']]} rows" for x in rec.audits if not x["ok"] and notes[x["marker"]] > 1]
        # Streams.
        streams = rec.streams
        resumed = [s for s in streams if s["resumes"]]
        dup_steps = [s for s in streams if len(s["steps"]) != len(set(s["steps"])) or s["steps"] != sorted(s["steps"])]
        bad_streams = [s for s in streams if s["end"] not in ("answer", "retryable")
                       and not (s["end"] == "cut before the first event")]
        unprimed = [s for s in streams if s["end"] == "cut before the first event"]
        # Every event of a stream that waited for a task carries a resumable id (a client
        # cut right after one that does not cannot resume).
        odd = [s for s in streams if s["odd_ids"]]
        unresumable = [s for s in odd if s["task"] or (self.result_detail_of(s) or ("", ""))[0] == "completed"]
        # Isolation.
        leaks = [v for v in rec.violations if "another tenant" in v or "got progress of" in v]
        for tenant, ids in rec.listed.items():
            for tid in ids:
                if tid in store and store[tid]["tenant"] != tenant:
                    leaks.append(f"tasks/list of {tenant} showed {tid} of {store[tid]['tenant']}")
        for tenant, entries in rec.audit_seen.items():
            for e in entries:
                subj = e.get("subject") or ""
                body = e.get("body") or {}
                if e.get("kind") == "plugin.invoked" and subj in store and store[subj]["tenant"] != tenant:
                    leaks.append(f"read_audit of {tenant} showed plugin.invoked of {subj}")
                if e.get("kind") == "chaos.note" and body.get("tenant") != tenant:
                    leaks.append(f"read_audit of {tenant} showed {body.get('marker')} of {body.get('tenant')}")
        progress_rows = self.psql("""SELECT count(*) FROM plugin_host.task_progress p JOIN plugin_host.tasks t USING (task_id)
                                      WHERE p.tenant_id <> t.tenant_id""")
        # Errors.
        bad_errors = [e for e in rec.errors if not e[2]]
        unexcused = [t for t in rec.transport if not self.faults.excuses(t[0], t[1])]
        classes = collections.Counter(e[1] for e in rec.errors)
        other = [v for v in rec.violations if v not in leaks]
        # Processes and memory.
        peaks = {i.name: max((k for _, k in i.rss), default=0) for i in self.instances}
        peak = max(peaks.values(), default=0)

        print()
        print(f"figures ({a.duration:.0f} s, seed {self.seed}, {a.build} binary):")
        print(f"  tasks accepted     {len(accepted)} ({', '.join(f'{k} {v}' for k, v in sorted(collections.Counter(t['kind'] for t in accepted.values()).items()))})")
        print(f"  completed          {by_status['completed']}")
        print(f"  failed by class    {dict(sorted(failed_by_class.items())) or '{}'}")
        print(f"  cancelled          {by_status['cancelled']}")
        print(f"  lost               {len(lost)}")
        duplicated = (len(dup_tasks) + sum(1 for n in invoked.values() if n > 1) + sum(1 for n in notes.values() if n > 1)
                      + len(dup_steps))
        print(f"  duplicated         {duplicated} (tasks of one call, plugin.invoked rows, audit rows, progress steps)")
        print(f"  streams            {len(streams)} followed, {rec.counts['streams_cut_on_purpose']} cut on purpose, "
              f"{rec.counts['streams_cut_by_faults']} cut by faults, {len(resumed)} resumed ({sum(s['resumes'] for s in resumed)} resumes), "
              f"{sum(1 for s in streams if s['end'] == 'answer')} answered, {sum(1 for s in streams if s['end'] == 'retryable')} retryable, "
              f"{len(unprimed)} cut before their first event, {len(odd)} with a non-resumable event id")
        print(f"  audit writes       {len(confirmed)} confirmed of {len(rec.audits)} sent; {len(completed_wf)} completed workflows, "
              f"{sum(invoked[t] for t in completed_wf)} plugin.invoked rows for them")
        print(f"  requests           {rec.counts['requests']} ({rec.counts['short_calls']} short loops, "
              f"{rec.counts['isolation_probes']} isolation probes, 429: {rec.counts['http_429']}, 503: {rec.counts['http_503']})")
        print(f"  errors by class    {dict(sorted((k or 'none', v) for k, v in classes.items()))}")
        print(f"  transport errors   {len(rec.transport)} ({len(rec.transport) - len(unexcused)} cut by a SIGKILL)")
        fc = self.faults.counts
        print(f"  faults injected    {fc['instance_kills']} SIGKILLs ({fc['instance_restarts']} restarts), {fc['pg_restarts']} PostgreSQL restarts, "
              f"{fc['tcp_cuts']} TCP cut of {a.cut_s:.0f} s, {fc['cuo_kills']} CUO kills ({fc['cuo_children_killed']} children)")
        print(f"  peak RSS           {peak / 1024:.1f} MiB ({', '.join(f'{n} {k / 1024:.1f}' for n, k in peaks.items())}; limit {a.rss_limit_mib} MiB)")
        print()
        print("invariants:")
        check(not lost, f"every accepted task ended in the store ({len(lost)} lost{': ' + ', '.join(lost[:5]) if lost else ''})")
        check(running == 0 and not any(s["status"] == "running" for s in store.values()),
              f"no task left running ({sum(1 for s in store.values() if s['status'] == 'running')} of {len(store)} in the store)")
        check(not disagree, f"every reader of a task saw the store's one terminal status and result ({sum(len(v) for v in rec.views.values())} reads; "
              f"{len(disagree)} disagree{': ' + '; '.join(disagree[:3]) if disagree else ''})")
        check(not unread, f"every accepted task was read to its end by a client ({len(unread)} unread{': ' + ', '.join(unread[:5]) if unread else ''})")
        check(not dup_tasks, f"no call created two tasks ({len(dup_tasks)}{': ' + str(list(dup_tasks.items())[:3]) if dup_tasks else ''})")
        check(not bad_invoked and not extra_invoked, f"every completed workflow has exactly one plugin.invoked row ({len(completed_wf)} workflows; "
              f"{'; '.join((bad_invoked + extra_invoked)[:5]) or 'none off'})")
        check(not bad_audit and not dup_audit, f"every confirmed append_audit answered with success is stored exactly once ({len(confirmed)}; "
              f"{'; '.join((bad_audit + dup_audit)[:5]) or 'none off'})")
        check(not dup_steps, f"no stream got a progress step twice or out of order ({len(dup_steps)}{': ' + str([s['steps'] for s in dup_steps[:3]]) if dup_steps else ''})")
        check(not unresumable, f"every event of a stream that waited for a task had a resumable id ({len(unresumable)} did not"
              f"{': ' + '; '.join(str(x['task']) + ' ' + str(x['odd_ids'][:2]) for x in unresumable[:3]) if unresumable else ''})")
        check(not bad_streams, f"every stream ended with its answer or a clean retryable error ({len(bad_streams)} did not"
              f"{': ' + '; '.join(str(x['task']) + ': ' + str(x['end']) + ' ' + x['detail'] for x in bad_streams[:3]) if bad_streams else ''})")
        check(not leaks and not wrong_tenant_rows and progress_rows == "0",
              f"no tenant saw another's task, progress or audit row ({rec.counts['isolation_probes']} probes; "
              f"{'; '.join((leaks + wrong_tenant_rows)[:3]) or 'no leak'}; progress rows under a wrong tenant: {progress_rows})")
        check(not self.orphans, f"no CUO child or skill process outlived its instance ({'; '.join(self.orphans[:3]) or 'none'})")
        check(peak <= a.rss_limit_mib * 1024, f"every instance's RSS stayed under {a.rss_limit_mib} MiB (peak {peak / 1024:.1f} MiB)")
        check(not bad_errors, f"every error was one of the four classes with a trace id ({len(rec.errors)} errors; "
              f"{'; '.join(f'{e[0]}: {e[3]}' for e in bad_errors[:3]) or 'none off'})")
        check(not unexcused, f"no transport error outside a SIGKILL ({len(unexcused)}"
              f"{': ' + '; '.join(f'{w} at {s - self.t0:.1f}-{e - self.t0:.1f} s: {d}' for s, e, w, d in unexcused[:3]) if unexcused else ''})")
        check(not other, f"nothing else went wrong ({'; '.join(other[:3]) or 'nothing'})")
        if a.records:
            with open(a.records, "w") as f:
                json.dump({"streams": [dict(x, answer=json.dumps(x["answer"])[:300]) for x in streams],
                           "transport": [(s - self.t0, e - self.t0, w, d) for s, e, w, d in rec.transport],
                           "bad_errors": bad_errors, "violations": rec.violations, "faults": self.faults.log,
                           "disagree": disagree, "lost": lost, "orphans": self.orphans}, f, indent=1, default=str)
        print()
        if failures:
            print(f"chaos: FAIL — {len(failures)} invariant(s) broken, {len(lost)} lost, {len(accepted)} tasks accepted")
        else:
            print(f"chaos: PASS — {len(accepted)} tasks accepted, {by_status['completed']} completed, 0 lost, 0 duplicated, "
                  f"{len(resumed)} streams resumed, {sum(fc[k] for k in ('instance_kills', 'pg_restarts', 'tcp_cuts', 'cuo_kills'))} faults, "
                  f"peak RSS {peak / 1024:.0f} MiB")
        return 1 if failures else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lb", required=True)
    p.add_argument("--lb-sock", required=True)
    p.add_argument("--tokens", required=True, help="a file: one 'TENANT TOKEN' a line")
    p.add_argument("--instances", required=True, help="URL=PID,... in instance order")
    p.add_argument("--pid-file", required=True, help="where the instances' current pids are kept")
    p.add_argument("--log-dir", required=True)
    p.add_argument("--sqlite", required=True, help="the shared data dir's SQLite file (the audit log)")
    p.add_argument("--pg-bin", required=True)
    p.add_argument("--pg-dir", required=True)
    p.add_argument("--pg-port", required=True, type=int)
    p.add_argument("--proxy-pid", required=True, type=int)
    p.add_argument("--proxy-instance", default="b1")
    p.add_argument("--cut-s", type=float, default=10)
    p.add_argument("--duration", type=float, default=300)
    p.add_argument("--seed", default=str(int(time.time())))
    p.add_argument("--rss-limit-mib", type=int, default=256)
    p.add_argument("--build", default="debug")
    p.add_argument("--records", help="write what the clients saw here (JSON), for a failed run")
    args = p.parse_args()
    sys.exit(Run(args).main())


if __name__ == "__main__":
    main()
