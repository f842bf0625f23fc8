"""The engine's records in the protocol's shapes: Session, TurnItem, File, SessionShare, the
shared view and the harness object."""

from __future__ import annotations

from typing import Any

from uhp_server.engine import Artifact, Harness, Session, Share, Turn, UploadedFile, user_text
from uhp_server.harnesses.config import BASE_CONFIG_FIELD, KEEP_WARM_FIELD, HarnessConfig
from uhp_server.harnesses.mcp import render_mcp_servers

# The harness object's one field of this server's own: the built-in skills it inherits.
BUILTIN_SKILLS_FIELD = "uhpserver_builtinSkills"


def session_to_wire(session: Session, retention_days: float) -> dict[str, Any]:
    """The protocol's Session, plus where its artifacts live and when it expires."""
    return {
        "id": session.id,
        "object": "session",
        "harness_id": session.harness_id,
        "title": session.title,
        "status": session.status,
        "created_at": session.created_at,
        "updated_at": session.updated_at,
        "container_id": session.container_id,
        "expires_at": int(session.updated_at + retention_days * 86400),
        **_environment_of(session.environment_id, session.environment_version),
    }


def _environment_of(environment_id: str | None, version: int | None) -> dict[str, Any]:
    """`environment` (Sessions §3) and, this server's own, the version read (Environments
    §6.5): absent when no environment was read."""
    if environment_id is None:
        return {}
    return {"environment": environment_id, "environment_version": version}


def file_to_wire(file: UploadedFile) -> dict[str, object]:
    """The protocol's File object."""
    return {
        "id": file.id,
        "object": "file",
        "filename": file.filename,
        "bytes": file.bytes,
        "created_at": file.created_at,
        "purpose": file.purpose,
        "media_type": file.media_type,
    }


def artifact_to_wire(artifact: Artifact) -> dict[str, object]:
    """The protocol's File object for an artifact."""
    return {
        "id": artifact.id,
        "object": "file",
        "container_id": artifact.container_id,
        "filename": artifact.filename,
        "bytes": artifact.bytes,
        "created_at": artifact.created_at,
        "media_type": artifact.media_type,
        "response_id": artifact.response_id,
    }


def share_to_wire(share: Share, *, enabled: bool = True) -> dict[str, object]:
    """The protocol's SessionShare: a base-relative url survives any proxy in front."""
    return {
        "id": share.id,
        "object": "session.share",
        "url": f"/s/{share.token}",
        "enabled": enabled,
        "session_id": share.session_id,
        "created_at": share.created_at,
    }


def harness_to_wire(harness: Harness) -> dict[str, Any]:
    """The harness object. Skills and plugins come rendered (bundles and packages live out
    of line); MCP credentials are references only (harnesses/mcp.py)."""
    config: HarnessConfig = harness.config
    wire: dict[str, Any] = {
        "id": harness.id,
        "object": "harness",
        "name": harness.name,
        "base": harness.base,
        "baseLabel": harness.base_label,
        "systemPrompt": config.system_prompt,
        "mcpServers": render_mcp_servers(config.mcp_servers),
        "skills": harness.skills,
        # This server's extension (vendor-prefixed, as its error codes are): the built-in
        # skills the harness inherits. Never inside `skills`, which reports only what was
        # written to it (Harnesses §4.4), so a GET→PUT round trip changes nothing.
        BUILTIN_SKILLS_FIELD: harness.builtin_skills,
        "plugins": harness.plugins,
        "disabledTools": config.disabled_tools,
        "maxStep": config.max_step,
        "timeoutSeconds": config.timeout_seconds,
        "createdAt": harness.created_at_ms,
    }
    if harness.default_model:
        wire["defaultModel"] = harness.default_model
    if config.environment:
        wire["environment"] = config.environment
    if config.base_config is not None:
        # This server's extension: the base's own configuration (the `acp` base's agent),
        # its secrets as references only (harnesses/base_config.py).
        wire[BASE_CONFIG_FIELD] = config.base_config
    if config.keep_warm_seconds:
        # This server's extension: a session's process kept warm this long (engine/turns/warm.py).
        wire[KEEP_WARM_FIELD] = config.keep_warm_seconds
    if harness.enforcement is not None:
        # What this base really enforces (Harnesses §4.3: never overstate it).
        wire["enforcement"] = {
            "disabledTools": harness.enforcement.disabled_tools,
            "maxStep": harness.enforcement.max_step,
            "timeoutSeconds": harness.enforcement.timeout,
        }
    return wire


# -- a session's turns -----------------------------------------------------------------------
def attachments(input_items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"file_id": part.get("file_id"), "filename": part.get("filename")}
        for item in input_items
        for part in item.get("content", [])
        if part.get("type") in ("input_file", "input_image")
    ]


def assistant_text(response: dict[str, Any]) -> str:
    texts = [
        part.get("text", "")
        for item in response.get("output", [])
        if item.get("type") == "message"
        for part in item.get("content", [])
    ]
    return "\n\n".join(t for t in texts if t)


def tool_calls(response: dict[str, Any]) -> list[dict[str, Any]]:
    """Each function call with its output (None while it runs), in call order."""
    outputs = {
        item.get("call_id"): item
        for item in response.get("output", [])
        if item.get("type") == "function_call_output"
    }
    calls = []
    for item in response.get("output", []):
        if item.get("type") != "function_call":
            continue
        result = outputs.get(item.get("call_id"))
        calls.append(
            {
                "call_id": item.get("call_id"),
                "name": item.get("name"),
                "arguments": item.get("arguments"),
                "output": result.get("output") if result else None,
                "status": result.get("status") if result else item.get("status"),
            }
        )
    return calls


def turn_item(turn: Turn) -> dict[str, Any]:
    """The protocol's TurnItem (Sessions §3): its response id and status always, and the user
    message, the answer, the tool calls and the files whenever the server has them. A turn
    whose owner chose not to keep it (`store: false`) has no content left: its id and status,
    and the files it made if it made any (those are kept, as the session's files list them)."""
    response = turn.response
    files = [artifact_to_wire(a) for a in turn.artifacts]
    item: dict[str, Any] = {
        "id": turn.id,
        "status": response["status"] if response else turn.status,
        "created_at": turn.created_at,
        **_environment_of(turn.environment_id, turn.environment_version),
    }
    if response is None:
        return item | ({"files": files} if files else {})
    item.update(
        user=user_text(turn.input_items),
        assistant=assistant_text(response),
        tools=tool_calls(response),
        files=files,
        attachments=attachments(turn.input_items),
        model=response.get("model"),
        error=response.get("error"),
    )
    return item


# -- a shared session, for a JSON client (Sessions §5) ------------------------------------
def shared_view(session: Session, token: str, turns: list[Turn]) -> dict[str, Any]:
    """What the shared page shows, as JSON: each turn in TurnItem's words (Sessions §3), and
    nothing the page leaves out. No id of the session, its responses, its harness or its
    principal (the view is a link anyone may hold, and no credential); no usage, metadata
    or model; files by their address under the share, which dies with it."""
    running = any(_turn_status(turn) == "in_progress" for turn in turns)
    return {
        "object": "session.shared_view",
        "title": session.title,
        "status": "in_progress" if running else session.status,
        "created_at": session.created_at,
        "updated_at": session.updated_at,
        "turns": [_shared_turn(token, turn) for turn in turns],
    }


def _turn_status(turn: Turn) -> str:
    return turn.response["status"] if turn.response else turn.status


def _shared_turn(token: str, turn: Turn) -> dict[str, Any]:
    # A turn its owner chose not to keep (`store: false`) shows its status and files only,
    # even while it runs and its content is still in memory, as on the page.
    kept = turn.response if turn.store else None
    item: dict[str, Any] = {
        "status": _turn_status(turn),
        "created_at": turn.created_at,
        "retained": kept is not None,
        "files": [
            {
                "filename": artifact.filename,
                "bytes": artifact.bytes,
                "media_type": artifact.media_type,
                "url": f"/s/{token}/files/{artifact.id}",
            }
            for artifact in turn.artifacts
        ],
    }
    if kept is None:
        return item
    error = kept.get("error")
    item.update(
        user=user_text(turn.input_items),
        assistant=assistant_text(kept),
        reasoning=reasoning_summaries(kept),
        tools=[
            {key: call[key] for key in ("name", "arguments", "output", "status")}
            for call in tool_calls(kept)
        ],
        attachments=[{"filename": a["filename"]} for a in attachments(turn.input_items)],
        error={"code": error.get("code"), "message": error.get("message")} if error else None,
    )
    return item


def reasoning_summaries(response: dict[str, Any]) -> list[str]:
    """Each reasoning item's summary, in order (those with nothing to say left out)."""
    texts = (
        "\n".join(part.get("text", "") for part in item.get("summary", []))
        for item in response.get("output", [])
        if item.get("type") == "reasoning"
    )
    return [text for text in texts if text.strip()]
