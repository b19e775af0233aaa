#!/usr/bin/env python3
"""Drive real MCP hosts (Claude Code, Codex CLI, Gemini CLI) headless against the bridge.

For every host x transport x scenario: start the scripted model stand-in
(standin.py) on 127.0.0.1, point the host at it and at the bridge binary, run
the host once (bounded by --timeout), then read the stand-in's request log for
what the model was offered (tools, schemas, server instructions) and what it
got back from the tool call. Writes one JSON file per run into --out and
prints a compact table. Builds nothing.
"""
import argparse, json, os, re, shutil, signal, subprocess, sys, tempfile, threading, time, urllib.parse, urllib.request

from expect import checks
from readlogs import (CALL_ID, RETRY_ID, dropped_keywords, norm, offered_claude, offered_codex, offered_gemini,
                      read_log, read_wire, result_claude, result_codex, result_gemini)

HERE = os.path.dirname(os.path.abspath(__file__))
BIN_DIR = os.path.join(HERE, ".cache", "node_modules", ".bin")
SKILLS = os.path.join(HERE, "..", "fixtures", "skills")
TENANT = "00000000-0000-4000-8000-000000000001"  # the --dev tenant

SCENARIOS = {  # name -> (tool, arguments)
    "success": ("cyberos.skill.list_skills", {}),
    "input_error": ("cyberos.skill.list_skills", {"bogus": 1}),
    "no_confirmation": ("cyberos.memory.append_audit", {"kind": "decision", "body": {"note": "host test"}}),
    "long_running": ("cyberos.cuo.execute_workflow",
                     {"persona": "chief-ai-officer", "workflow": "llm-evaluation-plan",
                      "inputs": {"llm_feature": "search"}}),
    # Hosts that cannot ask (CANNOT_ASK): the refusal says how to approve; the harness
    # approves as the user would; the stand-in, as the model, calls again (see one()).
    "approval": ("cyberos.memory.append_audit", {"kind": "decision", "body": {"note": "host approval test"}}),
}
# Hosts that declare no elicitation capability (checked on the stdio wire by expect.py).
# Claude Code and Codex declare it on every connection, so the bridge asks them and
# `approval` does not apply to them.
CANNOT_ASK = {"gemini"}
# Hosts whose MCP SDK refuses the bridge's initialize answer (protocolVersion 2025-11-25
# to a request for 2025-06-18) and drops the server: run behind the version shim
# (stdio_tap.py --echo-version, version_proxy.py), which changes only that answer.
NEEDS_VERSION_SHIM = {"gemini"}


def wait_for(pred, seconds, step=0.1):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return False


def stop(proc):
    if proc and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


# ---- the bridge ---------------------------------------------------------------
class Bridge:
    """Where the host finds the bridge: a command line (stdio) or a URL plus bearer (http)."""

    def __init__(self, binary, transport, work, flags, shim=False):
        self.binary, self.transport, self.proc, self.flags = binary, transport, None, flags
        self.shim, self.proxy, self.shim_log = shim, None, os.path.join(work, "shim.jsonl")
        self.data = os.path.join(work, "bridge-data")
        os.makedirs(self.data, mode=0o700, exist_ok=True)
        # --dev: the local dev key verifies tokens (http) or signs the local token (stdio)
        self.args = ["--dev", "--data-dir", self.data, "--skills-dir", os.path.abspath(SKILLS), *flags]
        if transport == "http":
            port = free_port()
            self.url = f"http://127.0.0.1:{port}/mcp"
            self.token = subprocess.run([binary, *self.args, "dev-token", "--tenant", TENANT],
                                        capture_output=True, text=True, timeout=30, check=True).stdout.strip()
            self.log = open(os.path.join(work, "bridge-http.log"), "w")
            self.proc = subprocess.Popen([binary, *self.args, "--transport", "http", "--listen", f"127.0.0.1:{port}"],
                                         stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
            if not wait_for(lambda: healthy(f"http://127.0.0.1:{port}/healthz"), 20):
                stop(self.proc)
                raise RuntimeError("bridge did not become healthy on " + self.url)
            if shim:
                port_file = os.path.join(work, "proxy.port")
                self.proxy = subprocess.Popen([sys.executable, os.path.join(HERE, "version_proxy.py"), self.url,
                                               port_file, self.shim_log], stdin=subprocess.DEVNULL)
                if not wait_for(lambda: os.path.exists(port_file) and open(port_file).read().strip(), 10):
                    self.close()
                    raise RuntimeError("version proxy did not start")
                self.url = f"http://127.0.0.1:{open(port_file).read().strip()}/mcp"

    def stdio_command(self, home):
        """The command a host spawns: the bridge behind stdio_tap.py, which logs the wire to home/wire.jsonl."""
        tap = os.path.join(HERE, "stdio_tap.py")
        shim = ["--echo-version"] if self.shim else []
        return sys.executable, [tap, *shim, os.path.join(home, "wire.jsonl"), self.binary, *self.args]

    def approve(self, text):
        """Approves, as the user told by `text` (the refusal the model got) would: run the
        terminal command (stdio), or open the link and press Approve (http, --dev: the page
        trusts the local dev user). -> what was done and what it answered."""
        if self.transport == "stdio":
            m = re.search(r"cyberos-mcp-bridge approve ([0-9a-f]{32})", text)
            if not m:
                return {"how": "terminal", "ok": False, "said": "no `cyberos-mcp-bridge approve <id>` in the refusal"}
            p = subprocess.run([self.binary, *self.args, "approve", m[1], "--yes"], capture_output=True, text=True,
                               timeout=30, stdin=subprocess.DEVNULL)
            return {"how": "terminal", "id": m[1], "ok": p.returncode == 0,
                    "said": (p.stdout + p.stderr).strip().splitlines()[-1:] or [f"exit {p.returncode}"]}
        m = re.search(r"(https?://[^\s\"'`]+/approve/[0-9a-f]{32})", text)
        if not m:
            return {"how": "page", "ok": False, "said": "no /approve/<id> link in the refusal"}
        link = m[1]
        with urllib.request.urlopen(link, timeout=10) as r:
            page = r.read().decode()
        token = re.search(r'name="token" value="([0-9a-f]{64})"', page)
        if not token:
            return {"how": "page", "link": link, "ok": False, "said": "no form token on the page: " + page[:200]}
        form = urllib.parse.urlencode({"token": token[1], "decision": "approve"}).encode()
        req = urllib.request.Request(link, data=form, method="POST",
                                     headers={"content-type": "application/x-www-form-urlencoded"})
        with urllib.request.urlopen(req, timeout=10) as r:
            done = r.read().decode()
        return {"how": "page", "link": link, "ok": "The call is approved" in done,
                "said": re.sub(r"<[^>]+>", " ", done).split("Approved", 1)[-1].strip()[:160]}

    def close(self):
        stop(self.proxy)
        stop(self.proc)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(url):
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


# ---- the hosts ------------------------------------------------------------------
def base_env(home):
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LANG": "C.UTF-8", "TERM": "dumb"}


def run_claude(bridge, model_url, home, timeout):
    if bridge.transport == "http":
        server = {"type": "http", "url": bridge.url, "headers": {"Authorization": "Bearer " + bridge.token}}
    else:
        command, args = bridge.stdio_command(home)
        server = {"type": "stdio", "command": command, "args": args}
    cfg = os.path.join(home, "mcp.json")
    with open(cfg, "w") as f:
        json.dump({"mcpServers": {"cyberos": server}}, f)
    env = dict(base_env(home), CLAUDE_CONFIG_DIR=os.path.join(home, ".claude"), ANTHROPIC_BASE_URL=model_url,
               ANTHROPIC_API_KEY="sk-standin", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
               DISABLE_AUTOUPDATER="1", DISABLE_TELEMETRY="1", DISABLE_ERROR_REPORTING="1")
    cmd = [os.path.join(BIN_DIR, "claude"), "-p", "Use the cyberos tools.", "--mcp-config", cfg,
           "--strict-mcp-config", "--allowedTools", "mcp__cyberos,ToolSearch", "--output-format", "json"]
    rc, out, err, secs = run(cmd, env, home, timeout)
    try:
        final = json.loads(out).get("result")
    except ValueError:
        final = None
    return rc, final, err, secs


def run_codex(bridge, model_url, home, timeout):
    toml = [f'model = "gpt-5.5"', 'model_provider = "standin"', 'approval_policy = "never"',
            'sandbox_mode = "read-only"', "check_for_update_on_startup = false", "",
            "[model_providers.standin]", 'name = "stand-in"', f'base_url = "{model_url}/v1"',
            'env_key = "STANDIN_API_KEY"', 'wire_api = "responses"', "request_max_retries = 0",
            "stream_max_retries = 0", "", "[mcp_servers.cyberos]"]
    env = dict(base_env(home), CODEX_HOME=home, STANDIN_API_KEY="sk-standin")
    if bridge.transport == "http":
        toml += [f'url = "{bridge.url}"', 'bearer_token_env_var = "CYBEROS_BEARER"']
        env["CYBEROS_BEARER"] = bridge.token
    else:
        command, args = bridge.stdio_command(home)
        toml += [f"command = {json.dumps(command)}", "args = " + json.dumps(args)]
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write("\n".join(toml) + "\n")
    work = os.path.join(home, "work")
    os.makedirs(work, exist_ok=True)
    cmd = [os.path.join(BIN_DIR, "codex"), "exec", "--skip-git-repo-check", "--ephemeral", "-C", work,
           "--json", "Use the cyberos tools."]
    rc, out, err, secs = run(cmd, env, home, timeout)
    final = None
    for line in out.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        item = ev.get("item") or {}
        if ev.get("type") == "item.completed" and item.get("type") == "agent_message":
            final = item.get("text")
        if ev.get("type") in ("error", "turn.failed"):
            final = "host error: " + json.dumps(ev.get("error") or ev.get("message"))
    return rc, final, err, secs


def run_gemini(bridge, model_url, home, timeout):
    if bridge.transport == "http":
        server = {"httpUrl": bridge.url, "headers": {"Authorization": "Bearer " + bridge.token}}
    else:
        command, args = bridge.stdio_command(home)
        server = {"command": command, "args": args}
    server["trust"] = True  # no per-tool confirmation by the host (headless, as --yolo)
    settings = {"mcpServers": {"cyberos": server},
                "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
                "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
                "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False}}
    os.makedirs(os.path.join(home, ".gemini"), exist_ok=True)
    with open(os.path.join(home, ".gemini", "settings.json"), "w") as f:
        json.dump(settings, f)
    work = os.path.join(home, "work")
    os.makedirs(work, exist_ok=True)
    # GEMINI_CLI_NO_RELAUNCH: run in this process, not in a second node it spawns for a larger heap
    env = dict(base_env(home), GEMINI_API_KEY="standin", GOOGLE_GEMINI_BASE_URL=model_url, GEMINI_CLI_NO_RELAUNCH="true")
    cmd = [os.path.join(BIN_DIR, "gemini"), "-p", "Use the cyberos tools.", "--yolo", "--output-format", "json"]
    rc, out, err, secs = run(cmd, env, work, timeout)
    try:
        final = json.loads(out).get("response")
    except ValueError:
        final = None
    return rc, final, err, secs


def run(cmd, env, cwd, timeout):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the host's own group: it and the bridge it started
        out, err = p.communicate()
        rc = "timeout"
    return rc, out, err, round(time.monotonic() - t0, 1)


HOSTS = {"claude": run_claude, "codex": run_codex, "gemini": run_gemini}
OFFERED = {"claude": offered_claude, "codex": offered_codex, "gemini": offered_gemini}
RESULT = {"claude": result_claude, "codex": result_codex, "gemini": result_gemini}


# ---- one run, and all of them --------------------------------------------------------
def approve_when_asked(host, bridge, log, gate, done, out):
    """The user, in the approval scenario: once the model got its refusal (in the stand-in's
    log), approve as the refusal says, then open the stand-in's gate (the model's retry)."""
    while not done.is_set():
        first = RESULT[host](read_log(log))
        if first:
            try:
                out.update(bridge.approve(first["text"]))
            except OSError as e:
                out.update(ok=False, said=f"approving failed: {e}")
            with open(gate, "w") as f:
                f.write(json.dumps(out))
            return
        done.wait(0.1)


def one(host, bridge, scenario, out_dir, timeout, catalogue):
    tool, args = SCENARIOS[scenario]
    home = tempfile.mkdtemp(prefix=f"host-{host}-")
    log, port_file = os.path.join(home, "model.jsonl"), os.path.join(home, "model.port")
    gate = os.path.join(home, "approved") if scenario == "approval" else None
    standin = subprocess.Popen([sys.executable, os.path.join(HERE, "standin.py"), "--log", log, "--tool", tool,
                                "--args", json.dumps(args), "--port-file", port_file,
                                "--final-delay", "2" if scenario == "long_running" else "0",
                                *(["--retry-gate", gate] if gate else [])],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    done, approval, watcher = threading.Event(), {}, None
    try:
        if not wait_for(lambda: os.path.exists(port_file) and open(port_file).read().strip(), 10):
            raise RuntimeError("stand-in did not start")
        model_url = "http://127.0.0.1:" + open(port_file).read().strip()
        if gate:
            watcher = threading.Thread(target=approve_when_asked, args=(host, bridge, log, gate, done, approval))
            watcher.start()
        rc, final, err, secs = HOSTS[host](bridge, model_url, home, timeout)
    finally:
        done.set()
        if watcher:
            watcher.join(35)
        stop(standin)
    reqs = read_log(log)
    wire = read_wire(os.path.join(home, "wire.jsonl"), tool)
    tools, deferred, instructions, mode = OFFERED[host](reqs)
    result = RESULT[host](reqs)
    retry = RESULT[host](reqs, RETRY_ID) if gate else None
    dropped, changed, added = {}, [], set()
    for t in tools:
        canon = next((c for c in catalogue if norm(t["name"]).endswith(norm(c["name"]))), None)
        if canon:
            d = dropped_keywords(canon["inputSchema"], t["schema"])
            if d:
                dropped[canon["name"]] = d
            added |= set((t["schema"] or {}).get("properties") or {}) - set(canon["inputSchema"].get("properties") or {})
            if t["description"] != canon.get("description"):
                changed.append(canon["name"])
    rec = {"host": host, "transport": bridge.transport, "bridge_flags": bridge.flags, "scenario": scenario, "tool": tool, "arguments": args,
           "exit": rc, "seconds": secs, "model_requests": len(reqs), "tools_mode": mode,
           "offered": tools, "deferred_names": deferred, "instructions": instructions,
           "dropped_schema_keywords": dropped, "schema_properties_added": sorted(added), "descriptions_changed": changed, "result": result, "final_text": final, "wire": wire,
           "can_ask": host not in CANNOT_ASK, "approval": approval if gate else None, "retry": retry,
           "version_shim": read_shim(os.path.join(home, "wire.jsonl"), bridge.shim_log) if bridge.shim else None,
           "host_stderr_tail": err[-1500:]}
    tag = "".join("-" + re.sub(r"[^a-z0-9]+", "", f) for f in bridge.flags)
    with open(os.path.join(out_dir, f"{host}-{bridge.transport}{tag}-{scenario}.json"), "w") as f:
        json.dump(rec, f, indent=1)
    for src, suffix in ((log, ".model.jsonl"), (os.path.join(home, "wire.jsonl"), ".wire.jsonl")):
        if os.path.exists(src):  # the raw logs, beside the record
            shutil.copy(src, os.path.join(out_dir, f"{host}-{bridge.transport}{tag}-{scenario}{suffix}"))
    shutil.rmtree(home, ignore_errors=True)
    return rec


def read_shim(wire_path, proxy_log):
    """What the version shim changed: the stdio tap's "shim" records or the proxy's log."""
    out = []
    if os.path.exists(wire_path):
        with open(wire_path) as f:
            out += [json.loads(x)["msg"] for x in f if '"dir": "shim"' in x]
    if os.path.exists(proxy_log):
        with open(proxy_log) as f:
            out += [json.loads(x) for x in f if x.strip()]
    return out


def summary(host, transport, recs, width):
    """wire: 'elicit' = the bridge asked the host by elicitation/create; 'prog+N' = N progress
    notifications with the call's token after its response (stdio only: seen by stdio_tap.py)."""
    tools = max((r["offered"] for r in recs), key=len, default=[])
    drop = sorted({k for r in recs for ks in r["dropped_schema_keywords"].values() for k in ks})
    mode = recs[0]["tools_mode"] if recs else "-"
    changed = sorted({n for r in recs for n in r["descriptions_changed"]})
    added = sorted({p for r in recs for p in r["schema_properties_added"]})
    print(f"\n== {host} / {transport}{' ' + ' '.join(recs[0]['bridge_flags']) if recs and recs[0]['bridge_flags'] else ''}: model offered {len(tools)}/8 cyberos tools, {mode}; "
          f"schema keywords dropped: {', '.join(drop) or 'none'}; "
          f"{'schema properties added: ' + ', '.join(added) + '; ' if added else ''}"
          f"descriptions changed: {', '.join(changed) or 'none'}")
    if tools:
        print("   names: " + " ".join(t["name"] for t in sorted(tools, key=lambda t: t["name"])))
    wire = next((r["wire"] for r in recs if r["wire"]), None)
    if wire:
        ci, cp = wire["clientInfo"] or {}, wire["call_params"] or {}
        print(f"   host: clientInfo.name={ci.get('name')!r} version={ci.get('version')!r}; capabilities: "
              f"{', '.join(sorted(wire['capabilities'] or {}))}; tools/call params: {', '.join(sorted(cp))}; "
              f"_meta: {', '.join(sorted(cp.get('_meta') or {}))}")
    print(f"   {'scenario':<16}{'exit':<5}{'secs':<5}{'wire':<8}{'isError':<8}{'has':<6}"
          "what the model got (whitespace collapsed)")
    for r in recs:
        res = r["result"]
        text = " ".join(res["text"].split()) if res else ""
        got = text[:width] + ("…" if len(text) > width else "") if res else \
            f"(no tool result; host said: {r['final_text']})"
        err = "-" if not res or res["is_error"] is None else str(res["is_error"]).lower()
        has = "".join(c if k in text else "." for c, k in (("c", '"class"'), ("h", '"hint"'), ("t", "trace")))
        w = r["wire"] or {}
        wcol = ("elicit " if "elicitation/create" in w.get("server_requests", []) else "") + \
            (f"prog+{w['progress_after_response']}" if w.get("progress_after_response") else "")
        print(f"   {r['scenario']:<16}{str(r['exit']):<5}{r['seconds']:<5}{wcol or '-':<8}{err:<8}{has:<6}{got}")
        if r["scenario"] == "approval":
            a, rt = r["approval"] or {}, r["retry"]
            rtext = " ".join(rt["text"].split()) if rt else "(no retry result)"
            print(f"   {'  approved':<16}{'ok' if a.get('ok') else 'no':<5}{'':<5}{a.get('how', '-'):<8}"
                  f"{'-':<8}{'':<6}{' '.join(a.get('said') or []) if isinstance(a.get('said'), list) else a.get('said', '')}")
            rerr = "-" if not rt or rt["is_error"] is None else str(rt["is_error"]).lower()
            print(f"   {'  retry':<16}{'':<5}{'':<5}{'':<8}{rerr:<8}{'':<6}{rtext[:width]}{'…' if len(rtext) > width else ''}")
    shim = next((r["version_shim"] for r in recs if r["version_shim"]), None)
    if shim:
        print(f"   version shim: {json.dumps(shim[0])} (host asked for the second; see README)")
    return len(tools) == 8 and all(r["result"] for r in recs)


def verdicts(host, transport, recs):
    """Prints each run's assertions (expect.py); returns (passed, failed) runs."""
    passed = failed = 0
    for r in recs:
        results = checks(r)
        bad = [(name, seen) for name, ok, seen in results if not ok]
        print(f"   {'PASS' if not bad else 'FAIL'}  {host}/{transport}/{r['scenario']}: {len(results) - len(bad)}/{len(results)} checks")
        for name, seen in bad:
            print(f"         expected: {name}\n         seen:     {seen}")
        passed, failed = passed + (not bad), failed + bool(bad)
    return passed, failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--hosts", default="claude,codex,gemini")
    ap.add_argument("--transports", default="stdio,http")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--out", default=os.path.join(HERE, ".out"))
    ap.add_argument("--timeout", type=int, default=60, help="seconds per host run")
    ap.add_argument("--bridge-flags", default="", help='extra bridge flags, e.g. "--long-running wait"')
    ap.add_argument("--width", type=int, default=160, help="characters of each result shown")
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        catalogue = json.loads(subprocess.run([binary, "--dev", "--data-dir", d, "tools"], capture_output=True,
                                              text=True, timeout=30, check=True).stdout)["tools"]
    # The assertions hold for the product's defaults; with --bridge-flags the run only shows.
    asserting = not a.bridge_flags.strip()
    ok, passed, failed = True, 0, 0
    scenarios = a.scenarios.split(",")
    for host in a.hosts.split(","):
        if not os.access(os.path.join(BIN_DIR, host), os.X_OK):
            print(f"\n== {host}: not installed ({BIN_DIR}/{host}); run tests/hosts/install.sh")
            n = len([s for s in scenarios if s != "approval" or host in CANNOT_ASK])
            ok, failed = False, failed + n * len(a.transports.split(","))
            continue
        for transport in a.transports.split(","):
            work, bridge = tempfile.mkdtemp(prefix="host-bridge-"), None
            try:
                bridge = Bridge(binary, transport, work, a.bridge_flags.split(), shim=host in NEEDS_VERSION_SHIM)
                recs = [one(host, bridge, s, a.out, a.timeout, catalogue) for s in scenarios
                        if s != "approval" or host in CANNOT_ASK]
                ok = summary(host, transport, recs, a.width) and ok
                if asserting:
                    p, f = verdicts(host, transport, recs)
                    passed, failed = passed + p, failed + f
            except (RuntimeError, subprocess.SubprocessError) as e:
                print(f"\n== {host} / {transport}: not run: {e}")
                ok, failed = False, failed + len([s for s in scenarios if s != "approval" or host in CANNOT_ASK])
            finally:
                if bridge:
                    bridge.close()
                shutil.rmtree(work, ignore_errors=True)
    print(f"\nper-run records: {a.out}/<host>-<transport>-<scenario>.json")
    if asserting:
        # The last line, read by scripts/test.sh.
        print(f"hosts: {passed} passed, {failed} failed")
        return 0 if ok and failed == 0 else 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
