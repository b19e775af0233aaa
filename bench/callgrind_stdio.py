#!/usr/bin/env python3
"""Instructions per stdio message, counted by callgrind: the bridge's `ping`, its
authenticated `tools/call cyberos.skill.list_skills` (the `--dev` token, and a token read
from `--token-file`), and the bare serde_json echo of `cargo bench --bench stdio`.

Instruction counts do not move with the VM's wake-up latency or its neighbours, so they
compare builds where CPU time cannot. Each figure is a difference: the server run under
callgrind for N sequential messages after the handshake, then for 3N, and the totals'
difference divided by 2N, so start-up and shutdown cancel out.

usage: bench/callgrind_stdio.py [N]    (default N=300; needs valgrind)
env:   BENCH_BRIDGE=<binary>  another build of the bridge (default: this tree's release
                              build, built first)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKILLS = os.path.join(ROOT, "tests", "fixtures", "skills")
LOCAL_TENANT = "00000000-0000-4000-8000-000000000001"
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "callgrind", "version": "1"}}}
CALL = {"jsonrpc": "2.0", "method": "tools/call",
        "params": {"name": "cyberos.skill.list_skills", "arguments": {"limit": 5}}}
PING = {"jsonrpc": "2.0", "method": "ping"}


def cargo_executable(args, target):
    """Builds with cargo and returns the executable of `target` it reports."""
    out = subprocess.run(["cargo", *args, "--message-format=json"], cwd=ROOT, check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    for m in map(json.loads, out.splitlines()):
        if m.get("reason") == "compiler-artifact" and m.get("executable") \
                and m["target"]["name"] == target:
            return m["executable"]
    sys.exit(f"cargo built no executable named {target}")


def instructions(command, handshake, message, n, env=None):
    """Callgrind's total for `command` answering `handshake` then n copies of `message`."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "callgrind.out")
        p = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                              *command(d)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=env)

        def round_trip(msg):
            p.stdin.write((json.dumps(msg) + "\n").encode())
            p.stdin.flush()
            if "id" in msg:
                line = p.stdout.readline()
                reply = json.loads(line)
                if "error" in reply or reply.get("result", {}).get("isError"):
                    sys.exit(f"the server refused a benchmark message: {line!r}")

        for msg in handshake:
            round_trip(msg)
        for i in range(n):
            round_trip(dict(message, id=i + 1))
        p.stdin.close()
        p.wait(timeout=120)
        with open(out) as f:
            totals = [int(l.split()[1]) for l in f if l.startswith(("summary:", "totals:"))]
        return totals[0]


def per_message(command, handshake, message, n, env=None):
    a = instructions(command, handshake, message, n, env)
    b = instructions(command, handshake, message, 3 * n, env)
    return (b - a) / (2 * n)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    bridge = os.environ.get("BENCH_BRIDGE")
    if not bridge:
        bridge = cargo_executable(["build", "--release", "--bin", "cyberos-mcp-bridge"],
                                  "cyberos-mcp-bridge")
    echo = cargo_executable(["bench", "--bench", "stdio", "--no-run"], "stdio")
    env = dict(os.environ, RUST_LOG="info")
    env.pop("CYBEROS_TOKEN", None)

    def served(extra=()):
        return lambda d: [bridge, "--dev", "--data-dir", os.path.join(d, "data"),
                          "--skills-dir", SKILLS, *extra]

    def with_token_file(d):
        data = os.path.join(d, "data")
        token = subprocess.run([bridge, "--data-dir", data, "dev-token", "--tenant",
                                LOCAL_TENANT], check=True, stdout=subprocess.PIPE).stdout
        path = os.path.join(d, "token")
        with open(path, "wb") as f:
            f.write(token)
        return served(["--token-file", path])(d)

    handshake = [INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                 dict(CALL, id=-1)]
    floor = per_message(lambda d: [echo, "--echo-server"], [], PING, n)
    rows = [
        ("bare serde_json echo", floor),
        ("bridge ping", per_message(served(), handshake, PING, n, env)),
        ("bridge tools/call list_skills (--dev token)",
         per_message(served(), handshake, CALL, n, env)),
        ("bridge tools/call list_skills (--token-file)",
         per_message(with_token_file, handshake, CALL, n, env)),
    ]
    print(f"instructions per message, callgrind, N={n} and {3 * n}:")
    for name, count in rows:
        print(f"  {name:<46} {count:>8.0f}  ({count / floor:.2f}× the echo)")


if __name__ == "__main__":
    main()
