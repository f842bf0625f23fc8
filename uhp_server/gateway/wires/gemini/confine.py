"""What a Gemini API call may not ask of the provider (gateway/confine.py says why)."""

from __future__ import annotations

from typing import Any

from uhp_server.gateway.wires.confining import drop

_STATE = ("cachedContent", "cached_content")


def confine(body: dict[str, Any]) -> None:
    drop(body, _STATE)
    _keep_functions(body)


def _keep_functions(body: dict[str, Any]) -> None:
    """Gemini's tools are objects of kinds (functionDeclarations, googleSearch, urlContext,
    codeExecution…): only the function declarations stay."""
    tools = body.get("tools")
    kept = (
        [
            {"functionDeclarations": t["functionDeclarations"]}
            for t in tools
            if isinstance(t, dict) and "functionDeclarations" in t
        ]
        if isinstance(tools, list)
        else []
    )
    if kept:
        body["tools"] = kept
    elif "tools" in body:
        body.pop("tools")
        drop(body, ("toolConfig", "tool_config"))


def stand_in(text: str) -> dict[str, Any]:
    return {"text": text}
