"""Reading what a host run left behind: the model stand-in's request log (what the
model was offered and got back) and stdio_tap.py's wire log (the host's side of MCP)."""
import json, os, re

CALL_ID, RETRY_ID = "call_cyberos_1", "call_cyberos_2"  # the stand-in's call and its retry

def norm(name):
    return re.sub(r"[^a-z0-9]", "_", name.lower())


SCHEMA_KEYWORDS = ("maxLength", "minLength", "minimum", "maximum", "pattern", "format", "required",
                   "additionalProperties", "dependentSchemas", "description")


def read_log(path):
    reqs = []
    if os.path.exists(path):
        with open(path) as f:
            reqs = [json.loads(line)["body"] for line in f if line.strip()]
    return [r for r in reqs if isinstance(r, dict) and ("messages" in r or "input" in r or "contents" in r)]


def offered_claude(reqs):
    """MCP tools as the model sees them: whole in tools[], or names only (deferred)."""
    tools, deferred, instructions = {}, set(), None
    for b in reqs:
        for t in b.get("tools") or []:
            if t.get("name", "").startswith("mcp__"):
                tools[t["name"]] = {"name": t["name"], "description": t.get("description"),
                                    "schema": t.get("input_schema"), "defer_loading": t.get("defer_loading", False)}
        text = json.dumps([b.get("system"), b.get("messages")])
        deferred |= set(re.findall(r"mcp__[A-Za-z0-9_-]+?__[A-Za-z0-9_-]+", text))
        m = re.search(r"## cyberos\\n(.*?)\\n\\n", text)
        if m and not instructions:
            instructions = json.loads('"' + m.group(1) + '"')
    mode = "deferred (ToolSearch)" if deferred and any(t["defer_loading"] for t in tools.values()) else "in tools[]"
    return list(tools.values()), sorted(deferred), instructions, mode


def offered_codex(reqs):
    tools, deferred, instructions = {}, [], None
    for b in reqs:
        groups = list(b.get("tools") or [])
        for i in b.get("input") or []:
            if isinstance(i, dict) and i.get("type") == "tool_search_output":
                groups += i.get("tools") or []
        for g in groups:
            subs = g.get("tools") if g.get("type") == "namespace" else [g]
            for t in subs or []:
                name = (g["name"] + "__" if g.get("type") == "namespace" else "") + t.get("name", "")
                if "cyberos" in name:
                    tools[name] = {"name": name, "description": t.get("description"), "schema": t.get("parameters"),
                                   "defer_loading": t.get("defer_loading", False)}
            if g.get("type") == "namespace" and "cyberos" in g.get("name", ""):
                instructions = g.get("description")
        m = re.search(r"- (mcp__cyberos): ", json.dumps(b.get("input")))
        if m:
            deferred = [m.group(1)]
    mode = "deferred (tool_search)" if deferred else "in tools[]"
    return list(tools.values()), deferred, instructions, mode


def offered_gemini(reqs):
    """MCP tools as Gemini's functionDeclarations (all sent whole; no tool search)."""
    tools, instructions = {}, None
    for b in reqs:
        for t in b.get("tools") or []:
            for d in t.get("functionDeclarations") or []:
                if "cyberos" in d.get("name", ""):
                    tools[d["name"]] = {"name": d["name"], "description": d.get("description"),
                                        "schema": d.get("parametersJsonSchema") or d.get("parameters"),
                                        "defer_loading": False}
        # The Gemini CLI puts server instructions in the first user turn, not the system prompt.
        text = "\n".join(p.get("text", "") for c in b.get("contents") or [] for p in c.get("parts") or []
                          if isinstance(p, dict))
        m = re.search(r"tool server 'cyberos':\n---\[start of server instructions\]---\n(.*?)\n---\[end", text, re.S)
        if m and not instructions:
            instructions = m.group(1)
    return list(tools.values()), [], instructions, "in tools[] (functionDeclarations)"


def result_claude(reqs, call_id=CALL_ID):
    for b in reqs:
        for m in b.get("messages") or []:
            for c in m.get("content") if isinstance(m.get("content"), list) else []:
                if c.get("type") == "tool_result" and c.get("tool_use_id") == call_id:
                    content = c.get("content")
                    text = content if isinstance(content, str) else "\n".join(
                        x.get("text", json.dumps(x)) for x in content or [])
                    return {"text": text, "is_error": bool(c.get("is_error")), "raw": c}
    return None


def result_codex(reqs, call_id=CALL_ID):
    for b in reqs:
        for i in b.get("input") or []:
            if isinstance(i, dict) and i.get("call_id") == call_id and i.get("type", "").endswith("_output"):
                out = i.get("output")
                text = out if isinstance(out, str) else "\n".join(x.get("text", json.dumps(x)) for x in out or [])
                return {"text": text, "is_error": None, "raw": i}
    return None


def result_gemini(reqs, call_id=CALL_ID):
    """A functionResponse part: {"id", "name", "response": {"output": …} or {"error": …}}."""
    for b in reqs:
        for c in b.get("contents") or []:
            for p in c.get("parts") or []:
                fr = p.get("functionResponse") if isinstance(p, dict) else None
                if fr and fr.get("id") == call_id:
                    resp = fr.get("response") or {}
                    out = resp.get("output", resp.get("error", resp))
                    text = out if isinstance(out, str) else json.dumps(out)
                    return {"text": text, "is_error": "error" in resp, "raw": fr}
    return None


def read_wire(path, tool):
    """The host's side of the stdio protocol, from stdio_tap.py's log (None over HTTP)."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        lines = [json.loads(x) for x in f if x.strip()]
    init = next((x["msg"].get("params", {}) for x in lines if isinstance(x["msg"], dict)
                 and x["msg"].get("method") == "initialize"), {})
    call = next((x["msg"] for x in lines if isinstance(x["msg"], dict) and x["msg"].get("method") == "tools/call"
                 and x["msg"].get("params", {}).get("name") == tool), None)
    wire = {"clientInfo": init.get("clientInfo"), "capabilities": init.get("capabilities"),
            "call_params": call and {k: v for k, v in call["params"].items() if k != "arguments"},
            "server_requests": [], "progress_after_response": 0}
    if call:
        answered = False
        token = (call["params"].get("_meta") or {}).get("progressToken")
        for x in lines:
            m = x["msg"]
            if not isinstance(m, dict) or x["dir"] != "bridge>host":
                continue
            if m.get("id") == call["id"] and "method" not in m:
                answered = True
            elif m.get("method") == "notifications/progress" and answered and token is not None \
                    and m.get("params", {}).get("progressToken") == token:
                wire["progress_after_response"] += 1
            elif "method" in m and "id" in m:
                wire["server_requests"].append(m["method"])
    return wire


def dropped_keywords(canonical, offered):
    """Schema keywords present in the bridge's inputSchema but missing from what the model got."""
    def walk(s, path, acc):
        if isinstance(s, dict):
            for k, v in s.items():
                if k in SCHEMA_KEYWORDS:
                    acc.add((path, k))
                if k == "properties" and isinstance(v, dict):
                    for p, sub in v.items():
                        walk(sub, path + "/" + p, acc)
        return acc
    return sorted({k for _, k in walk(canonical, "", set()) - walk(offered or {}, "", set())})
