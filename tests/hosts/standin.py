#!/usr/bin/env python3
"""A scripted stand-in for a model API, on 127.0.0.1 only (stdlib, no deps).

Speaks just enough of the Anthropic Messages API (POST /v1/messages, SSE or
JSON) for Claude Code, of the OpenAI Responses API (POST /v1/responses, SSE)
for the Codex CLI, and of the Gemini API (POST /v1beta/models/M:streamGenerateContent
?alt=sse, :generateContent, :countTokens) for the Gemini CLI. Every request body is
appended to --log as one JSON line.

The script, per request:
  1. if the request already carries the result of our tool call -> answer "done";
     with --retry-gate FILE (the approval scenario) the first result is a refusal
     the user must approve out of band: wait until FILE exists (the harness writes
     it once it has approved), then call the tool again with the same --args, as a
     model told "call the tool again with exactly the same arguments" does; "done"
     once the retry's result is in;
  2. else if a tool whose name ends with --tool (dots, dashes read as "_") is
     offered -> call it with --args;
     (Claude Code lists MCP tools by name only, behind its ToolSearch tool:
     then first call ToolSearch "select:<every mcp__ name>", as a model must);
  3. else (a side request: titles, quota, tool search off...) -> answer "ok".
The driver reads the log afterwards: the tools offered and the result text.
"""
import argparse, json, os, re, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CALL_ID = "call_cyberos_1"      # the scenario's call
RETRY_ID = "call_cyberos_2"     # its retry, after the user's approval (--retry-gate)
SEARCH_ID = "call_toolsearch_1"  # Claude Code's ToolSearch, when it defers MCP tools


def norm(name):
    return re.sub(r"[^a-z0-9]", "_", name.lower())


def pick_tool(names, suffix):
    want = norm(suffix)
    hits = [n for n in names if norm(n).endswith(want)]
    return min(hits, key=len) if hits else None


def after_call(has_result):
    """The step once our call may have a result: None (not yet called), ("text", "done"),
    or ("tool", RETRY_ID) for the retry after the harness's approval (--retry-gate)."""
    gate = CFG.retry_gate if CFG else None
    if gate:
        if has_result(RETRY_ID):
            return ("text", "done")
        if has_result(CALL_ID):
            # The model relays the refusal's instructions and waits for the user; the
            # harness approves and then writes the gate file. Bounded: no gate -> "done".
            deadline = time.monotonic() + CFG.gate_timeout
            while not os.path.exists(gate) and time.monotonic() < deadline:
                time.sleep(0.1)
            return ("tool", RETRY_ID) if os.path.exists(gate) else ("text", "done")
        return None
    return ("text", "done") if has_result(CALL_ID) else None


def anthropic_tool_names(body):
    """Callable tools: those sent whole, and deferred ones a tool_reference has loaded."""
    loaded = set(re.findall(r'"tool_reference", "tool_name": "([^"]+)"', json.dumps(body.get("messages"))))
    return [t["name"] for t in body.get("tools") or []
            if t.get("name") and (not t.get("defer_loading") or t["name"] in loaded)]


def anthropic_has_result(body, call_id):
    for m in body.get("messages") or []:
        if isinstance(m.get("content"), list):
            for c in m["content"]:
                if c.get("type") == "tool_result" and c.get("tool_use_id") == call_id:
                    return True
    return False


def anthropic_deferred(body):
    """MCP tool names listed by name only (Claude Code's tool search)."""
    text = json.dumps([body.get("system"), body.get("messages")])
    return sorted(set(re.findall(r"mcp__[A-Za-z0-9_-]+?__[A-Za-z0-9_-]+", text)))


def anthropic_step(body, suffix):
    """-> ("tool", id, name) | ("search", id, query) | ("text", words)"""
    tool = pick_tool(anthropic_tool_names(body), suffix)
    after = after_call(lambda i: anthropic_has_result(body, i))
    if after and after[0] == "tool" and tool:
        return ("tool", RETRY_ID, tool)
    if after:
        return ("text", "done")
    if tool:
        return ("tool", CALL_ID, tool)
    deferred = anthropic_deferred(body)
    if (pick_tool(deferred, suffix) and "ToolSearch" in anthropic_tool_names(body)
            and not anthropic_has_result(body, SEARCH_ID)):
        return ("search", SEARCH_ID, "select:" + ",".join(deferred))
    return ("text", "ok")


def openai_callable(body):
    """(namespace or None, name) of every function offered: in tools[] or loaded by tool_search."""
    groups = list(body.get("tools") or [])
    for i in body.get("input") or []:
        if isinstance(i, dict) and i.get("type") == "tool_search_output":
            groups += i.get("tools") or []
    out = []
    for t in groups:
        if t.get("type") == "namespace":
            out += [(t.get("name"), sub.get("name")) for sub in t.get("tools") or [] if sub.get("name")]
        elif t.get("type") == "function" and t.get("name"):
            out.append((None, t["name"]))
    return out


def openai_has_output(body, call_id):
    return any(isinstance(i, dict) and i.get("call_id") == call_id and i.get("type", "").endswith("_output")
               for i in body.get("input") or [])


def openai_step(body, suffix):
    """-> ("tool", id, (namespace, name)) | ("search", id, query) | ("text", words)"""
    callable_ = openai_callable(body)
    full = {(ns + "__" if ns else "") + n: (ns, n) for ns, n in callable_}
    hit = pick_tool(list(full), suffix)
    after = after_call(lambda i: openai_has_output(body, i))
    if after and after[0] == "tool" and hit:
        return ("tool", RETRY_ID, full[hit])
    if after:
        return ("text", "done")
    if hit:
        return ("tool", CALL_ID, full[hit])
    searchable = any(t.get("type") == "tool_search" for t in body.get("tools") or [])
    if searchable and not openai_has_output(body, SEARCH_ID):
        return ("search", SEARCH_ID, "cyberos")
    return ("text", "ok")


def gemini_declarations(body):
    return [d for t in body.get("tools") or [] for d in t.get("functionDeclarations") or []]


def gemini_has_response(body, call_id):
    """The Gemini CLI sends our functionCall.id back in its functionResponse.id."""
    return any(isinstance(p, dict) and (p.get("functionResponse") or {}).get("id") == call_id
               for c in body.get("contents") or [] for p in c.get("parts") or [])


def schema_instance(schema):
    """The smallest value a JSON schema (Gemini's OBJECT/STRING/... spelling too) accepts: the
    Gemini CLI's side requests (model routing, next speaker...) ask for JSON output."""
    schema = schema or {}
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: schema_instance(props.get(k)) for k in schema.get("required") or props}
    return {"string": "ok", "integer": 1, "number": 1, "boolean": False, "array": []}.get(kind)


def gemini_step(body, suffix):
    """-> ("tool", id, name) | ("text", words)"""
    gen = body.get("generationConfig") or {}
    if gen.get("responseMimeType") == "application/json":
        return ("text", json.dumps(schema_instance(gen.get("responseJsonSchema") or gen.get("responseSchema"))))
    tool = pick_tool([d.get("name", "") for d in gemini_declarations(body)], suffix)
    after = after_call(lambda i: gemini_has_response(body, i))
    if after and after[0] == "tool" and tool:
        return ("tool", RETRY_ID, tool)
    if after:
        return ("text", "done")
    if tool:
        return ("tool", CALL_ID, tool)
    return ("text", "ok")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    cfg = None
    lock = threading.Lock()

    def log_message(self, *a):
        pass

    def _log(self, body):
        with self.lock, open(self.cfg.log, "a") as f:
            f.write(json.dumps({"t": round(time.time(), 3), "path": self.path, "body": body}) + "\n")

    def _json(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        for ev in events:
            self.wfile.write(f"event: {ev['type']}\ndata: {json.dumps(ev)}\n\n".encode())
            self.wfile.flush()
        self.close_connection = True

    def do_GET(self):
        self._log({"method": "GET"})
        if self.path.split("?")[0].endswith("/models"):
            return self._json(200, {"data": [], "models": [], "object": "list"})
        self._json(404, {"error": {"type": "not_found", "message": "stand-in"}})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self):
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b"{}"
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"raw": raw.decode("utf-8", "replace")}
        self._log(body)
        path = self.path.split("?")[0]
        if path.endswith("/messages/count_tokens"):
            return self._json(200, {"input_tokens": 100})
        if path.endswith("/messages"):
            return self.anthropic(body)
        if path.endswith("/responses"):
            return self.openai(body)
        if path.endswith(":countTokens"):
            return self._json(200, {"totalTokens": 100})
        if path.endswith(":streamGenerateContent") or path.endswith(":generateContent"):
            return self.gemini(body, stream=path.endswith(":streamGenerateContent"))
        self._json(404, {"error": {"type": "not_found", "message": "stand-in: " + path}})

    # ---- Anthropic Messages ------------------------------------------------
    def think(self, step):
        if step == ("text", "done") and self.cfg.final_delay:
            time.sleep(min(self.cfg.final_delay, 10))

    def anthropic(self, body):
        step = anthropic_step(body, self.cfg.tool)
        self.think(step)
        if step[0] == "tool":
            block = {"type": "tool_use", "id": step[1], "name": step[2], "input": json.loads(self.cfg.args)}
        elif step[0] == "search":
            block = {"type": "tool_use", "id": step[1], "name": "ToolSearch",
                     "input": {"query": step[2], "max_results": 20}}
        else:
            block = {"type": "text", "text": step[1]}
        stop = "end_turn" if block["type"] == "text" else "tool_use"
        msg = {"id": "msg_standin", "type": "message", "role": "assistant",
               "model": body.get("model", "stand-in"), "content": [block], "stop_reason": stop,
               "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}
        if not body.get("stream"):
            return self._json(200, msg)
        start = dict(msg, content=[], stop_reason=None)
        if block["type"] == "tool_use":
            first = dict(block, input={})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            first = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        self._sse([
            {"type": "message_start", "message": start},
            {"type": "content_block_start", "index": 0, "content_block": first},
            {"type": "content_block_delta", "index": 0, "delta": delta},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
             "usage": {"output_tokens": 5}},
            {"type": "message_stop"},
        ])

    # ---- OpenAI Responses --------------------------------------------------
    def openai(self, body):
        step = openai_step(body, self.cfg.tool)
        self.think(step)
        if step[0] == "tool":
            ns, name = step[2]
            item = {"type": "function_call", "id": "fc_standin", "call_id": step[1], "name": name,
                    "arguments": self.cfg.args, "status": "completed"}
            if ns:
                item["namespace"] = ns
        elif step[0] == "search":
            item = {"type": "tool_search_call", "id": "tsc_standin", "call_id": SEARCH_ID, "status": "completed",
                    "execution": "client", "arguments": {"query": step[2], "limit": 20}}
        else:
            item = {"type": "message", "id": "msg_standin", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": step[1], "annotations": []}]}
        resp = {"id": "resp_standin", "object": "response", "status": "completed", "model": body.get("model"),
                "output": [item], "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                                            "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                                            "total_tokens": 15}}
        self._sse([
            {"type": "response.created", "response": dict(resp, status="in_progress", output=[])},
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": resp},
        ])


    # ---- Gemini API ----------------------------------------------------------
    def gemini(self, body, stream):
        step = gemini_step(body, self.cfg.tool)
        self.think(step)
        if step[0] == "tool":
            part = {"functionCall": {"id": step[1], "name": step[2], "args": json.loads(self.cfg.args)}}
        else:
            part = {"text": step[1]}
        resp = {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
                "modelVersion": "stand-in", "responseId": "resp_standin"}
        if not stream:
            return self._json(200, resp)
        # Gemini's SSE carries data lines only (no event names).
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(f"data: {json.dumps(resp)}\r\n\r\n".encode())
        self.wfile.flush()
        self.close_connection = True


CFG = None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--log", required=True)
    p.add_argument("--tool", required=True, help="tool name suffix, e.g. cyberos.skill.list_skills")
    p.add_argument("--args", default="{}", help="the call's arguments as JSON")
    p.add_argument("--port-file", required=True)
    p.add_argument("--retry-gate", help="approval scenario: retry the call once this file exists")
    p.add_argument("--gate-timeout", type=float, default=30.0, help="seconds to wait for --retry-gate")
    p.add_argument("--final-delay", type=float, default=0.0,
                   help="seconds to 'think' before the final answer (keeps the host alive after the call)")
    a = p.parse_args()
    json.loads(a.args)
    global CFG
    Handler.cfg = CFG = a
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    with open(a.port_file, "w") as f:
        f.write(str(srv.server_address[1]))
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
