#!/usr/bin/env python3
"""Instructions per stdio message, counted by callgrind: the bridge's `ping`, its
authenticated `tools/call cyberos.skill.list_skills` (the `--dev` token, and a token read
from `--token-file`), and the three floors of `cargo bench --bench stdio` (the bare
serde_json echo, the same echo on Tokio pipes as the bridge reads and writes stdio, and
that server answering with the call's result).

Instruction counts do not move with the VM's wake-up latency or its neighbours, so they
compare builds where CPU time cannot. Each figure is a difference: the server run under
callgrind for N sequential messages after the handshake, then for 3N, and the totals'
difference divided by 2N, so start-up and shutdown cancel out.

usage: bench/callgrind_stdio.py [N]    (default N=300; needs valgrind)
env:   BENCH_BRIDGE=<binary>  another build of the bridge (default: this tree's release
                              build, built first)
       CACHE_SIM=1            also simulate the caches and print L1 instruction and data
                              misses per message: what a message costs beyond its
                              instructions is mostly code that does not fit in L1i
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


CACHE_SIM = os.environ.get("CACHE_SIM") == "1"


def instructions(command, handshake, message, n, env=None):
    """Callgrind's totals for `command` answering `handshake` then n copies of `message`:
    instructions, and with CACHE_SIM the L1 instruction and data misses."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "callgrind.out")
        sim = ["--cache-sim=yes"] if CACHE_SIM else []
        p = subprocess.Popen(["valgrind", "--tool=callgrind", *sim,
                              f"--callgrind-out-file={out}", *command(d)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
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
            lines = f.read().splitlines()
        events = next(l.split()[1:] for l in lines if l.startswith("events:"))
        totals = next(l.split()[1:] for l in lines if l.startswith(("summary:", "totals:")))
        count = dict(zip(events, map(int, totals)))
        # Ir: instructions; I1mr, D1mr + D1mw: L1 instruction and data misses.
        return (count["Ir"], count.get("I1mr", 0), count.get("D1mr", 0) + count.get("D1mw", 0))


def per_message(command, handshake, message, n, env=None):
    a = instructions(command, handshake, message, n, env)
    b = instructions(command, handshake, message, 3 * n, env)
    return tuple((y - x) / (2 * n) for x, y in zip(a, b))


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

    def call_result(d):
        """The call's result as the bridge answers it, in a file for the answer floor."""
        p = subprocess.run(served()(d), input="".join(
            json.dumps(m) + "\n" for m in (INIT, dict(CALL, id=1))).encode(),
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, check=True)
        path = os.path.join(d, "result.json")
        with open(path, "w") as f:
            json.dump(json.loads(p.stdout.splitlines()[-1])["result"], f,
                      separators=(",", ":"))
        return path

    handshake = [INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                 dict(CALL, id=-1)]
    floor = per_message(lambda d: [echo, "--echo-server"], [], PING, n)
    rows = [
        ("bare serde_json echo", floor),
        ("the echo on Tokio pipes", per_message(lambda d: [echo, "--async-echo-server"], [],
                                                PING, n)),
        ("the call's answer on Tokio pipes",
         per_message(lambda d: [echo, "--answer-server", call_result(d)], [], PING, n)),
        ("bridge ping", per_message(served(), handshake, PING, n, env)),
        ("bridge tools/call list_skills (--dev token)",
         per_message(served(), handshake, CALL, n, env)),
        ("bridge tools/call list_skills (--token-file)",
         per_message(with_token_file, handshake, CALL, n, env)),
    ]
    print(f"instructions per message, callgrind, N={n} and {3 * n}:")
    for name, (count, i1, d1) in rows:
        misses = f"  L1i misses {i1:>6.0f}, L1d misses {d1:>5.0f}" if CACHE_SIM else ""
        print(f"  {name:<46} {count:>8.0f}  ({count / floor[0]:.2f}× the echo){misses}")


if __name__ == "__main__":
    main()
