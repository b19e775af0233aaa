#!/usr/bin/env python3
"""Instructions per HTTP request, counted by callgrind: the bridge's authenticated
`tools/call cyberos.skill.list_skills` over Streamable HTTP (`--dev --transport http`,
the scenario of bench/http.sh), sent one after another on one keep-alive connection.

Instruction counts do not move with the VM's wake-up latency or its neighbours, so they
compare builds where CPU time cannot. Each figure is a difference: the server run under
callgrind for N sequential requests, then for 3N, and the totals' difference divided by
2N, so start-up and shutdown cancel out. Every thread of the server is counted (the
runtime's workers and the log writer); the kernel's side of a system call is not.
Logging is the serving default (text, `info`: one line per tool call, to a file).

usage: bench/callgrind_http.py [N]    (default N=300; needs valgrind)
env:   BENCH_BRIDGE=<binary>  another build of the bridge (default: this tree's release
                              build, built first)
"""
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKILLS = os.path.join(ROOT, "tests", "fixtures", "skills")
LOCAL_TENANT = "00000000-0000-4000-8000-000000000001"
CALL = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "cyberos.skill.list_skills", "arguments": {}}})


def bridge_binary():
    bridge = os.environ.get("BENCH_BRIDGE")
    if bridge:
        return bridge
    out = subprocess.run(["cargo", "build", "--release", "--bin", "cyberos-mcp-bridge",
                          "--message-format=json"], cwd=ROOT, check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    for m in map(json.loads, out.splitlines()):
        if m.get("reason") == "compiler-artifact" and m.get("executable") \
                and m["target"]["name"] == "cyberos-mcp-bridge":
            return m["executable"]
    sys.exit("cargo built no bridge executable")


def listening(log, p):
    """The address the server logs it listens on."""
    for _ in range(600):
        if p.poll() is not None:
            sys.exit(f"the bridge exited: {open(log).read()}")
        with open(log) as f:
            for line in f:
                if "listening on " in line:
                    return line.split("listening on ")[1].split()[0]
        time.sleep(0.1)
    sys.exit(f"the bridge did not listen: {open(log).read()}")


def instructions(bridge, n):
    """Callgrind's instruction total for the bridge answering n calls."""
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "data")
        token = subprocess.run([bridge, "--data-dir", data, "dev-token", "--tenant",
                                LOCAL_TENANT], check=True,
                               stdout=subprocess.PIPE).stdout.decode().strip()
        out = os.path.join(d, "callgrind.out")
        log = os.path.join(d, "bridge.log")
        env = dict(os.environ, RUST_LOG="info", CYBEROS_LOG_FORMAT="text",
                   CYBEROS_HTTP_CALL_RATE="off")
        env.pop("CYBEROS_TOKEN", None)
        with open(log, "w") as err:
            p = subprocess.Popen(["valgrind", "--tool=callgrind",
                                  f"--callgrind-out-file={out}",
                                  f"--log-file={os.path.join(d, 'valgrind.log')}",
                                  bridge, "--dev", "--transport", "http", "--listen",
                                  "127.0.0.1:0", "--data-dir", data, "--skills-dir", SKILLS],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=err, env=env)
        host, port = listening(log, p).rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream",
                   "Authorization": f"Bearer {token}"}
        for _ in range(n):
            conn.request("POST", "/mcp", body=CALL, headers=headers)
            r = conn.getresponse()
            body = r.read()
            if r.status != 200 or b'"result"' not in body or b'"isError":true' in body:
                sys.exit(f"the bridge refused the call: {r.status} {body!r}")
        conn.close()
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=120)
        with open(out) as f:
            lines = f.read().splitlines()
        events = next(l.split()[1:] for l in lines if l.startswith("events:"))
        totals = next(l.split()[1:] for l in lines if l.startswith(("summary:", "totals:")))
        return dict(zip(events, map(int, totals)))["Ir"]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    bridge = bridge_binary()
    a = instructions(bridge, n)
    b = instructions(bridge, 3 * n)
    print(f"instructions per HTTP request, callgrind, N={n} and {3 * n}:")
    print(f"  bridge tools/call list_skills (HTTP, bearer)   {(b - a) / (2 * n):>8.0f}")


if __name__ == "__main__":
    main()
