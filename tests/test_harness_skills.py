"""Harness skills as whole folders: validation, size limits, bytes that round-trip, the
built-in skills every harness inherits. In-process, no agent CLI."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from storage import skills as skill_store
from storage.harnesses import get_harness
from tests.support.harness_api import (
    AUTH,
    BUILTINS,
    SKILL_MD,
    create,
    ctx,
    decode,
    folder,
    make_client,
    own_skills,
    principal_id,
    refused,
    skill,
)
from tests.support.schema import validate
from uhp_server.doors.uhp.wire import BUILTIN_SKILLS_FIELD
from uhp_server.harnesses import skills as skill_rules
from uhp_server.harnesses.builtin_skills import builtin_skills
from uhp_server.harnesses.runtime import turn_skills


@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    with make_client(tmp_path / "data") as client:
        yield client


# -- skills ---------------------------------------------------------------------------------

BAD_SKILLS = [
    ({"name": "s", "files": [{"path": "README.md", "content": "x"}]}, "skills[0].files"),
    (skill({"path": "../escape.md", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": "a/../../escape.md", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": "/etc/passwd", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": "..\\escape.md", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": "a\\..\\..\\x", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": "C:/x.md", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": "a\u0000b", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": "a\u202etxt.exe", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": "d\u2067ir/x.md", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": "", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": ".", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": 7, "content": "x"}), "skills[0].files[1].path"),
    (
        skill({"path": "a.md", "content": "x"}, {"path": "./a.md", "content": "y"}),
        "skills[0].files[2].path",
    ),
    (
        skill({"path": "Notes.md", "content": "x"}, {"path": "notes.md", "content": "y"}),
        "skills[0].files[2].path",
    ),
    (skill({"path": "SKILL.md", "content": "again"}), "skills[0].files[1].path"),
    (
        skill({"path": "ref", "content": "x"}, {"path": "ref/x.md", "content": "y"}),
        "skills[0].files[1].path",
    ),
    (skill({"path": "a.bin", "content": "x", "content_b64": "eA=="}), "skills[0].files[1]"),
    (skill({"path": "a.bin", "content_b64": "not base64!"}), "skills[0].files[1].content_b64"),
    (skill({"path": "a.txt", "content": 5}), "skills[0].files[1].content"),
    (skill({"path": "a.txt"}), "skills[0].files[1].content"),
    (skill("nope"), "skills[0].files[1]"),  # type: ignore[arg-type]  # refused: not an object
    ({"name": "s", "files": "SKILL.md"}, "skills[0].files"),
    ({"name": "s"}, "skills[0].files"),
    ({"name": "s", "content": "x", "files": []}, "skills[0].content"),
    ({"name": "s", "content": 3}, "skills[0].content"),
    ({"name": "s", "blob": "skb_unknown"}, "skills[0].blob"),
    ({"name": "s", "builtin": True}, "skills[0].builtin"),
    ({"name": "../evil", "content": "x"}, "skills[0].name"),
    ({"name": "", "content": "x"}, "skills[0].name"),
    ({"name": "a b", "content": "x"}, "skills[0].name"),
    ({"name": "s", "content": "x", "enabled": "yes"}, "skills[0].enabled"),
    ("SKILL.md", "skills[0]"),
]


@pytest.mark.parametrize(("entry", "param"), BAD_SKILLS)
def test_bad_skills_are_refused_at_configuration_time(
    http: TestClient, entry: Any, param: str
) -> None:
    refused(
        http.post("/v1/harnesses", json={"base": "codex", "skills": [entry]}, headers=AUTH), param
    )


def test_repeated_skill_names_and_builtin_edits_are_refused(http: TestClient) -> None:
    twice = [skill(), skill(name="Vault-Manual")]
    refused(
        http.post("/v1/harnesses", json={"base": "codex", "skills": twice}, headers=AUTH),
        "skills[1].name",
    )
    edit = {
        "name": "uhp-artifacts",
        "builtin": True,
        "files": [{"path": "SKILL.md", "content": "x"}],
    }
    refused(
        http.post("/v1/harnesses", json={"base": "codex", "skills": [edit]}, headers=AUTH),
        "skills[0].files",
    )


def test_size_limits_are_documented_and_enforced(http: TestClient) -> None:
    big = "x" * (skill_rules.MAX_FILE_BYTES + 1)
    error = refused(
        http.post(
            "/v1/harnesses",
            json={"base": "codex", "skills": [skill({"path": "big.txt", "content": big})]},
            headers=AUTH,
        ),
        "skills[0].files[1]",
    )
    assert error["detail"]["max_file_bytes"] == skill_rules.MAX_FILE_BYTES
    chunk = base64.b64encode(b"\0" * skill_rules.MAX_FILE_BYTES).decode()
    parts = [{"path": f"p{i}.bin", "content_b64": chunk} for i in range(3)]
    error = refused(
        http.post("/v1/harnesses", json={"base": "codex", "skills": [skill(*parts)]}, headers=AUTH),
        "skills[0].files",
    )
    assert error["detail"]["max_bundle_bytes"] == skill_rules.MAX_BUNDLE_BYTES
    many = [{"path": f"f{i}.md", "content": "x"} for i in range(skill_rules.MAX_FILES)]
    refused(
        http.post("/v1/harnesses", json={"base": "codex", "skills": [skill(*many)]}, headers=AUTH),
        "skills[0].files",
    )


def binary_bundle() -> tuple[dict[str, Any], dict[str, bytes]]:
    noise = os.urandom(4096) + b"\x00\xff\xfe\x80 not utf-8 \xc3\x28"
    text = "Grüße, ☃ — line\r\nendings\tkept\n\x00nul in text\n"
    script = "#!/bin/sh\necho helper\n"
    entry = skill(
        {"path": "references/codes.md", "content": text},
        {"path": "scripts/helper.sh", "content": script},
        {"path": "assets/deep/nested/logo.bin", "content_b64": base64.b64encode(noise).decode()},
        {"path": "assets/empty.bin", "content_b64": ""},
    )
    expected = {
        "SKILL.md": SKILL_MD.encode(),
        "references/codes.md": text.encode(),
        "scripts/helper.sh": script.encode(),
        "assets/deep/nested/logo.bin": noise,
        "assets/empty.bin": b"",
    }
    return entry, expected


def test_skill_bytes_survive_post_get_files_and_a_rename_round_trip(http: TestClient) -> None:
    entry, expected = binary_bundle()
    harness = create(http, {"name": "before", "base": "codex", "skills": [entry]})
    validate("Harness", harness)
    (own,) = own_skills(harness)
    assert own["blob"].startswith("skb_") and own["enabled"] is True
    # Small bundles come back inline, each file in the form it was sent.
    assert {f["path"]: decode(f) for f in own["files"]} == expected
    by_path = {f["path"]: f for f in own["files"]}
    assert "content_b64" in by_path["assets/deep/nested/logo.bin"]
    assert "content" in by_path["references/codes.md"]
    assert folder(http, harness["id"], "vault-manual") == expected

    fetched = http.get(f"/v1/harnesses/{harness['id']}", headers=AUTH).json()
    renamed = http.put(
        f"/v1/harnesses/{harness['id']}", json={**fetched, "name": "after"}, headers=AUTH
    ).json()
    assert renamed["name"] == "after"
    assert own_skills(renamed) == own_skills(fetched)
    assert folder(http, harness["id"], "vault-manual") == expected


def test_a_large_bundle_is_out_of_line_and_still_round_trips(http: TestClient) -> None:
    payload = os.urandom(skill_rules.INLINE_BYTES)
    entry = skill({"path": "data/blob.bin", "content_b64": base64.b64encode(payload).decode()})
    harness = create(http, {"base": "codex", "skills": [entry]})
    (own,) = own_skills(harness)
    assert all("content" not in f and "content_b64" not in f for f in own["files"])
    assert {f["path"]: f["size"] for f in own["files"]} == {
        "SKILL.md": len(SKILL_MD.encode()),
        "data/blob.bin": len(payload),
    }
    url = f"/v1/harnesses/{harness['id']}"
    # GET → PUT with a rename: the blob handle carries every byte.
    put = http.put(url, json={**harness, "name": "renamed"}, headers=AUTH)
    assert put.status_code == 200, put.text
    assert folder(http, harness["id"], "vault-manual")["data/blob.bin"] == payload
    # Add a file: listed files without content come from the blob, new ones are sent.
    edited = {**own, "files": [*own["files"], {"path": "notes.md", "content": "new"}]}
    put = http.put(url, json={**harness, "skills": [edited]}, headers=AUTH)
    assert put.status_code == 200, put.text
    files = folder(http, harness["id"], "vault-manual")
    assert files["data/blob.bin"] == payload and files["notes.md"] == b"new"
    # Dropping the handle but keeping content-less files is refused, never silently emptied.
    no_blob = {k: v for k, v in own.items() if k != "blob"}
    refused(
        http.put(url, json={**harness, "skills": [no_blob]}, headers=AUTH),
        "skills[0].files[0].content",
    )
    assert folder(http, harness["id"], "vault-manual")["data/blob.bin"] == payload


def test_a_folder_stored_by_a_write_at_the_same_moment_is_not_a_500(
    http: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two harness writes store one skill folder at once (side by side on PostgreSQL): both
    find its blobs and bundle missing, and their keys decide. The loser answers its harness,
    never a 500 (its failed insert must not end its transaction), with the same bytes."""
    payload = os.urandom(skill_rules.INLINE_BYTES)
    entry = skill({"path": "data/blob.bin", "content_b64": base64.b64encode(payload).decode()})
    first = create(http, {"base": "codex", "skills": [entry]})
    # The check misses the winner, as a check does whose transaction began before the
    # winner's commit: the inserts are what find it.
    monkeypatch.setattr(skill_store, "stored", lambda *_: False)
    second = create(http, {"base": "codex", "name": "second", "skills": [entry]})
    monkeypatch.undo()
    assert own_skills(second)[0]["blob"] == own_skills(first)[0]["blob"]
    assert folder(http, second["id"], "vault-manual")["data/blob.bin"] == payload


def test_harnesses_created_at_once_with_one_folder_are_all_created(http: TestClient) -> None:
    # A race for real on PostgreSQL (harness writes run side by side there), when the timing
    # lets it.
    payload = os.urandom(skill_rules.INLINE_BYTES)
    entry = skill({"path": "data/blob.bin", "content_b64": base64.b64encode(payload).decode()})
    body = {"base": "codex", "skills": [entry]}
    with ThreadPoolExecutor(4) as pool:
        answers = list(
            pool.map(lambda _: http.post("/v1/harnesses", json=body, headers=AUTH), range(4))
        )
    assert [a.status_code for a in answers] == [200] * 4, [a.text for a in answers]
    for answer in answers:
        assert folder(http, answer.json()["id"], "vault-manual")["data/blob.bin"] == payload


def test_content_is_shorthand_for_a_lone_skill_md(http: TestClient) -> None:
    harness = create(http, {"base": "codex", "skills": [{"name": "tiny", "content": SKILL_MD}]})
    assert folder(http, harness["id"], "tiny") == {"SKILL.md": SKILL_MD.encode()}
    missing = http.get(f"/v1/harnesses/{harness['id']}/skills/nope/files", headers=AUTH)
    refused(missing, "skill", 404, "uhpserver_skill_not_found")


def test_every_harness_inherits_the_builtin_skills_and_can_suppress_one(
    http: TestClient,
) -> None:
    assert set(BUILTINS) <= set(builtin_skills())
    plain = create(http, {"base": "codex"})
    # `skills` reports only what was written to it (Harnesses §4.4): nothing here. The
    # built-ins the harness inherits are listed apart, in this server's extension field.
    assert plain["skills"] == []
    inherited = {s["name"]: s for s in plain[BUILTIN_SKILLS_FIELD]}
    assert list(inherited) == list(builtin_skills())
    for name in BUILTINS:
        assert inherited[name]["builtin"] is True and inherited[name]["enabled"] is True
        files = folder(http, plain["id"], name)
        assert files["SKILL.md"].startswith(b"---\nname: " + name.encode())
        listed = {f["path"]: f["size"] for f in inherited[name]["files"]}
        assert listed == {path: len(data) for path, data in files.items()}
    assert "references/checklist.md" in folder(http, plain["id"], "uhp-artifacts")
    # A GET → PUT round trip of a harness that wrote no skills writes none.
    url = f"/v1/harnesses/{plain['id']}"
    assert http.put(url, json=plain, headers=AUTH).json() == plain

    suppression = {"name": "uhp-artifacts", "enabled": False}
    suppressed = create(http, {"base": "codex", "skills": [suppression]})
    # The suppression is what was written, so `skills` reports it.
    assert [(s["name"], s["enabled"], s["builtin"]) for s in suppressed["skills"]] == [
        ("uhp-artifacts", False, True)
    ]
    states = {s["name"]: s["enabled"] for s in suppressed[BUILTIN_SKILLS_FIELD]}
    assert states == {"uhp-artifacts": False, "workspace-hygiene": True}
    # A GET → PUT round trip keeps the suppression and changes nothing.
    again = http.put(f"/v1/harnesses/{suppressed['id']}", json=suppressed, headers=AUTH).json()
    assert again == suppressed

    db = ctx(http).db
    row = db.run(get_harness, principal_id(http), suppressed["id"])
    assert row is not None
    assert row.config["skills"] == [{"name": "uhp-artifacts", "enabled": False, "builtin": True}]
    names = [b.name for b in db.run(turn_skills, row.principal_id, row.config["skills"])]
    assert names == ["workspace-hygiene"]

    # A skill of the harness's own under a built-in's name replaces it for its turns.
    own = create(
        http, {"base": "codex", "skills": [{"name": "workspace-hygiene", "content": SKILL_MD}]}
    )
    row = db.run(get_harness, principal_id(http), own["id"])
    assert row is not None
    bundles = {b.name: b for b in db.run(turn_skills, row.principal_id, row.config["skills"])}
    assert set(bundles) == set(BUILTINS)
    # It is the harness's own, so `skills` lists it, and the built-in is no longer inherited.
    assert [s["name"] for s in own["skills"]] == ["workspace-hygiene"]
    assert [s["name"] for s in own[BUILTIN_SKILLS_FIELD]] == ["uhp-artifacts"]
    assert [f.data for f in bundles["workspace-hygiene"].files] == [SKILL_MD.encode()]
    assert len(bundles["uhp-artifacts"].files) == 2  # the whole folder, references included
