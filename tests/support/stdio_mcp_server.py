#!/usr/bin/env python3
"""A stdio MCP server for tests, shipped inside a plugin package (tests/support/plugins.py) and
started by the CLI under test through the server's launcher, inside the sandbox.

Standard library only: newline-delimited JSON-RPC on stdin and stdout. Its one tool,
`stamp(word)`, answers with what a plugin process is owed (Agent Plugins §9): its
PLUGIN_ROOT and PLUGIN_DATA, its arguments, its working directory, the names of the
environment variables it got, and how many times it has written to PLUGIN_DATA, which
lives as long as the session.
"""

import json
import os
import sys

ANSWER_PREFIX = "stamped "


def answer(word: str) -> str:
    data = os.environ.get("PLUGIN_DATA", "")
    count_file = os.path.join(data, "count")
    try:
        with open(count_file) as handle:
            count = int(handle.read() or 0) + 1
    except OSError:
        count = 1
    with open(count_file, "w") as handle:
        handle.write(str(count))
    facts = {
        "root": os.environ.get("PLUGIN_ROOT"),
        "data": data,
        "argv": sys.argv[1:],
        "cwd": os.getcwd(),
        "env": sorted(os.environ),
        "count": count,
    }
    return f"{ANSWER_PREFIX}{word} {json.dumps(facts, sort_keys=True)}"


def reply(message_id: object, result: dict) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method, message_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            version = params.get("protocolVersion") or "2025-06-18"
            reply(
                message_id,
                {
                    "protocolVersion": version,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "stamp", "version": "1"},
                },
            )
        elif method == "tools/list":
            schema = {
                "type": "object",
                "properties": {"word": {"type": "string"}},
                "required": ["word"],
            }
            tool = {"name": "stamp", "description": "Stamps a word.", "inputSchema": schema}
            reply(message_id, {"tools": [tool]})
        elif method == "tools/call":
            word = str((params.get("arguments") or {}).get("word", ""))
            reply(message_id, {"content": [{"type": "text", "text": answer(word)}]})
        elif message_id is not None:
            reply(message_id, {})


if __name__ == "__main__":
    main()
