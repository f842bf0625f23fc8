"""The harness editor's fields made into the `PUT` body (uhp_server/doors/console/
harness_form.py): secrets write-only (an empty field keeps the stored reference), what the
form does not show sent back as it was, empty rows left out, bad numbers and JSON named by
their field. The browser walk is tests/test_console_browser.py."""

from __future__ import annotations

from typing import Any

import pytest

from uhp_server.doors.console.harness_form import body_from, fields_of
from uhp_server.errors import ApiError

CURRENT: dict[str, Any] = {
    "id": "chrn_x",
    "object": "harness",
    "name": "Mine",
    "base": "codex",
    "baseLabel": "Codex",
    "systemPrompt": "old",
    "defaultModel": "gpt-x",
    "maxStep": None,
    "timeoutSeconds": 30,
    "disabledTools": [],
    "skills": [
        {
            "name": "greeter",
            "enabled": True,
            "blob": "blob_1",
            "files": [
                {"path": "SKILL.md", "content": "say hi", "size": 6},
                {"path": "logo.png", "content_b64": "iVBORw0=", "size": 5},
            ],
        },
        {"name": "workspace-hygiene", "enabled": False, "builtin": True},
    ],
    "mcpServers": [
        {
            "name": "tools",
            "url": "https://mcp.example.com/mcp",
            "transport": "http",
            "enabled": True,
            "headers": {"X-Api-Key": "uhp-secret:hdr1"},
            "auth": "uhp-secret:tok1",
        }
    ],
    "plugins": [],
    "uhpserver_baseConfig": {"agent": "kept"},
    "createdAt": 1,
}


def form(**changes: str) -> dict[str, str]:
    """The form as the page posts it for CURRENT (with its empty rows for adding), with
    `changes`."""
    fields = {
        "name": "Mine",
        "defaultModel": "gpt-x",
        "systemPrompt": "old",
        "maxStep": "",
        "timeoutSeconds": "30",
        "disabledTools": "",
        "skills[0].name": "greeter",
        "skills[0].enabled": "on",
        "skills[0].files[0].path": "SKILL.md",
        "skills[0].files[0].content": "say hi",
        "skills[0].files[1].path": "logo.png",
        "skills[0].files[2].path": "",
        "skills[0].files[2].content": "",
        "skills[1].name": "workspace-hygiene",
        "skills[2].name": "",
        "skills[2].enabled": "on",
        "skills[2].files[0].path": "SKILL.md",
        "skills[2].files[0].content": "",
        "mcpServers[0].name": "tools",
        "mcpServers[0].url": "https://mcp.example.com/mcp",
        "mcpServers[0].transport": "http",
        "mcpServers[0].enabled": "on",
        "mcpServers[0].auth": "",
        "mcpServers[0].headers[0].name": "X-Api-Key",
        "mcpServers[0].headers[0].value": "",
        "mcpServers[0].headers[1].name": "",
        "mcpServers[0].headers[1].value": "",
        "mcpServers[1].name": "",
        "mcpServers[1].url": "",
        "mcpServers[1].enabled": "on",
        "plugins": "[]",
        "environment": "",
    }
    fields.update(changes)
    return fields


def test_an_unchanged_form_sends_the_harness_back_as_it_was() -> None:
    body = body_from(form(), CURRENT)
    for read_only in ("id", "object", "baseLabel", "createdAt"):
        assert read_only not in body
    assert body["skills"][0] == {
        "name": "greeter",
        "enabled": True,
        "blob": "blob_1",
        "files": [
            {"path": "SKILL.md", "content": "say hi"},
            {"path": "logo.png", "content_b64": "iVBORw0="},  # not editable: as it was
        ],
    }
    assert body["skills"][1] == CURRENT["skills"][1]  # the suppressed built-in
    assert len(body["skills"]) == 2 and len(body["mcpServers"]) == 1  # empty rows left out
    server = body["mcpServers"][0]
    assert server["auth"] == "uhp-secret:tok1"
    assert server["headers"] == {"X-Api-Key": "uhp-secret:hdr1"}
    assert body["uhpserver_baseConfig"] == {"agent": "kept"}
    assert body["timeoutSeconds"] == 30 and body["maxStep"] is None


def test_secrets_are_replaced_when_typed_and_forgotten_when_asked() -> None:
    typed = body_from(
        form(**{"mcpServers[0].auth": "new-token", "mcpServers[0].headers[0].value": "k2"}),
        CURRENT,
    )
    assert typed["mcpServers"][0]["auth"] == "new-token"
    assert typed["mcpServers"][0]["headers"] == {"X-Api-Key": "k2"}
    cleared = body_from(form(**{"mcpServers[0].auth.clear": "on"}), CURRENT)
    assert "auth" not in cleared["mcpServers"][0]


def test_the_form_never_holds_a_secret() -> None:
    fields = fields_of(CURRENT)
    server = fields.mcp_servers[0]
    assert server.has_auth and [(h.name, h.is_set) for h in server.headers] == [("X-Api-Key", True)]
    assert "uhp-secret" not in repr(fields)


def test_new_rows_add_a_skill_a_server_and_a_header() -> None:
    body = body_from(
        form(
            **{
                "skills[2].name": "helper",
                "skills[2].files[0].content": "---\nname: helper\n---\nhelp",
                "mcpServers[1].name": "more",
                "mcpServers[1].url": "https://more.example.com/mcp",
                "mcpServers[0].headers[1].name": "X-Team",
                "mcpServers[0].headers[1].value": "blue",
            }
        ),
        CURRENT,
    )
    assert body["skills"][2]["name"] == "helper" and "blob" not in body["skills"][2]
    assert body["mcpServers"][1]["url"] == "https://more.example.com/mcp"
    assert "auth" not in body["mcpServers"][1]
    assert body["mcpServers"][0]["headers"]["X-Team"] == "blue"


def test_removing_takes_items_out() -> None:
    body = body_from(
        form(
            **{
                "skills[0].files[1].remove": "on",
                "skills[1].remove": "on",
                "mcpServers[0].remove": "on",
            }
        ),
        CURRENT,
    )
    assert [f["path"] for f in body["skills"][0]["files"]] == ["SKILL.md"]
    assert [s["name"] for s in body["skills"]] == ["greeter"]
    assert body["mcpServers"] == []


@pytest.mark.parametrize(
    ("changes", "param"),
    [
        ({"maxStep": "many"}, "maxStep"),
        ({"timeoutSeconds": "-1"}, "timeoutSeconds"),
        # Digits to str.isdigit(), yet not to int(): the field's 400, never a 500.
        ({"maxStep": "\u00b2"}, "maxStep"),
        ({"timeoutSeconds": "\u2460"}, "timeoutSeconds"),
        ({"maxStep": "\u0663"}, "maxStep"),  # int() takes it; the field says ASCII digits
        ({"plugins": "[not json"}, "plugins"),
        (
            {
                "mcpServers[0].headers[1].name": "X-New",
                "mcpServers[0].headers[1].value": "",
            },
            "mcpServers[0].headers[1].value",
        ),
    ],
)
def test_a_bad_value_is_named_by_its_field(changes: dict[str, str], param: str) -> None:
    with pytest.raises(ApiError) as refused:
        body_from(form(**changes), CURRENT)
    assert refused.value.status == 400 and refused.value.param == param
