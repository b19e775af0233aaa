#!/usr/bin/env python3
"""Writes a structure-only copy of the MCP 2025-11-25 JSON schema for the test suite.

Drops every "description" member whose value is a string (prose), keeps all structure,
so tests can validate emitted messages on any checkout.

usage: scripts/strip-schema.py SOURCE.json DEST.json
"""
import hashlib
import json
import sys


def strip(node):
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if not (k == "description" and isinstance(v, str))}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def main():
    src, dest = sys.argv[1], sys.argv[2]
    raw = open(src, "rb").read()
    schema = strip(json.loads(raw))
    schema["$comment"] = "MCP 2025-11-25 schema, descriptions stripped; source sha256 " + hashlib.sha256(raw).hexdigest()
    with open(dest, "w") as f:
        json.dump(schema, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
