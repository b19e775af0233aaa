"""Third-party oracle: the official Python MCP SDK (1.x) drives the bridge over Streamable HTTP.

usage: python sdk_http_client.py BRIDGE_BINARY SKILLS_DIR DATA_DIR
Starts the bridge itself (--dev --transport http --listen 127.0.0.1:0), reads the bound
address from its stderr, gets a token with `dev-token`, and exits non-zero (with an
assertion message) when the bridge misbehaves. Then a rolling restart: two bridges on
the data dir behind a forwarder, one stopped while the SDK waits on it (`hand_over`).
"""
import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import warnings

from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError

# The bridge speaks 2025-11-25, where tasks are part of the spec; the SDK's deprecation
# notice about their future removal is not a failure.
warnings.filterwarnings("ignore", category=DeprecationWarning, module=__name__)

LOCAL_TENANT = "00000000-0000-4000-8000-000000000001"


def start_bridge(binary: str, skills: str, data: str, pace_ms: int = 300) -> tuple[subprocess.Popen, str, list[str]]:
    proc = subprocess.Popen(
        [binary, "--dev", "--transport", "http", "--listen", "127.0.0.1:0",
         "--data-dir", data, "--skills-dir", skills,
         # Paced workflow steps, so a task is still running when the client asks for it.
         "--cuo-command", f"{binary} cuo-runner --pace-ms {pace_ms}"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "RUST_LOG": "info", "CYBEROS_LOG_FORMAT": "text"},
    )
    log: list[str] = []
    found = threading.Event()
    addr: list[str] = []

    def drain() -> None:
        for line in proc.stderr:
            log.append(line.rstrip("\n"))
            if "listening on " in line and not found.is_set():
                addr.append(line.split("listening on ", 1)[1].split()[0])
                found.set()

    threading.Thread(target=drain, daemon=True).start()
    if not found.wait(30):
        proc.kill()
        raise AssertionError("the bridge never logged `listening on`:\n" + "\n".join(log))
    return proc, addr[0], log


def dev_token(binary: str, data: str) -> str:
    out = subprocess.run([binary, "--data-dir", data, "dev-token", "--tenant", LOCAL_TENANT],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


async def exercise(url: str, token: str) -> str:
    # The user's answers to the bridge's confirmation forms, in order; each form is
    # recorded so the test sees what the bridge asked.
    answers = [types.ElicitResult(action="accept", content={"confirm": True}),
               types.ElicitResult(action="decline")]
    asked = []

    async def confirm(context, params: types.ElicitRequestParams):
        asked.append(params)
        return answers[len(asked) - 1]

    async with streamablehttp_client(url, headers={"Authorization": f"Bearer {token}"}) as (read, write, session_id):
        async with ClientSession(read, write, elicitation_callback=confirm) as session:
            init = await session.initialize()
            assert init.protocolVersion == "2025-11-25", init.protocolVersion
            assert init.serverInfo.name == "cyberos-mcp-bridge", init.serverInfo
            # An optional, signed session: the SDK sends it on every later request (each
            # still carries its token) and DELETEs it when it closes.
            sid = session_id()
            assert sid and "." in sid, f"a signed session id: {sid!r}"
            tools = (await session.list_tools()).tools
            names = sorted(t.name for t in tools)
            assert len(names) == 8, names
            result = await session.call_tool("cyberos.skill.list_skills", {"query": "release"})
            assert not result.isError, result
            assert result.structuredContent["skills"][0]["name"] == "release-notes", result.structuredContent
            assert json.loads(result.content[0].text) == result.structuredContent
            await session.send_ping()

            # Elicitation over HTTP: the session declared it, so a write that needs the
            # user's confirmation asks on the call's SSE stream; the SDK POSTs the answer
            # with the session id. Accepted, the entry is written; declined, refused.
            note = {"kind": "note", "body": {"from": "python sdk over http"}}
            written = await session.call_tool("cyberos.memory.append_audit", note)
            assert not written.isError, written
            assert written.structuredContent["audit_id"], written.structuredContent
            assert len(asked) == 1 and "Allow" in asked[0].message, asked
            assert asked[0].requestedSchema["required"] == ["confirm"], asked[0]
            try:
                await session.call_tool("cyberos.memory.append_audit", note)
                raise AssertionError("a declined write ran")
            except McpError as refused:
                assert "did not confirm the call (declined)" in str(refused), refused
            assert len(asked) == 2, asked

            # The pinned SDK (tests/python/requirements.txt) has the task client API; one
            # without it fails here rather than passing with half the test skipped.
            experimental = session.experimental
            adr = {"persona": "chief-technology-officer", "workflow": "adr-quick-capture",
                   "inputs": {"title": "python sdk over http"}}
            # Polled: tasks/get until terminal, then tasks/result (answered as JSON).
            created = await experimental.call_tool_as_task("cyberos.cuo.execute_workflow", adr)
            task_id = created.task.taskId
            assert task_id.startswith("t-"), task_id
            deadline = time.monotonic() + 60
            seen = []
            async for status in experimental.poll_task(task_id):
                seen.append(status.status)
                assert time.monotonic() < deadline, f"task {task_id} still {status.status}"
            assert seen[0] == "working" and seen[-1] == "completed", seen
            final = await experimental.get_task_result(task_id, types.CallToolResult)
            assert not final.isError, final
            assert final.structuredContent["steps_executed"] == 3, final.structuredContent
            # Awaited: tasks/result on a running task waits, answered as an SSE stream.
            created = await experimental.call_tool_as_task("cyberos.cuo.execute_workflow", adr)
            waited = await experimental.get_task_result(created.task.taskId, types.CallToolResult)
            assert not waited.isError and waited.structuredContent["steps_executed"] == 3, waited
            return (f"{len(names)} tools, call_tool, ping, an audit write confirmed and one declined by elicitation, a task polled to completed ({' -> '.join(dict.fromkeys(seen))}) "
                    "and one awaited with tasks/result over SSE")


class Switch:
    """A loopback TCP forwarder whose upstream can be switched: the load balancer of a
    rolling restart. Keeps the first bytes each connection sent, and where it went."""

    def __init__(self, upstream: str):
        self.upstream = upstream
        self.seen: list[list] = []  # [upstream, bytes the client sent]
        self.open: list = []  # the writers of live forwarded connections

    def move_to(self, upstream: str) -> None:
        """Sends new connections to `upstream`, and closes the idle keep-alive ones, so the
        client's next request opens one (an HTTP balancer picks per request)."""
        self.upstream = upstream
        for writer in self.open:
            writer.close()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._forward, "127.0.0.1", 0)
        return "127.0.0.1:%d" % self.server.sockets[0].getsockname()[1]

    async def _forward(self, reader, writer) -> None:
        upstream = self.upstream
        host, port = upstream.rsplit(":", 1)
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.close()
            return
        record = [upstream, b""]
        self.seen.append(record)
        self.open += [writer, up_writer]

        async def pipe(src, dst, sniff: bool) -> None:
            try:
                while data := await src.read(65536):
                    if sniff and len(record[1]) < 65536:
                        record[1] += data
                    dst.write(data)
                    await dst.drain()
            except OSError:
                pass
            finally:
                dst.close()

        try:
            await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))
        except asyncio.CancelledError:
            pass  # the run is over: asyncio.run cancels what is still forwarding

    def close(self) -> None:
        self.server.close()
        self.move_to(self.upstream)

    def sent(self, upstream: str, needle: bytes) -> bool:
        return any(up == upstream and needle in data.lower() for up, data in self.seen)


async def wait_until(check, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def hand_over(binary: str, skills: str, data: str, token: str) -> str:
    """A rolling restart under the SDK: two bridges on one data dir behind a switch. The
    task runs on A; its tasks/result waits on B; B gets SIGTERM while the client waits
    and the switch now sends new connections to A. B hands the stream over (an SSE retry,
    no response); the SDK resumes it with GET + Last-Event-ID, which reaches A, and gets
    the task's result."""
    a, addr_a, log_a = start_bridge(binary, skills, data, pace_ms=1000)
    b, addr_b, log_b = start_bridge(binary, skills, data)
    try:
        switch = Switch(addr_a)
        front = await switch.start()
        async with streamablehttp_client(f"http://{front}/mcp", headers={"Authorization": f"Bearer {token}"}) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                adr = {"persona": "chief-technology-officer", "workflow": "adr-quick-capture",
                       "inputs": {"title": "rolling restart"}}
                created = await session.experimental.call_tool_as_task("cyberos.cuo.execute_workflow", adr)
                switch.move_to(addr_b)
                waiting = asyncio.ensure_future(
                    session.experimental.get_task_result(created.task.taskId, types.CallToolResult))
                await wait_until(lambda: switch.sent(addr_b, b'"tasks/result"'), 10, "tasks/result never reached B")
                # Past the 200 ms in which a wait is still answered as JSON: B streams.
                await asyncio.sleep(0.5)
                # B closes its own connections; the stream must stay open until B ends it.
                switch.upstream = addr_a
                b.terminate()
                result = await asyncio.wait_for(waiting, 30)
                assert not result.isError and result.structuredContent["steps_executed"] == 3, result
        switch.close()
        assert b.wait(timeout=30) == 0, "B exited non-zero after SIGTERM"
        assert switch.sent(addr_a, b"last-event-id"), "the SDK did not resume the stream on A"
        return "a wait handed over by an instance on SIGTERM, resumed by the SDK on another"
    except BaseException:
        print("A:\n" + "\n".join(log_a[-40:]) + "\nB:\n" + "\n".join(log_b[-40:]), file=sys.stderr)
        raise
    finally:
        for proc in (a, b):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)


def main(binary: str, skills: str, data: str) -> None:
    proc, addr, log = start_bridge(binary, skills, data)
    token = dev_token(binary, data)
    try:
        summary = asyncio.run(exercise(f"http://{addr}/mcp", token))
    except BaseException:
        print("\n".join(log[-40:]), file=sys.stderr)
        raise
    finally:
        proc.terminate()
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError("the bridge did not stop within 30 s of SIGTERM")
    assert code == 0, f"the bridge exited with {code} after SIGTERM"
    handed = asyncio.run(hand_over(binary, skills, data, token))
    print(f"python mcp sdk over http: initialize, {summary}; {handed}: ok")


if __name__ == "__main__":
    main(*sys.argv[1:4])
