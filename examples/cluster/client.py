"""The cluster run's scripted client (examples/cluster/run.sh starts the cluster and calls
this): tasks created through the balancer, polled and cancelled through other instances
directly, one instance killed mid-run and its tasks failed by the survivors, the
per-instance request counts, and a rolling restart's step (a stream handed over on SIGTERM
and resumed through the balancer). Exits 1 when any expectation fails.

    client.py LB_URL TOKEN_FILE STATS_SOCKET URL1,URL2,URL3 PID1,PID2,PID3
"""

import json
import os
import signal
import sys
import time

from cluster import print_counts, rpc, stats, stream

TASKS = 6
# The survivors fail a dead instance's tasks once its lease (15 s) lapses, at their next
# sweep (every 5 s): at most about 20 s after the kill.
FAILED_WITHIN = 40.0
ARGS = {"persona": "chief-technology-officer", "workflow": "adr-quick-capture", "inputs": {"title": "cluster"}}

failures = []


def expect(ok, what):
    print(("  ok   " if ok else "  FAIL ") + what)
    if not ok:
        failures.append(what)
    return ok


def main():
    lb, token_file, sock, urls, pids = sys.argv[1:6]
    token = open(token_file).read().strip()
    urls = urls.split(",")
    pids = [int(p) for p in pids.split(",")]
    names = [f"b{i + 1}" for i in range(len(urls))]
    direct = dict(zip(names, urls))

    print(f"creating {TASKS} tasks (cyberos.cuo.execute_workflow with params.task) through the balancer")
    owner = {}
    for n in range(TASKS):
        r = rpc(lb, token, "tools/call", {"name": "cyberos.cuo.execute_workflow", "arguments": ARGS, "task": {}}, n)
        task = r.frame.get("result", {}).get("task", {})
        if not expect(r.status == 200 and task.get("status") == "working", f"task {n + 1}: HTTP {r.status}, created on {r.served_by or '?'}: {task.get('taskId') or r.frame}"):
            return
        owner[task["taskId"]] = r.served_by
    if not expect(set(owner.values()) == set(names), f"round robin gave every instance tasks: {sorted(owner.values())}"):
        return

    print("polling each task on an instance that does not run it (tasks/get, directly)")
    for i, (tid, own) in enumerate(owner.items()):
        other = names[(names.index(own) + 1) % len(names)]
        r = rpc(direct[other], token, "tasks/get", {"taskId": tid}, 100 + i)
        expect(r.frame.get("result", {}).get("status") == "working", f"{tid} (runs on {own}) on {other}: {r.frame.get('result', r.frame).get('status')}")

    victim = names[-1]
    cancelled = next(t for t, o in owner.items() if o == names[0])
    canceller = names[1]
    print(f"cancelling {cancelled} (runs on {names[0]}) through {canceller}, directly")
    r = rpc(direct[canceller], token, "tasks/cancel", {"taskId": cancelled}, 200)
    expect(r.frame.get("result", {}).get("status") == "cancelled", f"tasks/cancel on {canceller}: {r.frame.get('result', r.frame).get('status')}")
    r = rpc(direct[names[0]], token, "tasks/get", {"taskId": cancelled}, 201)
    expect(r.frame.get("result", {}).get("status") == "cancelled", f"its owner {names[0]} reports: {r.frame.get('result', r.frame).get('status')}")

    doomed = [t for t, o in owner.items() if o == victim]
    print(f"killing {victim} (pid {pids[-1]}, SIGKILL) with {len(doomed)} task(s) running on it")
    os.kill(pids[-1], signal.SIGKILL)
    killed_at = time.monotonic()

    print("polling every task through the balancer until each has ended")
    final, ended_after, lb_errors, polls = {}, {}, 0, 0
    lb_statuses = []  # what the polls that were not 200 got, for the report
    lb_retried = []  # the balancer's answers to polls sent again
    while len(final) < len(owner) and time.monotonic() - killed_at < FAILED_WITHIN:
        for tid in owner:
            if tid in final:
                continue
            polls += 1
            r = rpc(lb, token, "tasks/get", {"taskId": tid}, 300 + polls)
            if r.status in (502, 503):
                # A poll in flight to the instance as it died gets the balancer's 502 until
                # its health checks mark it down; tasks/get is safe to send again, as a
                # client would, once.
                lb_retried.append(r.status)
                time.sleep(0.2)
                r = rpc(lb, token, "tasks/get", {"taskId": tid}, 300 + polls)
            if r.status != 200:
                lb_errors += 1
                lb_statuses.append(r.status)
                continue
            got = r.frame.get("result", {})
            if got.get("status") in ("completed", "failed", "cancelled"):
                final[tid] = got
                ended_after[tid] = time.monotonic() - killed_at
        time.sleep(0.5)
    for tid, own in owner.items():
        got = final.get(tid, {})
        status, message = got.get("status", "still working"), got.get("statusMessage", "")
        if tid == cancelled:
            want = status == "cancelled"
        elif own == victim:
            want = status == "failed" and "bridge restarted" in message
        else:
            want = status == "completed"
        after = f", {ended_after[tid]:.1f} s after the kill" if tid in ended_after else ""
        expect(want, f"{tid} (ran on {own}): {status}{': ' + message if message else ''}{after}")
    expect(lb_errors == 0, f"{polls} polls through the balancer after the kill, {lb_errors} not answered 200"
           + (f" (HTTP {', '.join(map(str, lb_statuses))})" if lb_statuses else "")
           + (f"; {len(lb_retried)} sent again after HTTP {', '.join(map(str, lb_retried))}" if lb_retried else ""))

    done = next(t for t, o in owner.items() if o not in (victim,) and t != cancelled)
    r = rpc(lb, token, "tasks/result", {"taskId": done}, 400)
    steps = r.frame.get("result", {}).get("structuredContent", {}).get("steps_executed")
    expect(steps == 3, f"tasks/result of {done} through the balancer: steps_executed={steps}")

    time.sleep(1.5)  # the health checks (every 500 ms, down after 2 failures) see the kill
    rows = {r["svname"]: r for r in stats(sock)}
    print_counts(sock)
    expect(rows[victim]["status"].startswith("DOWN"), f"HAProxy marks {victim} {rows[victim]['status']}")
    expect(all(int(rows[n]["stot"]) > 0 for n in names), "every instance served requests through the balancer")

    rolling_restart(lb, token, direct, dict(zip(names, pids)), [n for n in names if n != victim])


def rolling_restart(lb, token, direct, pid, alive):
    """SIGTERM on an instance whose tasks/result stream waits for a task running on
    another: the stream is handed over (an SSE `retry`, no response), the client resumes
    it through the balancer with `Last-Event-ID`, and the task's instance answers."""
    r = rpc(lb, token, "tools/call", {"name": "cyberos.cuo.execute_workflow", "arguments": ARGS, "task": {}}, 500)
    task = r.frame.get("result", {}).get("task", {}).get("taskId")
    runner = r.served_by
    if not expect(task and runner in alive, f"a task through the balancer, on {runner or '?'}: {task or r.frame}"):
        return
    stopping = next(n for n in alive if n != runner)
    print(f"waiting for {task} on {stopping} (tasks/result, directly), then SIGTERM to {stopping}")
    body = {"jsonrpc": "2.0", "id": 501, "method": "tasks/result",
            "params": {"taskId": task, "_meta": {"progressToken": "rolling"}}}
    held = stream(direct[stopping], token, body)
    primed = held.next_event()
    expect(primed and held.events[0][0] and not held.events[0][1], f"{stopping} primes the stream: {held.events}")
    os.kill(pid[stopping], signal.SIGTERM)
    held.rest()
    answered = any('"id":501' in data.replace(" ", "") for _, data in held.events)
    expect(held.retry == "1000" and not answered,
           f"{stopping} hands the stream over: retry={held.retry}, {len(held.events)} event(s), no response")
    last = held.events[-1][0]
    resumed = stream(lb, token, last_event_id=last).rest()
    frame = json.loads(resumed.events[-1][1]) if resumed.events else {}
    steps = frame.get("result", {}).get("structuredContent", {}).get("steps_executed")
    expect(frame.get("id") == 501 and steps == 3,
           f"resumed through the balancer on {resumed.headers.get('X-Served-By', '?')}: steps_executed={steps}")
    gone = time.monotonic() + 15
    while time.monotonic() < gone and alive_pid(pid[stopping]):
        time.sleep(0.1)
    expect(not alive_pid(pid[stopping]), f"{stopping} exited after SIGTERM")


def alive_pid(pid):
    """Whether `pid` runs (an exited instance its parent shell has not reaped yet is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


if __name__ == "__main__":
    main()
    print(f"cluster: {len(failures)} expectation(s) failed" if failures else "cluster: every expectation held")
    sys.exit(1 if failures else 0)
