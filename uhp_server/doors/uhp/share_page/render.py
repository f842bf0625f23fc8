"""Rendering a shared session as HTML a person wants to read.

Everything a transcript holds is hostile until escaped: templates autoescape, the answer's
Markdown is rendered with raw HTML off and images as plain links (never loaded), and
the page's CSP forbids any script but the page's own file. Only what the page shows is
rendered: prompts, answers, reasoning summaries, tool calls and their outputs, artifact
links. No ids, metadata, usage or anything else about the principal reaches it.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.rules_core import StateCore
from markupsafe import Markup

from storage.tables import ArtifactRow, SessionRow
from uhp_server.engine.history import Turn, attachments, tool_calls, user_text

HERE = Path(__file__).resolve().parent
STATIC_DIR = HERE / "static"

_env = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
LINK_SCHEMES = ("http://", "https://", "mailto:")
LINK_REL = "nofollow noopener noreferrer"


class _SafeMarkdown(MarkdownIt):
    """CommonMark plus tables, with raw HTML off, and links that go nowhere but an
    absolute http(s) or mailto target (a relative link would resolve inside the share)."""

    def validateLink(self, url: str) -> bool:
        return url.strip().lower().startswith(LINK_SCHEMES)


def _mark_links(state: StateCore) -> None:
    """Every link leaves the page without handing it a window or a referrer."""
    for block in state.tokens:
        for token in block.children or ():
            if token.type == "link_open":
                token.attrSet("rel", LINK_REL)


def _image_as_link(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """An image is never loaded (it could come from anywhere): it becomes a plain link
    labelled with its alt text. Its target passed validateLink like any link's."""
    token = tokens[idx]
    label = self.renderInlineAsText(token.children or [], options, env) or "image"
    href = escapeHtml(str(token.attrGet("src") or ""))
    return f'<a href="{href}" rel="{LINK_REL}">{escapeHtml(label)}</a>'


_markdown = _SafeMarkdown(
    "commonmark", {"html": False, "linkify": False, "typographer": False}
).enable(["table", "strikethrough"])
_markdown.add_render_rule("image", _image_as_link)
_markdown.core.ruler.push("mark_links", _mark_links)

STATUS_LABELS = {
    "in_progress": "Running",
    "completed": "Completed",
    "incomplete": "Stopped by a budget",
    "failed": "Failed",
    "cancelled": "Cancelled",
}


@dataclass
class RenderedTurn:
    key: str  # changes whenever the turn's HTML does
    html: str


def markdown(text: str) -> Markup:
    return Markup(_markdown.render(text))  # safe: markdown-it escapes, raw HTML is off


def when(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(timestamp))


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} bytes"


def _pretty_json(text: str | None) -> str:
    try:
        return json.dumps(json.loads(text or ""), indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return text or ""


def _brief(arguments: str | None) -> str:
    """A one-line summary of a tool call: the command it ran, when it ran one."""
    try:
        value = json.loads(arguments or "")
    except (TypeError, ValueError):
        value = None
    if isinstance(value, dict):
        command = value.get("cmd") or value.get("command")
        if isinstance(command, list):
            command = " ".join(str(part) for part in command[-1:] or command)
        if isinstance(command, str):
            arguments = command
    line = " ".join((arguments or "").split())
    return line if len(line) <= 90 else line[:89] + "…"


def _items(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The output in order, with each tool call paired with its output."""
    calls = {call["call_id"]: call for call in tool_calls(response)}
    items: list[dict[str, Any]] = []
    for index, item in enumerate(response.get("output", [])):
        kind = item.get("type")
        if kind == "message":
            text = "".join(part.get("text", "") for part in item.get("content", []))
            items.append({"kind": "message", "html": markdown(text)})
        elif kind == "reasoning":
            text = "\n".join(part.get("text", "") for part in item.get("summary", []))
            if text.strip():
                items.append({"kind": "reasoning", "text": text, "key": f"r{index}"})
        elif kind == "function_call":
            call = calls.get(item.get("call_id"), {})
            items.append(
                {
                    "kind": "tool",
                    "key": f"t{index}",
                    "name": item.get("name") or "tool",
                    "brief": _brief(item.get("arguments")),
                    "arguments": _pretty_json(item.get("arguments")),
                    "output": call.get("output"),
                    "status": call.get("status") or "in_progress",
                }
            )
    return items


def _files(token: str, artifacts: list[ArtifactRow]) -> list[dict[str, str]]:
    return [
        {"name": a.filename, "url": f"{token}/files/{a.id}", "size": human_size(a.bytes)}
        for a in artifacts
    ]


# Finished turns never change: the page polls every second while a turn runs, so their HTML
# is kept rather than rendered again each time. Bounded; keyed by the share's token.
_finished: OrderedDict[tuple[str, int, str, int], RenderedTurn] = OrderedDict()
FINISHED_CACHE_SIZE = 1024


def render_turn(token: str, number: int, turn: Turn) -> RenderedTurn:
    status = turn.response["status"] if turn.response else turn.row.status
    if status == "in_progress":
        return _render_turn(token, number, turn)
    key = (token, number, turn.row.id, len(turn.artifacts))  # a late artifact is a change
    cached = _finished.get(key)
    if cached is None:
        cached = _finished[key] = _render_turn(token, number, turn)
        if len(_finished) > FINISHED_CACHE_SIZE:
            _finished.popitem(last=False)
    _finished.move_to_end(key)
    return cached


def _render_turn(token: str, number: int, turn: Turn) -> RenderedTurn:
    status = turn.response["status"] if turn.response else turn.row.status
    # A turn its owner chose not to keep (`store: false`) is never shown, not even while it
    # runs and its content is still in memory.
    kept = turn.response if turn.row.store else None
    html = _env.get_template("turn.html").render(
        number=number,
        status=status,
        status_label=STATUS_LABELS.get(status, status),
        when=when(turn.row.created_at),
        retained=kept is not None,
        prompt=user_text(turn.row) if kept else "",
        attachments=[a["filename"] for a in attachments(turn.row)] if kept else [],
        items=_items(kept) if kept else [],
        files=_files(token, turn.artifacts),
        error=(kept or {}).get("error") or None,
    )
    return RenderedTurn(hashlib.sha256(html.encode()).hexdigest()[:16], html)


def session_state(session: SessionRow, token: str, turns: list[Turn]) -> dict[str, Any]:
    """What the live page polls: the same HTML the page was served with, turn by turn."""
    rendered = [render_turn(token, n, turn) for n, turn in enumerate(turns, start=1)]
    running = any((t.response or {}).get("status") == "in_progress" for t in turns)
    return {
        "running": running,
        "status": "in_progress" if running else session.status,
        "status_label": STATUS_LABELS.get(session.status, session.status),
        "turns": [{"key": r.key, "html": r.html} for r in rendered],
    }


def render_page(session: SessionRow, token: str, turns: list[Turn]) -> str:
    state = session_state(session, token, turns)
    return _env.get_template("page.html").render(
        title=session.title or "Shared session",
        started=when(session.created_at),
        state=state,
        status_label=STATUS_LABELS.get(state["status"], state["status"]),
        token=token,
    )


def render_gone() -> str:
    return _env.get_template("gone.html").render()
