"""What each host's model must get from the bridge on its default flags: the per-case
assertions of the real-host tests. Each check is (name, passed, what was seen)."""

import re

# The text a host shows its model for a bridge error ends with "[class, trace <32 hex>]".
TRAILER = re.compile(r"\[(input_validation|authz_denied|upstream_unavailable|internal_error), trace [0-9a-f]{32}\]")


# Hosts that validate a call's arguments against the offered inputSchema themselves (the
# Gemini CLI, with the bridge's additionalProperties: false) and never send a bad call.
HOST_VALIDATES = {"gemini"}

# The hint of a refusal that waits for the user's approval (a host that cannot ask).
HOW = {"stdio": re.compile(r"run `cyberos-mcp-bridge approve [0-9a-f]{32}` in a terminal"),
       "http": re.compile(r"open https?://\S+/approve/[0-9a-f]{32} in a browser")}
AGAIN = "call the tool again with exactly the same arguments"


def approval_refusal(rec, text, seen):
    """A host that cannot ask: the refusal tells the model what to tell the user (the
    transport's way to approve) and to call again; class and trace last; never _meta."""
    # The message's last part is the trailer; a host may wrap the message in its own text.
    ends = re.search(TRAILER.pattern + r'(?:\s*$|")', text)
    ok = HOW[rec["transport"]].search(text) and AGAIN in text and ends and ends[1] == "authz_denied" \
        and "_meta" not in text
    return ("a refused write says how to approve it and to call again (never _meta)", bool(ok), seen)


def checks(rec):
    """The assertions for one run record (see drive.one)."""
    res, wire, scenario = rec["result"], rec["wire"], rec["scenario"]
    text = res["text"] if res else ""
    seen = " ".join(text.split())[:200] or f"(no tool result; host said: {rec['final_text']})"
    out = [("offered all eight tools", len(rec["offered"]) == 8, f"{len(rec['offered'])} offered")]
    out.append(("the model got the tool result", res is not None, seen))
    if res is None:
        return out
    trailer = TRAILER.search(text)
    if scenario == "success":
        out.append(("a success carries the skills", '"skills"' in text and res["is_error"] is not True, seen))
    elif scenario == "input_error" and rec["host"] in HOST_VALIDATES:
        # The host checks the arguments against the offered inputSchema and answers the model
        # itself; the call never reaches the bridge (stdio: no tools/call on the wire).
        reached = wire is not None and wire["call_params"] is not None
        ok = "must NOT have additional properties" in text and res["is_error"] is True and not reached
        out.append(("the host refuses the extra argument by the bridge's schema, before calling", ok,
                    seen + ("; the call reached the bridge" if reached else "")))
    elif scenario == "input_error":
        ok = "unknown argument 'bogus'" in text and "/bogus" in text and trailer and trailer[1] == "input_validation"
        out.append(("an input error says what and how to fix, with class and trace", bool(ok), seen))
    elif scenario in ("no_confirmation", "approval") and not rec["can_ask"]:
        if wire is not None:
            # A host that cannot ask: it declares no elicitation and the bridge asks nothing.
            caps = wire["capabilities"] or {}
            out.append(("the host declares no elicitation, and is not asked",
                        "elicitation" not in caps and not wire["server_requests"],
                        f"capabilities {sorted(caps)}; bridge requests {wire['server_requests']}"))
        out.append(approval_refusal(rec, text, seen))
        if scenario == "approval":
            a, retry = rec["approval"] or {}, rec["retry"]
            out.append(("the user approved as the refusal said", bool(a.get("ok")), str(a)))
            rtext = retry["text"] if retry else ""
            rseen = " ".join(rtext.split())[:200] or f"(no retry result; host said: {rec['final_text']})"
            out.append(("the model's identical retry stores the entry (audit_id)",
                        '"audit_id"' in rtext and retry["is_error"] is not True, rseen))
    elif scenario == "no_confirmation":
        asked = wire is not None and "elicitation/create" in wire["server_requests"]
        if rec["transport"] == "stdio":
            # Both hosts declare elicitation: the bridge asks; headless, the host says no.
            out.append(("on stdio the bridge asks the user by elicitation", asked, str(wire and wire["server_requests"])))
        # Over HTTP both hosts keep the session id, whose initialize declared elicitation,
        # so the bridge asks there too (on the call's SSE stream); the refusal names the
        # host's answer (declined or cancelled), which only an asked question gets.
        said = re.search(r"did not confirm the call \((declined|cancelled|answered no)\)", text) is not None
        ok = said and trailer and trailer[1] == "authz_denied" and "_meta" not in text
        out.append(("a refused write says why and what the user can do (never _meta)", bool(ok), seen))
    elif scenario == "long_running":
        ok = '"steps_executed"' in text and '"task_id"' not in text
        out.append(("a long tool on default flags returns its result, not a dead-end handle", ok, seen))
    if wire is not None:
        late = wire["progress_after_response"]
        out.append(("no progress after the response", late == 0, f"{late} late notifications"))
    return out
