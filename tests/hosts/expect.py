"""What each host's model must get from the bridge on its default flags: the per-case
assertions of the real-host tests. Each check is (name, passed, what was seen)."""

import re

# The text a host shows its model for a bridge error ends with "[class, trace <32 hex>]".
TRAILER = re.compile(r"\[(input_validation|authz_denied|upstream_unavailable|internal_error), trace [0-9a-f]{32}\]")


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
    elif scenario == "input_error":
        ok = "unknown argument 'bogus'" in text and "/bogus" in text and trailer and trailer[1] == "input_validation"
        out.append(("an input error says what and how to fix, with class and trace", bool(ok), seen))
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
