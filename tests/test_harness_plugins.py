"""Plugins of a harness (Plugins chapter), in process with no agent CLI: packages validated at
configuration time, what each contributes derived (and what it does not, recorded), one
namespace across the harness and its plugins, files and edits that keep them whole, the
export that installs elsewhere without credentials, and what a turn gets."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from fastapi.testclient import TestClient

from harness_bases.base import SkillBundle, SkillFile
from harness_bases.skill_notes import skill_description
from storage.harnesses import get_harness
from tests.support.harness_api import (
    AUTH,
    SKILL_MD,
    create,
    ctx,
    decode,
    make_client,
    other_principal,
    principal_id,
    refused,
    skill,
)
from tests.support.plugins import (
    BINARY,
    MANIFEST_SCHEMA,
    binary,
    manifest,
    mcp_config,
    package,
    stamp_files,
    stdio_server,
    text,
)
from uhp_server.harnesses.config import HarnessConfig
from uhp_server.harnesses.plugins.export import package_name
from uhp_server.harnesses.plugins.package import MAX_BYTES
from uhp_server.harnesses.runtime import turn_parts

SCHEMA = Path(__file__).parent / "spec" / "uhp-2026-10-04.schema.json"
REMOTE = "http://127.0.0.1:8931/mcp"  # loopback: plain http is allowed (Agent Plugins §7.2.1)


@cache
def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA.read_text())


def validate(definition: str, instance: Any) -> None:
    """Against the 2026-10-04 schema, the one that defines plugins."""
    jsonschema.Draft202012Validator({"$ref": f"#/$defs/{definition}", **_schema()}).validate(
        instance
    )


@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    # The packages' remote servers are on loopback (as the conformance fixture is).
    with make_client(tmp_path / "data", mcp_allow_private_hosts=True) as client:
        yield client


def install(http: TestClient, *plugins: dict[str, Any], status: int = 200, **config: Any) -> Any:
    return create(http, {"base": "codex", "plugins": list(plugins), **config}, status)


def files_of(http: TestClient, harness_id: str, name: str) -> dict[str, bytes]:
    response = http.get(f"/v1/harnesses/{harness_id}/plugins/{name}/files", headers=AUTH)
    assert response.status_code == 200, response.text
    validate("FileList", response.json())
    return {f["path"]: decode(f) for f in response.json()["files"]}


def sent(files: list[dict[str, Any]]) -> dict[str, bytes]:
    return {f["path"]: decode(f) for f in files}


LEGACY = {"type": "sse", "url": "https://mcp.example.com/sse"}  # Codex cannot run it
SERVERS = {
    "remote": {"type": "streamable-http", "url": REMOTE, "headers": {"X-Team": "blue"}},
    "stamp": stdio_server(args=["--data", "${PLUGIN_DATA}/x"], env={"MODE": "${PLUGIN_ROOT}"}),
}


# -- installing and deriving -----------------------------------------------------------------


def test_a_package_installs_whole_and_is_derived_not_copied(http: TestClient) -> None:
    files = package(servers=SERVERS, extra=stamp_files(), version="1.2.0", license="MIT")
    legacy = package("legacy-plugin", servers={"legacy": LEGACY}, skills=())
    harness = install(http, {"files": files}, {"files": legacy, "enabled": False})
    validate("Harness", harness)
    plugin, disabled = harness["plugins"]
    assert disabled["mcpServers"][0]["transport"] == "sse" and disabled["enabled"] is False
    validate("Plugin", plugin)
    assert plugin["name"] == "demo-plugin" and plugin["enabled"] is True
    assert plugin["blob"].startswith("plg_")
    assert plugin["manifest"] == manifest(version="1.2.0", license="MIT")
    assert plugin["skills"] == [{"name": "demo-skill", "description": "A skill for tests."}]
    assert plugin["skipped"] == []
    servers = {s["name"]: s for s in plugin["mcpServers"]}
    assert servers["remote"] == {
        "name": "remote",
        "transport": "http",
        "url": REMOTE,
        "headers": {"X-Team": "blue"},
        "enabled": True,
    }
    # Placeholders are reported as written: the sandbox's paths are not the client's business.
    assert servers["stamp"] == {
        "name": "stamp",
        "transport": "stdio",
        "command": "./bin/stamp",
        "args": ["--data", "${PLUGIN_DATA}/x"],
        "env": {"MODE": "${PLUGIN_ROOT}"},
        "enabled": True,
    }
    # The harness's own fields report what was written to them, and nothing was.
    assert harness["mcpServers"] == [] and harness["skills"] == []
    # The package comes back byte for byte, inline (it is small) and from the files endpoint.
    assert sent(plugin["files"]) == sent(files)
    assert files_of(http, harness["id"], "demo-plugin") == sent(files)
    assert files_of(http, harness["id"], "demo-plugin")["assets/data.bin"] == BINARY


def test_what_a_client_sends_in_derived_fields_is_recomputed(http: TestClient) -> None:
    files = package(servers={"remote": SERVERS["remote"]})
    forged = {
        "files": files,
        "mcpServers": [{"name": "evil", "url": "https://evil.example.com/mcp"}],
        "skills": [{"name": "ghost"}],
        "skipped": [{"path": "x", "reason": "y"}],
        "manifest": {"name": "other"},
    }
    (plugin,) = install(http, forged)["plugins"]
    assert [s["name"] for s in plugin["mcpServers"]] == ["remote"]
    assert [s["name"] for s in plugin["skills"]] == ["demo-skill"]
    assert plugin["skipped"] == [] and plugin["manifest"]["name"] == "demo-plugin"


PACKAGE_REFUSALS = [
    # (plugin, param, detail.path)
    ({"files": package()[1:]}, "plugins[0].files", "plugin.json"),
    ({"files": [*package(), text("../up.md", "x")]}, "plugins[0].files[4].path", "../up.md"),
    ({"files": [*package(), text("/etc/x", "x")]}, "plugins[0].files[4].path", "/etc/x"),
    ({"files": [*package(), text("bin/", "x")]}, "plugins[0].files[4].path", "bin/"),
    ({"files": [*package(), text("a\\..\\x", "x")]}, "plugins[0].files[4].path", "a\\..\\x"),
    (
        {"files": [*package(), text("bin/run\u202egp.sh", "x")]},
        "plugins[0].files[4].path",
        "bin/run\u202egp.sh",
    ),
    (
        {"files": [*package(), text("Plugin.json", "{}")]},
        "plugins[0].files[4].path",
        "Plugin.json",
    ),
    (
        {"files": [*package(), text("skills", "x")]},
        "plugins[0].files[4].path",
        "skills",
    ),
    ({"files": package(), "name": "renamed"}, "plugins[0].name", "plugin.json#/name"),
    ({"files": [text("plugin.json", "not json")]}, "plugins[0].files", "plugin.json"),
    ({"files": [text("plugin.json", "[1]")]}, "plugins[0].files", "plugin.json"),
    (
        {"files": [text("plugin.json", {"name": "x"})]},
        "plugins[0].files",
        "plugin.json#/$schema",
    ),
    (
        {"files": [text("plugin.json", manifest("My-Plugin"))]},
        "plugins[0].files",
        "plugin.json#/name",
    ),
    (
        {"files": [text("plugin.json", manifest("a--b"))]},
        "plugins[0].files",
        "plugin.json#/name",
    ),
    (
        {"files": [text("plugin.json", {"$schema": MANIFEST_SCHEMA})]},
        "plugins[0].files",
        "plugin.json",
    ),
    (
        {"files": [text("plugin.json", manifest(author={"name": "x", "phone": "1"}))]},
        "plugins[0].files",
        "plugin.json#/author",
    ),
    (
        {"files": [text("plugin.json", manifest(version=2))]},
        "plugins[0].files",
        "plugin.json#/version",
    ),
]


@pytest.mark.parametrize(("plugin", "param", "where"), PACKAGE_REFUSALS)
def test_an_invalid_package_is_refused_at_configuration_time(
    http: TestClient, plugin: dict[str, Any], param: str, where: str
) -> None:
    answer = http.post("/v1/harnesses", json={"base": "codex", "plugins": [plugin]}, headers=AUTH)
    error = refused(answer, param, 422, "plugin_invalid")
    assert error["detail"]["path"] == where and error["detail"]["reason"]
    assert _harness_count(http) == 0  # a refused write leaves nothing behind


def _harness_count(http: TestClient) -> int:
    listed = http.get("/v1/harnesses", headers=AUTH).json()["harnesses"]
    return sum(1 for h in listed if h["plugins"])


def test_a_manifest_schema_not_installed_is_refused_naming_the_supported(
    http: TestClient,
) -> None:
    old = {**manifest(), "$schema": "https://agent-plugins.org/schemas/0.9.0/plugin.schema.json"}
    answer = http.post(
        "/v1/harnesses",
        json={"base": "codex", "plugins": [{"files": [text("plugin.json", old)]}]},
        headers=AUTH,
    )
    error = refused(answer, "plugins[0].files", 422, "unsupported_plugin_schema")
    assert error["detail"]["supported"] == [MANIFEST_SCHEMA]
    discovery = http.get("/v1/uhp").json()
    assert discovery["capabilities"]["plugins"] is True
    assert discovery["plugin_schemas"] == [MANIFEST_SCHEMA]
    validate("Discovery", discovery)


def test_malformed_plugin_entries_are_refused(http: TestClient) -> None:
    malformed: list[tuple[dict[str, Any], str]] = [
        ({"plugins": "x"}, "plugins"),
        ({"plugins": ["x"]}, "plugins[0]"),
        ({"plugins": [{}]}, "plugins[0].files"),
        ({"plugins": [{"files": "plugin.json"}]}, "plugins[0].files"),
        ({"plugins": [{"files": package(), "enabled": "no"}]}, "plugins[0].enabled"),
        ({"plugins": [{"blob": "plg_unknown"}]}, "plugins[0].blob"),
        ({"plugins": [{"blob": "skb_notapackage"}]}, "plugins[0].blob"),
        ({"plugins": [{"files": [{"path": "plugin.json"}]}]}, "plugins[0].files[0].content"),
    ]
    for body, param in malformed:
        answer = http.post("/v1/harnesses", json={"base": "codex", **body}, headers=AUTH)
        refused(answer, param)


def test_an_oversized_package_is_refused_with_the_limit(http: TestClient) -> None:
    big = binary("assets/big.bin", b"\0" * (MAX_BYTES + 1))
    answer = http.post(
        "/v1/harnesses",
        json={"base": "codex", "plugins": [{"files": [*package(), big]}]},
        headers=AUTH,
    )
    error = refused(answer, "plugins[0].files[4]", 413, "file_too_large")
    assert error["detail"]["max_bytes"] == MAX_BYTES


def test_what_fails_to_load_is_recorded_and_the_rest_loads(http: TestClient) -> None:
    servers = {
        "good": SERVERS["remote"],
        "pigeon": {"type": "carrier-pigeon", "url": REMOTE},
        "extra-field": {"type": "streamable-http", "url": REMOTE, "auth": "t"},
        "mixed": {"type": "stdio", "command": "./bin/stamp", "url": REMOTE},
        "plain-http": {"type": "streamable-http", "url": "http://mcp.example.com/mcp"},
        "fragment": {"type": "sse", "url": "https://mcp.example.com/sse#x"},
        "escapes": stdio_server(command="./../../bin/sh"),
        "absolute": stdio_server(command="/usr/bin/python3"),
        "slashed": stdio_server(command="bin/stamp"),
        "shell": stdio_server(command="python3 -c 'x'"),
        "missing": stdio_server(command="./bin/nowhere"),
        "cwd-out": stdio_server(cwd="${PLUGIN_DATA}/../../etc"),
        "cwd-bare": stdio_server(cwd="data"),
        "reserved-env": stdio_server(env={"PLUGIN_ROOT": "/tmp"}),
        "bad-env": stdio_server(env={"A=B": "c"}),
        "bare": {"type": "stdio", "command": "python3", "args": ["-V"], "cwd": "${PLUGIN_DATA}"},
    }
    broken_skills = (
        text("skills/no-front/SKILL.md", "no front matter"),
        text("skills/wrong-name/SKILL.md", "---\nname: other\ndescription: d\n---\n"),
        text("skills/no-desc/SKILL.md", "---\nname: no-desc\n---\n"),
        text("skills/Upper/SKILL.md", "---\nname: Upper\ndescription: d\n---\n"),
        text("skills/bad-yaml/SKILL.md", "---\nname: [\n---\n"),
        text("skills/empty/readme.md", "no SKILL.md here"),
        text("skills/deep/nested/SKILL.md", "---\nname: nested\ndescription: d\n---\n"),
        text("skills/loose.md", "a file, not a skill folder"),
    )
    files = package(servers=servers, extra=(*stamp_files(), *broken_skills), vendorField=1)
    (plugin,) = install(http, {"files": files})["plugins"]
    validate("Plugin", plugin)
    assert sorted(s["name"] for s in plugin["mcpServers"]) == ["bare", "good"]
    assert [s["name"] for s in plugin["skills"]] == ["demo-skill"]
    skipped = {s["path"]: s["reason"] for s in plugin["skipped"]}
    expected = {f"mcp.json#/mcpServers/{name}" for name in servers if name not in ("good", "bare")}
    expected |= {f"skills/{name}" for name in ("no-front", "wrong-name", "no-desc", "Upper")}
    expected |= {"skills/bad-yaml", "skills/empty", "skills/deep", "plugin.json#/vendorField"}
    assert set(skipped) == expected
    assert all(reason for reason in skipped.values())
    assert "vendorField" not in plugin["manifest"]  # ignored, not loaded


def test_an_invalid_mcp_json_skips_its_servers_and_nothing_else(http: TestClient) -> None:
    cases = {
        "not json": "mcp.json",
        json.dumps({"mcpServers": {"a": SERVERS["remote"]}}): "mcp.json#/mcpServers/a",
        json.dumps(
            {
                "$schema": "https://agent-plugins.org/schemas/2.0.0/mcp.schema.json",
                "mcpServers": {"a": SERVERS["remote"]},
            }
        ): "mcp.json#/mcpServers/a",
        json.dumps({**mcp_config(a=SERVERS["remote"]), "extra": 1}): "mcp.json#/mcpServers/a",
        json.dumps({**mcp_config(), "mcpServers": []}): "mcp.json",
    }
    for content, where in cases.items():
        files = [*package(), text("mcp.json", content)]
        (plugin,) = install(http, {"files": files})["plugins"]
        assert plugin["mcpServers"] == []
        assert [s["path"] for s in plugin["skipped"]] == [where], content
        assert [s["name"] for s in plugin["skills"]] == ["demo-skill"]


def test_extensions_are_ignored_and_said_to_be(http: TestClient) -> None:
    extended = package(extensions={"com.example.client": {"hooks": True}})
    (plugin,) = install(http, {"files": extended})["plugins"]
    assert plugin["manifest"]["extensions"] == {"com.example.client": {"hooks": True}}
    assert [s["path"] for s in plugin["skipped"]] == ["plugin.json#/extensions/com.example.client"]
    not_an_object = package(extensions=["com.example.client"])
    (plugin,) = install(http, {"files": not_an_object})["plugins"]
    assert "extensions" not in plugin["manifest"]
    assert [s["path"] for s in plugin["skipped"]] == ["plugin.json#/extensions"]


def test_a_transport_the_base_cannot_run_is_refused_unless_disabled(http: TestClient) -> None:
    files = package(servers={"legacy": LEGACY})  # Codex speaks no HTTP+SSE
    answer = http.post(
        "/v1/harnesses", json={"base": "codex", "plugins": [{"files": files}]}, headers=AUTH
    )
    error = refused(answer, "plugins[0].files", 422, "unsupported_transport")
    assert error["detail"]["transport"] == "sse" and error["detail"]["base"] == "codex"
    (plugin,) = install(http, {"files": files, "enabled": False})["plugins"]
    assert plugin["enabled"] is False


# -- one namespace ---------------------------------------------------------------------------


def conflict(answer: Any, component: str, name: str, between: list[str]) -> None:
    error = refused(answer, "plugins", 409, "plugin_conflict")
    assert error["detail"]["component"] == component
    assert error["detail"]["name"] == name
    assert error["detail"]["between"] == between


def test_a_name_has_one_owner_across_the_harness_and_its_plugins(http: TestClient) -> None:
    remote = {"remote": SERVERS["remote"]}

    def post(**body: Any) -> Any:
        return http.post("/v1/harnesses", json={"base": "codex", **body}, headers=AUTH)

    direct = [{"name": "remote", "url": "https://mcp.example.com/mcp"}]
    answer = post(mcp_servers=direct, plugins=[{"files": package(servers=remote)}])
    conflict(answer, "mcp_server", "remote", ["harness", "demo-plugin"])
    answer = post(skills=[skill(name="demo-skill")], plugins=[{"files": package()}])
    conflict(answer, "skill", "demo-skill", ["harness", "demo-plugin"])
    other = package("other-plugin", servers={"REMOTE": SERVERS["remote"]}, skills=())
    answer = post(plugins=[{"files": package(servers=remote)}, {"files": other}])
    conflict(answer, "mcp_server", "REMOTE", ["demo-plugin", "other-plugin"])
    # A built-in skill is the harness's until it is disabled.
    builtin = package(skills=("workspace-hygiene",))
    conflict(
        post(plugins=[{"files": builtin}]), "skill", "workspace-hygiene", ["harness", "demo-plugin"]
    )
    suppressed = [{"name": "workspace-hygiene", "enabled": False}]
    install(http, {"files": builtin}, skills=suppressed)
    # Disabling either side clears a conflict.
    install(http, {"files": package(servers=remote)}, mcp_servers=[{**direct[0], "enabled": False}])
    install(http, {"files": package(servers=remote), "enabled": False}, mcp_servers=direct)
    # Two plugins may never share a name, enabled or not.
    twin = {"files": package(skills=()), "enabled": False}
    answer = post(plugins=[{"files": package()}, twin])
    conflict(answer, "plugin", "demo-plugin", ["demo-plugin", "demo-plugin"])


# -- reading, editing, disabling ----------------------------------------------------------


def test_an_unrelated_edit_keeps_the_package(http: TestClient) -> None:
    files = package(servers={"stamp": SERVERS["stamp"]}, extra=stamp_files())
    harness = install(http, {"files": files})
    read = http.get(f"/v1/harnesses/{harness['id']}", headers=AUTH).json()
    renamed = http.put(
        f"/v1/harnesses/{harness['id']}", json={**read, "name": "renamed"}, headers=AUTH
    ).json()
    assert renamed["plugins"] == read["plugins"]
    assert files_of(http, harness["id"], "demo-plugin") == sent(files)
    # Only the handle and the name, as a client that keeps what it does not know sends it.
    handle = {"name": "demo-plugin", "blob": read["plugins"][0]["blob"]}
    kept = http.put(f"/v1/harnesses/{harness['id']}", json={"plugins": [handle]}, headers=AUTH)
    assert kept.status_code == 200, kept.text
    assert kept.json()["plugins"] == read["plugins"]
    # A file listed without contents comes from the blob it was read with.
    listed = [{"path": f["path"]} for f in read["plugins"][0]["files"]]
    again = {**handle, "files": [*listed[:-1], text("skills/demo-skill/extra.md", "new")]}
    changed = http.put(f"/v1/harnesses/{harness['id']}", json={"plugins": [again]}, headers=AUTH)
    assert changed.status_code == 200, changed.text
    now = files_of(http, harness["id"], "demo-plugin")
    assert (
        now["skills/demo-skill/extra.md"] == b"new" and now["bin/stamp"] == sent(files)["bin/stamp"]
    )
    # Left out of a PUT, plugins are removed, as every mutable field is replaced.
    cleared = http.put(f"/v1/harnesses/{harness['id']}", json={"name": "x"}, headers=AUTH).json()
    assert cleared["plugins"] == []


def test_a_large_package_comes_back_by_its_handle(http: TestClient) -> None:
    big = binary("assets/big.bin", bytes(300 * 1024))
    harness = install(http, {"files": [*package(), big]})
    (plugin,) = harness["plugins"]
    assert "files" not in plugin and plugin["blob"].startswith("plg_")
    put = http.put(f"/v1/harnesses/{harness['id']}", json=harness, headers=AUTH)
    assert put.status_code == 200, put.text
    assert files_of(http, harness["id"], "demo-plugin")["assets/big.bin"] == bytes(300 * 1024)


def test_a_disabled_plugin_stays_installed_and_disabled(http: TestClient) -> None:
    files = package(servers={"remote": SERVERS["remote"]})
    harness = install(http, {"files": files, "enabled": False})
    read = http.get(f"/v1/harnesses/{harness['id']}", headers=AUTH).json()
    put = http.put(f"/v1/harnesses/{harness['id']}", json=read, headers=AUTH).json()
    (plugin,) = put["plugins"]
    assert plugin["enabled"] is False and plugin["name"] == "demo-plugin"
    assert files_of(http, harness["id"], "demo-plugin") == sent(files)
    parts = _turn_parts(http, harness["id"])
    assert parts.plugins == () and parts.mcp_servers == ()
    assert "demo-skill" not in {s.name for s in parts.skills}


def test_the_files_of_a_plugin_that_is_not_there(http: TestClient) -> None:
    harness = install(http, {"files": package()})
    missing = http.get(f"/v1/harnesses/{harness['id']}/plugins/nope/files", headers=AUTH)
    refused(missing, "plugin_name", 404, "plugin_not_found")
    theirs = http.get(
        f"/v1/harnesses/{harness['id']}/plugins/demo-plugin/files", headers=other_principal(http)
    )
    refused(theirs, "harness_id", 404, "harness_not_found")


# -- exporting -------------------------------------------------------------------------------

LOGO = bytes(range(255, -1, -1))


def test_a_harness_exports_as_a_package_that_installs_without_credentials(
    http: TestClient,
) -> None:
    secret = "export-secret-0451"
    own_skill = skill(binary("assets/logo.bin", LOGO), text("references/r.md", "ref"))
    source = create(
        http,
        {
            "base": "codex",
            "name": "Contract Review: Agent v2!",
            "mcp_servers": [
                {"name": "vault", "url": "https://mcp.example.com/mcp", "auth": secret},
                {"name": "plain", "url": "https://plain.example.com/mcp", "transport": "http"},
                {
                    "name": "keyed",
                    "url": "https://k.example.com/mcp",
                    "headers": {"X-Api-Key": secret},
                },
                {"name": "off", "url": "https://off.example.com/mcp", "enabled": False},
            ],
            "skills": [own_skill, skill(name="resting", enabled=False)],
            "plugins": [{"files": package("installed-plugin", skills=("inner",))}],
        },
    )
    answer = http.get(f"/v1/harnesses/{source['id']}/plugin", headers=AUTH)
    assert answer.status_code == 200, answer.text
    exported = answer.json()
    validate("Plugin", exported)
    assert secret not in answer.text and "uhp-secret:" not in answer.text
    assert exported["name"] == "contract-review-agent-v2"
    files = sent(exported["files"])
    assert json.loads(files["plugin.json"]) == manifest("contract-review-agent-v2")
    mcp = json.loads(files["mcp.json"])
    assert mcp["mcpServers"] == {
        "vault": {"type": "streamable-http", "url": "https://mcp.example.com/mcp"},
        "plain": {"type": "streamable-http", "url": "https://plain.example.com/mcp"},
        "keyed": {"type": "streamable-http", "url": "https://k.example.com/mcp"},
    }
    assert {s["path"] for s in exported["skipped"]} == {
        "mcp.json#/mcpServers/vault",
        "mcp.json#/mcpServers/keyed",
    }
    # The enabled skill of its own, whole; not the built-ins, nor the installed plugin's.
    assert {p for p in files if p.startswith("skills/")} == {
        "skills/vault-manual/SKILL.md",
        "skills/vault-manual/assets/logo.bin",
        "skills/vault-manual/references/r.md",
    }
    assert files["skills/vault-manual/assets/logo.bin"] == LOGO
    assert files["skills/vault-manual/SKILL.md"] == SKILL_MD.encode()

    # It installs elsewhere unchanged, and gives the same contents back.
    target = install(http, {"files": exported["files"]})
    (plugin,) = target["plugins"]
    assert plugin["name"] == exported["name"]
    assert [s["name"] for s in plugin["mcpServers"]] == ["vault", "plain", "keyed"]
    assert [s["name"] for s in plugin["skills"]] == ["vault-manual"]
    assert files_of(http, target["id"], exported["name"]) == files
    assert plugin["mcpServers"] == exported["mcpServers"] and plugin["skills"] == exported["skills"]


def test_a_harness_with_nothing_to_export_is_a_manifest(http: TestClient) -> None:
    harness = create(http, {"base": "codex", "name": "***"})
    exported = http.get(f"/v1/harnesses/{harness['id']}/plugin", headers=AUTH).json()
    assert [f["path"] for f in exported["files"]] == ["plugin.json"]
    assert exported["name"] == package_name(harness["id"])
    assert exported["skipped"] == [] and exported["mcpServers"] == []


@pytest.mark.parametrize(
    ("name", "derived"),
    [
        ("Research agent", "research-agent"),
        ("  --Já..vá 2.0--  ", "j-.v-2.0"),
        ("a...b", "a.b"),
        (".hidden.", "hidden"),
        ("x" * 70, "x" * 64),
        ("a" * 63 + "-b", "a" * 63),
        ("", ""),
        ("!!!", ""),
    ],
)
def test_export_names_follow_agent_plugins_rules(name: str, derived: str) -> None:
    assert package_name(name) == derived
    if derived:
        validate("PluginManifest", manifest(derived))
        jsonschema.validate(derived, _schema()["$defs"]["Plugin"]["properties"]["name"])


# -- what a turn gets ------------------------------------------------------------------------


def _turn_parts(http: TestClient, harness_id: str) -> Any:
    app = ctx(http)
    row = app.db.run(get_harness, principal_id(http), harness_id)
    return app.db.run(turn_parts, row.principal_id, HarnessConfig.from_stored(row.config), True)


def test_a_turn_gets_the_enabled_plugins_beside_the_harness_s_own(http: TestClient) -> None:
    servers = {"remote": SERVERS["remote"], "stamp": SERVERS["stamp"]}
    harness = install(
        http,
        {"files": package(servers=servers, extra=stamp_files(), description="Demo.")},
        {"files": package("resting-plugin", skills=("resting",)), "enabled": False},
        mcp_servers=[{"name": "own", "url": "https://mcp.example.com/mcp"}],
        skills=[skill()],
    )
    parts = _turn_parts(http, harness["id"])
    skills = {s.name: s for s in parts.skills}
    assert {"vault-manual", "demo-skill", "uhp-artifacts"} <= set(skills)
    assert "resting" not in skills
    assert skills["demo-skill"].plugin == "demo-plugin" and skills["vault-manual"].plugin is None
    assert {f.path for f in skills["demo-skill"].files} == {"SKILL.md", "references/notes.md"}
    assert [(t.name, t.url, t.headers) for t in parts.mcp_servers] == [
        ("own", "https://mcp.example.com/mcp", {}),
        ("remote", REMOTE, {"X-Team": "blue"}),
    ]
    (plugin,) = parts.plugins
    assert plugin.name == "demo-plugin" and plugin.description == "Demo."
    (stamp,) = plugin.stdio_servers
    assert (stamp.command, stamp.args, stamp.env) == (
        "./bin/stamp",
        ("--data", "${PLUGIN_DATA}/x"),
        (("MODE", "${PLUGIN_ROOT}"),),
    )
    runnable = {f.path for f in plugin.files if f.executable}
    assert runnable == {"bin/stamp"}
    assert base64.b64encode(BINARY).decode() in json.dumps(
        {f.path: base64.b64encode(f.data).decode() for f in plugin.files}
    )


# -- review of issue 26: a hostile tenant ------------------------------------------------------
def test_an_export_carries_no_credential_in_a_servers_url(http: TestClient) -> None:
    """Many hosted MCP servers take their key in the URL's query. The harness refuses
    credentials in a URL's user information, but keeps the query; an export that copies the
    URL whole sends the key wherever the package travels (Plugins §5: credentials entered for
    this harness never do)."""
    secret = "query-secret-7310"
    source = create(
        http,
        {
            "base": "codex",
            "mcp_servers": [
                {"name": "keyed", "url": f"https://mcp.example.com/mcp?api_key={secret}"},
                {"name": "tokened", "url": f"https://t.example.com/sse?x=1&token={secret}"},
            ],
        },
    )
    answer = http.get(f"/v1/harnesses/{source['id']}/plugin", headers=AUTH)
    assert answer.status_code == 200, answer.text
    assert secret not in answer.text
    skipped = {s["path"] for s in answer.json()["skipped"]}
    assert {"mcp.json#/mcpServers/keyed", "mcp.json#/mcpServers/tokened"} <= skipped


DEEP = "[" * 100_000 + "]" * 100_000  # JSON nested past any parser's recursion limit


@pytest.mark.parametrize(
    ("label", "files", "skipped_at"),
    [
        (
            "an MCP server whose type is an array",
            [text("mcp.json", mcp_config(s={"type": ["stdio"], "command": "x"}))],
            "mcp.json#/mcpServers/s",
        ),
        (
            "an MCP server whose type is an object",
            [text("mcp.json", mcp_config(s={"type": {}, "url": REMOTE}))],
            "mcp.json#/mcpServers/s",
        ),
        ("an mcp.json nested too deep", [text("mcp.json", DEEP)], "mcp.json"),
        (
            "front matter with an integer of 5000 digits",
            [text("skills/s/SKILL.md", f"---\nname: s\ndescription: d\nx: {'9' * 5000}\n---\n")],
            "skills/s",
        ),
        (
            "front matter nested too deep",
            [
                text(
                    "skills/s/SKILL.md",
                    f"---\nname: s\ndescription: d\nx: {'[' * 5000 + ']' * 5000}\n---\n",
                )
            ],
            "skills/s",
        ),
    ],
)
def test_hostile_package_content_is_skipped_never_a_server_error(
    http: TestClient, label: str, files: list[dict[str, Any]], skipped_at: str
) -> None:
    """What a package holds is its author's: each of these answered 500 (review of issue 26);
    an invalid component is skipped with its reason, the rest loads."""
    harness = install(http, {"files": [text("plugin.json", manifest()), *files]})
    (plugin,) = harness["plugins"]
    assert skipped_at in [s["path"] for s in plugin["skipped"]], label


def test_a_manifest_nested_too_deep_is_refused_never_a_server_error(http: TestClient) -> None:
    answer = http.post(
        "/v1/harnesses",
        json={"base": "codex", "plugins": [{"files": [text("plugin.json", DEEP)]}]},
        headers=AUTH,
    )
    refused(answer, "plugins[0].files", 422, "plugin_invalid")


def test_a_skills_note_survives_front_matter_pyyaml_cannot_build() -> None:
    """The harness's own skills are not parsed when written, so the standing note of Hermes
    and Qwen Code (skill_notes.py) meets any front matter at the start of a turn."""
    for front in ("x: " + "9" * 5000, "x: " + "[" * 5000 + "]" * 5000):
        skill_md = f"---\nname: s\ndescription: d\n{front}\n---\n".encode()
        assert skill_description(SkillBundle("s", (SkillFile("SKILL.md", skill_md),))) is None


def test_what_a_package_makes_the_server_keep_is_bounded_by_the_package(
    http: TestClient,
) -> None:
    """The harness row keeps what was derived, `skipped` included, and every read and every
    turn loads it. One entry per unknown manifest field (or invalid mcp.json server) makes a
    package of N bytes a row of about 6 N (measured: 1.5 MB, 9.4 MB); and a later write that
    names only the package's `blob` derives it again, so a request of a hundred bytes can
    store a hundred megabytes (review of issue 26)."""
    unknown: dict[str, Any] = {f"field{i}": 0 for i in range(20_000)}
    plugin_json = text("plugin.json", {**manifest(), **unknown})
    sent_bytes = len(plugin_json["content"])
    harness = install(http, {"files": [plugin_json]})
    row = ctx(http).db.run(get_harness, principal_id(http), harness["id"])
    kept = len(json.dumps(row.config))
    assert kept <= 2 * sent_bytes, (kept, sent_bytes)


def test_checking_one_principals_package_never_holds_another_principals_writes(
    http: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a package costs to check is what its author makes it cost: PyYAML parses front
    matter at about 80 KB/s here (a 400 KB SKILL.md took 5.3 s, a 20 MB package would take
    minutes), and JSON Schema walks every keyword. That work must not happen inside the unit
    of work every principal's writes queue behind (SQLite has one writer: harness edits, new
    tasks, the event log of every running turn), or one tenant stalls all of them meanwhile.
    Here the check is made to hang until another principal's write has answered."""
    from uhp_server.harnesses.plugins import install as plugin_install

    checking, release = threading.Event(), threading.Event()
    real_derive = plugin_install.derive

    def slow_derive(*args: Any, **kwargs: Any) -> Any:
        checking.set()
        release.wait(15)
        return real_derive(*args, **kwargs)

    monkeypatch.setattr(plugin_install, "derive", slow_derive)
    other = other_principal(http)
    with ThreadPoolExecutor(2) as pool:
        hostile = pool.submit(install, http, {"files": package()})
        try:
            assert checking.wait(10)
            meanwhile = pool.submit(
                http.post, "/v1/harnesses", json={"base": "codex"}, headers=other
            )
            wait([meanwhile], timeout=5)
            answered_meanwhile = meanwhile.done()
        finally:
            release.set()
        assert meanwhile.result().status_code == 200
        hostile.result()
    assert answered_meanwhile, "another principal's write waited for this package's check"
