"""What a streamed answer says, wire by wire, reduced to what a CLI acts on: text, reasoning,
tool calls with their arguments, the stop reason and the closing event. The translation
tests and bench/translation_compare.py compare translated answers with native ones by it."""

from __future__ import annotations

import json

from uhp_server.gateway.wires.sse import SSEDecoder

USAGE_FIELDS = {"input_tokens", "output_tokens", "total_tokens", "input_tokens_details"}


def sse_events(raw: bytes) -> list[dict]:
    """The JSON data of each SSE event (events whose data is not JSON are left out)."""
    decoder = SSEDecoder()
    found = []
    for event in decoder.feed(raw) + decoder.flush():
        try:
            found.append(json.loads(event.data))
        except ValueError:
            continue
    return found


def _joined(evs: list[dict], kind: str, key: str = "delta") -> str:
    return "".join(e.get(key) or "" for e in evs if e.get("type") == kind)


def responses_summary(evs: list[dict]) -> dict:
    final = evs[-1].get("response") or {}
    items = [
        (i.get("type"), i.get("name"), i.get("namespace"), i.get("arguments"), i.get("call_id"))
        for i in final.get("output") or []
    ]
    usage = final.get("usage") or {}
    return {
        "text": _joined(evs, "response.output_text.delta"),
        "reasoning": _joined(evs, "response.reasoning_summary_text.delta"),
        "args": _joined(evs, "response.function_call_arguments.delta"),
        "items": items,
        "status": final.get("status"),
        "last": evs[-1].get("type"),
        "usage": set(usage) >= USAGE_FIELDS,
        "cached_tokens": "cached_tokens" in (usage.get("input_tokens_details") or {}),
    }


def anthropic_summary(evs: list[dict]) -> dict:
    def deltas(kind: str, key: str) -> str:
        return "".join(
            e["delta"].get(key) or ""
            for e in evs
            if e.get("type") == "content_block_delta" and e["delta"].get("type") == kind
        )

    starts = [e["content_block"] for e in evs if e.get("type") == "content_block_start"]
    stops = [e for e in evs if e.get("type") == "message_delta"]
    arguments = deltas("input_json_delta", "partial_json")
    return {
        "text": deltas("text_delta", "text"),
        "thinking": deltas("thinking_delta", "thinking"),
        "args": json.loads(arguments) if arguments else {},
        "blocks": [(b.get("type"), b.get("name")) for b in starts],
        "stop": stops[-1]["delta"].get("stop_reason") if stops else None,
        "output_tokens": bool(stops) and "output_tokens" in (stops[-1].get("usage") or {}),
        "last": evs[-1].get("type"),
    }
