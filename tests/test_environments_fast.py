"""The Environments chapter in-process (Environments §2-§4, §8): the object, its files, imports,
builds and versions, retention, the harnesses that name it, runtimes, and every refusal; on a
small builder of the test's own that really writes into the version's folder (and fails, or
waits, on demand)."""

from __future__ import annotations

import asyncio
import io
import os
import stat
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm.attributes import set_committed_value

from storage import environments as env_store
from storage import keys as key_store
from storage.tables import EnvironmentRow, SessionRow
from storage.unit import Tx
from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.in_process import InProcess, in_process
from tests.support.schema import validate
from tests.support.waiting import wait_for
from uhp_server.environments import folders
from uhp_server.environments.builder import (
    BuildFailed,
    BuildProgress,
    BuildRequest,
    BuildResult,
    Package,
    Runtimes,
)
from uhp_server.environments.builds import STOPPED, BuildOrder
from uhp_server.environments.git_fetch import WATCH_SECONDS, Bounds, over_bounds, watch_folder
from uhp_server.environments.importing import ImportLimits


class WritingBuilder:
    """Writes what a real build would (a `.venv` with a file in it) into the version's folder;
    `fail` makes the next builds fail, `gate` holds them until it is set."""

    def __init__(self) -> None:
        self.fail = False
        self.gate: asyncio.Event | None = None
        self.requests: list[BuildRequest] = []
        self.seen_source: list[set[str]] = []

    async def build(self, request: BuildRequest, progress: BuildProgress) -> BuildResult:
        self.requests.append(request)
        self.seen_source.append(
            {p.relative_to(request.folder).as_posix() for p in request.folder.rglob("*")}
        )
        await progress.step("python packages", "Collecting demo\n")
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise BuildFailed("pip could not install demo", "Collecting demo\nERROR: no demo\n")
        (request.folder / ".venv").mkdir()
        (request.folder / ".venv" / "installed.txt").write_text(f"built {request.version}\n")
        return BuildResult((Package("pip", "demo", "1.0"),), "Collecting demo\nInstalled demo\n")

    def runtimes(self) -> Runtimes:
        return Runtimes(("3.11", "3.12"), "20", "Debian GNU/Linux 12 (bookworm)")


@pytest.fixture
def builder() -> WritingBuilder:
    return WritingBuilder()


@pytest.fixture
async def server(tmp_path: Path, provider: RunningProvider, builder: WritingBuilder):
    async with in_process(
        tmp_path / "data",
        provider.base_url,
        PROVIDER_KEY,
        builder=builder,
        environment_max_file_bytes=64 * 1024,
        environment_max_import_bytes=256 * 1024,
        environment_max_import_files=50,
        environment_keep_versions=2,
    ) as running:
        yield running


async def _create(server: InProcess, name: str = "Content Studio", **body: Any) -> dict[str, Any]:
    response = await server.client.post("/v1/environments", json={"name": name, **body})
    assert response.status_code == 200, response.text
    validate("Environment", response.json())
    return response.json()


async def _put(
    server: InProcess, eid: str, path: str, data: bytes, **headers: str
) -> httpx.Response:
    return await server.client.put(
        f"/v1/environments/{eid}/files/{path}", content=data, headers=headers
    )


async def _built(server: InProcess, eid: str) -> dict[str, Any]:
    """Starts a build and waits for its end; its record."""
    started = await server.client.post(f"/v1/environments/{eid}/build")
    assert started.status_code == 200, started.text
    assert started.json()["status"] == "building"  # at once, before the build ran
    version = started.json()["version"]
    await server.ctx.engine.environments.builds.wait(eid, version)
    record = (await server.client.get(f"/v1/environments/{eid}/builds/{version}")).json()
    validate("EnvironmentBuild", record)
    return record


async def _paths(server: InProcess, eid: str, files_only: bool = False) -> set[str]:
    """The source tree's paths, as its listing gives them (its files only, or with folders)."""
    listing = await server.client.get(f"/v1/environments/{eid}/files")
    return {e["path"] for e in listing.json()["entries"] if not (files_only and e["dir"])}


def _error(response: httpx.Response) -> str:
    return response.json()["error"]["code"]


def _other_key(server: InProcess) -> dict[str, str]:
    _, key = server.ctx.db.run(key_store.create_key, "other-principal")
    return {"Authorization": f"Bearer {key}"}


def _zip(members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, target)
    return buffer.getvalue()


def _tar(
    members: dict[str, bytes], links: dict[str, str] | None = None, mode: str = "w:gz"
) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as archive:  # type: ignore[call-overload]
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            archive.addfile(info)
    return buffer.getvalue()


# -- the object ------------------------------------------------------------------------------
async def test_a_new_environment_is_empty_at_a_mount_fixed_by_its_first_name(server):
    created = await _create(server, "Content Studio", description="d", entry="python3 run.py")
    assert created["id"].startswith("henv_") and created["object"] == "environment"
    assert (created["slug"], created["mount"]) == ("content-studio", "/env/content-studio")
    assert created["status"] == "empty" and created["version"] is None
    assert created["build"] is None and created["versions"] == []
    assert created["files"] == {"count": 0, "bytes": 0}
    renamed = await server.client.put(
        f"/v1/environments/{created['id']}", json={"name": "Teaser Factory"}
    )
    assert renamed.status_code == 200
    assert renamed.json()["name"] == "Teaser Factory"
    assert renamed.json()["slug"] == "content-studio"  # fixed for life
    assert renamed.json()["entry"] == "python3 run.py"  # left out: unchanged
    listed = (await server.client.get("/v1/environments")).json()
    validate("EnvironmentList", listed)
    assert [e["id"] for e in listed["environments"]] == [created["id"]]


@pytest.mark.parametrize("name", ["", "  ", "-leading", "!!!", "_x", 7])
async def test_a_name_that_yields_no_path_segment_or_starts_badly_is_invalid(server, name):
    response = await server.client.post("/v1/environments", json={"name": name})
    assert response.status_code == 422 and _error(response) == "environment_invalid"


async def test_a_slug_already_taken_is_environment_exists_but_not_across_principals(server):
    await _create(server, "Content Studio")
    again = await server.client.post("/v1/environments", json={"name": "content--studio!"})
    assert again.status_code == 409 and _error(again) == "environment_exists"
    theirs = await server.client.post(
        "/v1/environments", json={"name": "Content Studio"}, headers=_other_key(server)
    )
    assert theirs.status_code == 200  # a principal's own mount paths


async def test_a_create_that_loses_the_race_for_its_slug_is_environment_exists(server, monkeypatch):
    """Two replicas create one slug at once: both checks find it free, the unique index
    decides. The loser answers environment_exists, never a 500 (its failed insert must not end
    its transaction, on PostgreSQL aborted by it), and the server writes on."""
    await _create(server, "Content Studio")
    # The check misses the winner, as a check does whose transaction began before the
    # winner's commit: the insert is what finds it.
    monkeypatch.setattr(env_store, "slug_taken", lambda *_: False)
    lost = await server.client.post("/v1/environments", json={"name": "Content Studio"})
    assert lost.status_code == 409 and _error(lost) == "environment_exists", lost.text
    assert (await server.client.post("/v1/environments", json={"name": "Other"})).status_code == 200
    listed = (await server.client.get("/v1/environments")).json()["environments"]
    assert sorted(e["slug"] for e in listed) == ["content-studio", "other"]


async def test_declared_packages_read_back_with_name_and_version_and_bad_specs_are_refused(server):
    created = await _create(
        server,
        packages={
            "pip": ["moviepy==2.1.1", "requests>=2"],
            "npm": ["sharp@0.33.5", "@scope/x"],
            "apt": ["ffmpeg"],
        },
        runtime={"python": "3.12"},
    )
    assert created["declared"]["pip"] == [
        {"spec": "moviepy==2.1.1", "name": "moviepy", "version": "2.1.1"},
        {"spec": "requests>=2", "name": "requests", "version": ""},
    ]
    assert created["declared"]["npm"][0] == {
        "spec": "sharp@0.33.5",
        "name": "sharp",
        "version": "0.33.5",
    }
    assert created["declared"]["npm"][1]["name"] == "@scope/x"
    assert created["declared"]["apt"] == [{"spec": "ffmpeg", "name": "ffmpeg", "version": ""}]
    assert created["runtime"] == {"python": "3.12"}
    eid = created["id"]
    for body in (
        {"packages": {"pip": ["--index-url=http://evil"]}},
        {"packages": {"pip": ["git+https://x/y"]}},
        {"packages": {"npm": ["file:../x"]}},
        {"packages": {"apt": ["ffmpeg; rm -rf /"]}},
        {"packages": {"cargo": ["serde"]}},
        {"runtime": {"python": "2.7"}},
    ):
        refused = await server.client.put(f"/v1/environments/{eid}", json=body)
        assert refused.status_code == 422 and _error(refused) == "environment_invalid", body
    kept = (await server.client.get(f"/v1/environments/{eid}")).json()
    assert kept["declared"] == created["declared"] and kept["runtime"] == {"python": "3.12"}


async def test_another_principals_environment_is_not_found_on_every_route(server):
    eid = (await _create(server))["id"]
    await _put(server, eid, "a.txt", b"a")
    await _built(server, eid)
    other = _other_key(server)
    routes = [
        ("GET", f"/v1/environments/{eid}", None),
        ("PUT", f"/v1/environments/{eid}", {"name": "x"}),
        ("DELETE", f"/v1/environments/{eid}", None),
        ("GET", f"/v1/environments/{eid}/files", None),
        ("GET", f"/v1/environments/{eid}/files/a.txt", None),
        ("PUT", f"/v1/environments/{eid}/files/b.txt", b"b"),
        ("DELETE", f"/v1/environments/{eid}/files/a.txt", None),
        ("POST", f"/v1/environments/{eid}/directories", {"path": "d"}),
        ("POST", f"/v1/environments/{eid}/import", _zip({"x": b"x"})),
        ("POST", f"/v1/environments/{eid}/build", None),
        ("GET", f"/v1/environments/{eid}/builds/1", None),
        ("GET", f"/v1/environments/{eid}/versions", None),
        ("POST", f"/v1/environments/{eid}/versions/1/activate", None),
        ("GET", f"/v1/environments/{eid}/harnesses", None),
    ]
    for method, url, body in routes:
        kwargs: dict[str, Any] = {"headers": other}
        if isinstance(body, dict):
            kwargs["json"] = body
        elif isinstance(body, bytes):
            kwargs["content"] = body
        response = await server.client.request(method, url, **kwargs)
        assert response.status_code == 404, (method, url, response.text)
        assert _error(response) == "environment_not_found", (method, url)
    listed = (await server.client.get("/v1/environments", headers=other)).json()
    assert listed["environments"] == []
    mine = await server.client.get(f"/v1/environments/{eid}/files/a.txt")
    assert mine.content == b"a"  # untouched


# -- files -----------------------------------------------------------------------------------
async def test_files_go_in_by_path_and_come_back_byte_for_byte(server):
    eid = (await _create(server))["id"]
    body = bytes(range(256)) * 10
    put = await _put(server, eid, "probe/nested/blob.bin", body)
    assert put.status_code == 200 and put.json() == {
        "path": "probe/nested/blob.bin",
        "bytes": 2560,
        "dir": False,
    }
    got = await server.client.get(f"/v1/environments/{eid}/files/probe/nested/blob.bin")
    assert got.status_code == 200 and got.content == body
    await _put(server, eid, "run.py", b"print(1)\n")
    assert (
        (await server.client.get(f"/v1/environments/{eid}/files/run.py"))
        .headers["content-type"]
        .startswith("text/x-python")
    )
    made = await server.client.post(
        f"/v1/environments/{eid}/directories", json={"path": "assets/brand"}
    )
    assert made.json() == {"path": "assets/brand", "dir": True}
    tree = (await server.client.get(f"/v1/environments/{eid}/files")).json()
    validate("EnvironmentFileList", tree)
    kinds = {entry["path"]: entry["dir"] for entry in tree["entries"]}
    assert kinds == {
        "assets": True, "assets/brand": True, "probe": True, "probe/nested": True,
        "probe/nested/blob.bin": False, "run.py": False,
    }  # fmt: skip
    assert (tree["count"], tree["bytes"]) == (2, 2560 + 9)
    assert (await server.client.get(f"/v1/environments/{eid}")).json()["files"] == {
        "count": 2,
        "bytes": 2569,
    }
    removed = await server.client.delete(f"/v1/environments/{eid}/files/probe")
    assert removed.json() == {"path": "probe", "deleted": True}
    paths = await _paths(server, eid)
    assert paths == {"assets", "assets/brand", "run.py"}
    gone = await server.client.delete(f"/v1/environments/{eid}/files/probe")
    assert gone.status_code == 404
    assert (await server.client.get(f"/v1/environments/{eid}/files/nothing")).status_code == 404


@pytest.mark.parametrize(
    "raw_path",
    [
        "..%2Fescape.txt",
        "a/..%2F..%2Fescape.txt",
        "%2Fetc%2Fpasswd",
        "a/.%2Fb",
        "a//b",
        "a%5C..%5Cb",
        "a%00b",
    ],
)
async def test_a_path_that_escapes_the_root_is_refused_and_nothing_lands(
    server, tmp_path, raw_path
):
    eid = (await _create(server))["id"]
    response = await server.client.put(f"/v1/environments/{eid}/files/{raw_path}", content=b"no")
    assert response.status_code == 422 and _error(response) == "environment_invalid", response.text
    environments = tmp_path / "data" / "environments"
    assert not list((environments / eid / "source").rglob("*"))
    assert (
        not (environments / "escape.txt").exists()
        and not (environments / eid / "escape.txt").exists()
    )


async def test_a_link_in_the_source_is_neither_read_nor_followed(server, tmp_path):
    eid = (await _create(server))["id"]
    source = tmp_path / "data" / "environments" / eid / "source"
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    os.symlink(secret, source / "link.txt")
    os.symlink(tmp_path, source / "linkdir")
    read = await server.client.get(f"/v1/environments/{eid}/files/link.txt")
    assert read.status_code == 422 and _error(read) == "environment_invalid"
    through = await _put(server, eid, "linkdir/x.txt", b"x")
    assert through.status_code == 422 and not (tmp_path / "x.txt").exists()
    over = await _put(server, eid, "link.txt", b"overwritten")
    assert over.status_code == 422 and secret.read_text() == "host secret"
    tree = (await server.client.get(f"/v1/environments/{eid}/files")).json()
    assert tree["entries"] == []  # links are not listed either


async def test_an_oversized_file_is_refused_with_its_limit_and_nothing_is_kept(server, tmp_path):
    eid = (await _create(server))["id"]
    limit = 64 * 1024
    exact = await _put(server, eid, "exact.bin", b"x" * limit)
    assert exact.status_code == 200

    async def chunks():  # no declared length: refused where the limit is passed
        for _ in range(20):
            yield b"y" * 8192

    streamed = await server.client.put(f"/v1/environments/{eid}/files/big.bin", content=chunks())
    assert streamed.status_code == 413 and _error(streamed) == "file_too_large"
    assert streamed.json()["error"]["detail"]["max_bytes"] == limit
    declared = await _put(server, eid, "big.bin", b"z" * (limit + 1))
    assert declared.status_code == 413 and declared.json()["error"]["detail"]["max_bytes"] == limit
    assert (await server.client.get(f"/v1/environments/{eid}/files/big.bin")).status_code == 404
    incoming = tmp_path / "data" / "environments" / eid / "incoming"
    assert not list(incoming.iterdir())  # no partial file left behind


async def test_a_file_cannot_replace_a_directory_nor_a_directory_a_file(server):
    eid = (await _create(server))["id"]
    await _put(server, eid, "d/f.txt", b"f")
    assert (await _put(server, eid, "d", b"x")).status_code == 422
    under_file = await _put(server, eid, "d/f.txt/g", b"x")
    assert under_file.status_code == 422
    made = await server.client.post(f"/v1/environments/{eid}/directories", json={"path": "d/f.txt"})
    assert made.status_code == 422 and _error(made) == "environment_invalid"


# -- imports ---------------------------------------------------------------------------------
async def test_a_zip_import_strips_its_wrapping_directory_and_drops_links_and_escapes(
    server, tmp_path
):
    eid = (await _create(server))["id"]
    archive = _zip(
        {
            "project-main/run.py": b"print('hi')\n",
            "project-main/data/a.txt": b"a",
            "project-main/../evil.txt": b"e",
            "/abs.txt": b"abs",
        },
        links={"project-main/passwd": "/etc/passwd"},
    )  # fmt: skip
    response = await server.client.post(
        f"/v1/environments/{eid}/import",
        content=archive,
        headers={"Content-Type": "application/zip"},
    )
    assert response.status_code == 200, response.text
    validate("EnvironmentImportResult", response.json())
    assert response.json() | {"object": None} == {
        "object": None, "written": 2, "skipped": 3, "count": 2, "bytes": 13
    }  # fmt: skip
    paths = await _paths(server, eid)
    assert paths == {"run.py", "data", "data/a.txt"}
    assert not (tmp_path / "data" / "environments" / eid / "evil.txt").exists()


async def test_a_gzipped_tar_lands_over_the_source_or_replaces_it(server):
    eid = (await _create(server))["id"]
    await _put(server, eid, "keep.txt", b"k")
    await _put(server, eid, "run.py", b"old")
    tar = _tar(
        {"run.py": b"new", "lib/x.py": b"x", "../../up.txt": b"u"}, links={"lib/l": "../../../etc"}
    )
    over = await server.client.post(f"/v1/environments/{eid}/import", content=tar)
    assert over.status_code == 200 and over.json()["skipped"] == 2 and over.json()["written"] == 2
    files = await _paths(server, eid, files_only=True)
    assert files == {"keep.txt", "run.py", "lib/x.py"}  # two top-level names: nothing stripped
    assert (await server.client.get(f"/v1/environments/{eid}/files/run.py")).content == b"new"
    replaced = await server.client.post(
        f"/v1/environments/{eid}/import?replace=1", content=_tar({"only.txt": b"o"}, mode="w")
    )
    assert replaced.status_code == 200 and replaced.json()["count"] == 1
    files = await _paths(server, eid)
    assert files == {"only.txt"}


async def test_an_import_over_a_limit_or_not_an_archive_is_refused_and_changes_nothing(server):
    eid = (await _create(server))["id"]
    await _put(server, eid, "keep.txt", b"k")
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a.bin", b"\0" * (60 * 1024))
        archive.writestr("b.bin", b"\0" * (60 * 1024))
        archive.writestr("c.bin", b"\0" * (60 * 1024))
        archive.writestr("d.bin", b"\0" * (60 * 1024))
        archive.writestr("e.bin", b"\0" * (60 * 1024))
    assert len(bomb.getvalue()) < 4096  # small as sent, large as extracted
    refused = await server.client.post(
        f"/v1/environments/{eid}/import?replace=1", content=bomb.getvalue()
    )
    assert refused.status_code == 413 and _error(refused) == "file_too_large"
    assert refused.json()["error"]["detail"]["max_bytes"] == 256 * 1024
    one_big = _zip({"big.bin": b"\0" * (64 * 1024 + 1)})
    assert (
        await server.client.post(f"/v1/environments/{eid}/import", content=one_big)
    ).status_code == 413
    many = _zip({f"f{n}.txt": b"x" for n in range(51)})
    too_many = await server.client.post(f"/v1/environments/{eid}/import", content=many)
    assert too_many.status_code == 413 and too_many.json()["error"]["detail"]["max_files"] == 50
    junk = await server.client.post(
        f"/v1/environments/{eid}/import", content=b"not an archive at all"
    )
    assert junk.status_code == 422 and _error(junk) == "environment_invalid"
    files = await _paths(server, eid)
    assert files == {"keep.txt"}


async def test_a_git_import_refuses_hosts_off_the_allow_list_and_other_schemes(server):
    eid = (await _create(server))["id"]
    for git, words in (
        ({"url": "https://github.com/example/project"}, "allow-list"),
        ({"url": "http://github.com/example/project"}, "https"),
        ({"url": "file:///etc"}, "http"),
        ({"url": "ext::sh -c touch% /tmp/pwned"}, ""),
        ({"url": "https://user:pw@github.com/x"}, "zip or tar body"),
        ({"url": "https://token@github.com/x"}, "must not carry credentials"),
        ({"url": "https://github.com/x", "ref": "--upload-pack=evil"}, "ref"),
        ({"url": "https://github.com/x", "ref": "../x"}, "ref"),
    ):
        response = await server.client.post(f"/v1/environments/{eid}/import", json={"git": git})
        assert response.status_code == 422 and _error(response) == "environment_invalid", git
        assert words in response.json()["error"]["message"], response.json()
    assert not Path("/tmp/pwned").exists()
    neither = await server.client.post(f"/v1/environments/{eid}/import", json={"zip": "x"})
    assert neither.status_code == 422 and _error(neither) == "environment_invalid"


async def test_a_path_longer_than_a_file_system_takes_is_invalid_on_every_route(server):
    eid = (await _create(server))["id"]
    long_segment = "a" * 256
    long_path = "/".join(["b" * 200] * 6)  # every segment fits, the whole does not
    for path in (long_segment, f"dir/{long_segment}", long_path, "é" * 128):
        put = await _put(server, eid, path, b"x")
        assert put.status_code == 422 and _error(put) == "environment_invalid", path
        assert "longer than" in put.json()["error"]["message"]
        got = await server.client.get(f"/v1/environments/{eid}/files/{path}")
        assert got.status_code == 422 and _error(got) == "environment_invalid", path
        gone = await server.client.delete(f"/v1/environments/{eid}/files/{path}")
        assert gone.status_code == 422 and _error(gone) == "environment_invalid", path
        made = await server.client.post(f"/v1/environments/{eid}/directories", json={"path": path})
        assert made.status_code == 422 and _error(made) == "environment_invalid", path
    fits = "c" * 255
    assert (await _put(server, eid, fits, b"x")).status_code == 200


async def test_a_storage_error_is_environment_unavailable_not_a_500(server, monkeypatch):
    eid = (await _create(server))["id"]
    assert (await _put(server, eid, "a.txt", b"x")).status_code == 200

    def failing(*_args: Any, **_kwargs: Any) -> Any:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "lstat", failing)
    got = await server.client.get(f"/v1/environments/{eid}/files/a.txt")
    monkeypatch.undo()
    assert got.status_code == 502 and _error(got) == "environment_unavailable"
    assert "Input/output error" in got.json()["error"]["message"]


def _damaged_zips() -> dict[str, bytes]:
    data = b"hello, environment " * 200
    stored = _zip({"a.txt": data})
    bad_crc = stored.replace(data[:19], b"HELLO, ENVIRONMENT ", 1)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a.txt", data)
    deflated = buffer.getvalue()
    header = deflated.index(b"PK\x03\x04")
    start = header + 30 + len("a.txt")
    corrupt_deflate = deflated[:start] + b"\xff" * 16 + deflated[start + 16 :]
    # The encrypted flag (bit 0 of the general purpose flags) in both headers.
    encrypted = bytearray(stored)
    encrypted[6] |= 1
    central = bytes(encrypted).index(b"PK\x01\x02")
    encrypted[central + 8] |= 1
    # An unknown compression method (99) in both headers.
    unknown = bytearray(stored)
    unknown[8:10] = (99).to_bytes(2, "little")
    unknown[central + 10 : central + 12] = (99).to_bytes(2, "little")
    return {
        "bad crc": bad_crc,
        "corrupt deflate": corrupt_deflate,
        "encrypted": bytes(encrypted),
        "unknown method": bytes(unknown),
        "truncated": deflated[: len(deflated) // 2] + deflated[-22:],
    }


@pytest.mark.parametrize("damage", list(_damaged_zips()))
async def test_a_damaged_zip_is_invalid_and_changes_nothing(server, damage):
    eid = (await _create(server))["id"]
    await _put(server, eid, "keep.txt", b"k")
    body = _damaged_zips()[damage]
    assert zipfile.is_zipfile(io.BytesIO(body)), damage  # a zip, damaged: not "neither"
    refused = await server.client.post(f"/v1/environments/{eid}/import?replace=1", content=body)
    assert refused.status_code == 422 and _error(refused) == "environment_invalid", refused.text
    message = refused.json()["error"]["message"]
    assert "zip archive cannot be read" in message and "neither" not in message
    entries = (await server.client.get(f"/v1/environments/{eid}/files")).json()["entries"]
    assert [e["path"] for e in entries] == ["keep.txt"]


async def test_an_over_long_member_name_or_a_damaged_tar_is_invalid_and_says_so(server):
    eid = (await _create(server))["id"]
    for body in (_zip({"x" * 300: b"1"}), _tar({"y" * 300: b"1"})):
        refused = await server.client.post(f"/v1/environments/{eid}/import", content=body)
        assert refused.status_code == 422 and _error(refused) == "environment_invalid"
        assert "longer than this server takes" in refused.json()["error"]["message"]
    whole = _tar({"a.txt": os.urandom(20_000)}, mode="w:gz")
    truncated = whole[: len(whole) // 2]
    refused = await server.client.post(f"/v1/environments/{eid}/import", content=truncated)
    assert refused.status_code == 422 and _error(refused) == "environment_invalid"
    assert "tar archive cannot be read" in refused.json()["error"]["message"]
    assert (await server.client.get(f"/v1/environments/{eid}/files")).json()["entries"] == []


async def test_a_version_number_past_any_is_not_found(server):
    eid = (await _create(server))["id"]
    for version in ("99999999999999999999999", "0", "-1", str(2**63)):
        got = await server.client.get(f"/v1/environments/{eid}/builds/{version}")
        assert got.status_code == 404, (version, got.text)
        made = await server.client.post(f"/v1/environments/{eid}/versions/{version}/activate")
        assert made.status_code == 404, (version, made.text)


def test_the_clone_watch_stops_a_folder_at_its_bytes_or_its_entries(tmp_path: Path) -> None:
    limits = ImportLimits(max_file_bytes=1000, max_bytes=10_000, max_files=10)
    bounds = Bounds.of(limits)
    folder = tmp_path / "repository"
    assert over_bounds(folder, bounds) is None  # not made yet
    folder.mkdir()
    (folder / "a.bin").write_bytes(b"x" * 9_000)
    assert over_bounds(folder, bounds) is None
    (folder / "deep").mkdir()
    (folder / "deep" / "b.bin").write_bytes(b"x" * 1_001)
    over = over_bounds(folder, bounds)
    assert over is not None and over.max_bytes == 10_000 and over.max_files is None
    sparse = tmp_path / "sparse"
    sparse.mkdir()
    with open(sparse / "holes.bin", "wb") as holes:
        holes.truncate(20_000)  # no block written, its size counted all the same
    assert over_bounds(sparse, bounds) is not None
    empty = tmp_path / "empty-files"
    empty.mkdir()
    for n in range(bounds.entries):
        (empty / f"f{n}").touch()
    assert over_bounds(empty, bounds) is None
    (empty / "one-more").touch()
    over = over_bounds(empty, bounds)
    assert over is not None and over.max_files == 10


async def test_the_clone_watch_notices_a_folder_that_grows(tmp_path: Path) -> None:
    bounds = Bounds.of(ImportLimits(max_file_bytes=10, max_bytes=1_000_000, max_files=5))
    folder = tmp_path / "repository"
    folder.mkdir()
    watch = asyncio.create_task(watch_folder(folder, bounds))
    for n in range(bounds.entries):
        (folder / f"f{n}").touch()
    await asyncio.sleep(3 * WATCH_SECONDS)
    assert not watch.done()
    started = time.monotonic()
    (folder / "one-more").touch()
    over = await asyncio.wait_for(watch, timeout=5)
    assert over.max_files == 5
    assert time.monotonic() - started < 1.0  # within a few looks, not one every half second


@pytest.fixture
async def small_share(tmp_path: Path, provider: RunningProvider, builder: WritingBuilder):
    async with in_process(
        tmp_path / "data",
        provider.base_url,
        PROVIDER_KEY,
        builder=builder,
        environment_max_file_bytes=64 * 1024,
        environment_max_per_principal=2,
        environment_max_source_bytes_per_principal=100 * 1024,
        environment_max_source_files_per_principal=6,
        environment_max_concurrent_imports=1,
    ) as running:
        yield running


async def test_one_principal_keeps_at_most_its_share_of_environments_files_and_bytes(
    small_share,
):
    server = small_share
    first = (await _create(server, "One"))["id"]
    second = (await _create(server, "Two"))["id"]
    third = await server.client.post("/v1/environments", json={"name": "Three"})
    assert third.status_code == 422 and _error(third) == "environment_invalid"
    assert third.json()["error"]["detail"]["max_environments"] == 2
    other = await server.client.post(
        "/v1/environments", json={"name": "Three"}, headers=_other_key(server)
    )
    assert other.status_code == 200  # another principal's share is its own
    assert (await _put(server, first, "a.bin", b"x" * 60 * 1024)).status_code == 200
    over = await _put(server, second, "b.bin", b"x" * 50 * 1024)
    assert over.status_code == 413 and _error(over) == "file_too_large"
    assert over.json()["error"]["detail"]["max_bytes"] == 100 * 1024
    replacing = await _put(server, first, "a.bin", b"y" * 64 * 1024)  # replaces, not adds
    assert replacing.status_code == 200
    listed = (await server.client.get(f"/v1/environments/{second}/files")).json()
    assert listed["entries"] == []  # nothing landed
    # An import counts what it would add; with replace, what it would leave.
    adds = _zip({"c.bin": b"z" * 40 * 1024})
    refused = await server.client.post(f"/v1/environments/{first}/import", content=adds)
    assert refused.status_code == 413 and _error(refused) == "file_too_large"
    taken = await server.client.post(f"/v1/environments/{first}/import?replace=1", content=adds)
    assert taken.status_code == 200, taken.text
    assert taken.json()["bytes"] == 40 * 1024
    many = _zip({f"f{n}.txt": b"x" for n in range(6)})
    too_many = await server.client.post(f"/v1/environments/{second}/import", content=many)
    assert too_many.status_code == 413 and too_many.json()["error"]["detail"]["max_files"] == 6
    five = _zip({f"f{n}.txt": b"x" for n in range(5)})
    assert (
        await server.client.post(f"/v1/environments/{second}/import", content=five)
    ).status_code == 200
    sixth = await _put(server, second, "f0.txt", b"again")  # replaces: still 6 files
    assert sixth.status_code == 200
    seventh = await _put(server, second, "new.txt", b"1")
    assert seventh.status_code == 413 and seventh.json()["error"]["detail"]["max_files"] == 6


async def test_an_import_while_another_runs_is_environment_busy(small_share):
    server = small_share
    first = (await _create(server, "One"))["id"]
    second = (await _create(server, "Two"))["id"]
    sending = asyncio.Event()
    release = asyncio.Event()

    async def slow_body():
        yield _zip({"a.txt": b"a"})[:10]
        sending.set()
        await release.wait()
        yield b""

    held = asyncio.create_task(
        server.client.post(f"/v1/environments/{first}/import", content=slow_body())
    )
    await asyncio.wait_for(sending.wait(), 5)
    for eid, words in ((first, "into this environment"), (second, "as many as it allows")):
        refused = await server.client.post(
            f"/v1/environments/{eid}/import", content=_zip({"b.txt": b"b"})
        )
        assert refused.status_code == 409 and _error(refused) == "environment_busy"
        assert words in refused.json()["error"]["message"]
    release.set()
    assert (await held).status_code == 422  # a truncated zip; the slot is free again
    after = await server.client.post(
        f"/v1/environments/{second}/import", content=_zip({"b.txt": b"b"})
    )
    assert after.status_code == 200, after.text


# -- builds and versions -------------------------------------------------------------------
async def test_a_build_snapshots_the_source_becomes_active_and_is_read_only(
    server, builder, tmp_path
):
    eid = (await _create(server, packages={"pip": ["demo==1.0"]}, runtime={"python": "3.11"}))["id"]
    await _put(server, eid, "run.py", b"print(1)\n")
    await _put(server, eid, "node_modules/left/index.js", b"laptop's")
    await _put(server, eid, ".venv/bin/python", b"laptop's")
    record = await _built(server, eid)
    assert record["status"] == "ready" and record["stage"] == ""
    assert record["packages"] == [{"manager": "pip", "name": "demo", "version": "1.0"}]
    assert "Installed demo" in record["log"] and record["files"] == 1
    (request,) = builder.requests
    assert request.mount == "/env/content-studio" and request.python == "3.11"
    assert request.declared.pip == ("demo==1.0",)
    assert builder.seen_source[0] == {"run.py"}  # dependency folders left out
    environment = (await server.client.get(f"/v1/environments/{eid}")).json()
    validate("Environment", environment)
    assert (environment["status"], environment["version"], environment["latestVersion"]) == (
        "ready",
        1,
        1,
    )
    assert environment["packages"] == record["packages"]
    folder = tmp_path / "data" / "environments" / eid / "versions" / "1"
    assert (folder / ".venv" / "installed.txt").read_text() == "built 1\n"
    for path in [folder, *folder.rglob("*")]:
        assert not os.lstat(path).st_mode & 0o222, path  # no write bit anywhere
    versions = (await server.client.get(f"/v1/environments/{eid}/versions")).json()
    assert versions["active"] == 1 and [v["version"] for v in versions["versions"]] == [1]


async def test_the_record_says_building_with_its_stage_while_it_runs_and_a_second_is_busy(
    server, builder
):
    eid = (await _create(server))["id"]
    builder.gate = asyncio.Event()
    first = await server.client.post(f"/v1/environments/{eid}/build")
    assert first.status_code == 200

    async def stage() -> str | None:
        record = (await server.client.get(f"/v1/environments/{eid}/builds/1")).json()
        return record["stage"] if record["stage"] == "python packages" else None

    await wait_for(stage)
    record = (await server.client.get(f"/v1/environments/{eid}/builds/1")).json()
    assert record["status"] == "building" and record["log"] == "Collecting demo\n"
    environment = (await server.client.get(f"/v1/environments/{eid}")).json()
    assert (
        environment["status"] == "building" and environment["build"]["stage"] == "python packages"
    )
    second = await server.client.post(f"/v1/environments/{eid}/build")
    assert second.status_code == 409 and _error(second) == "environment_busy"
    deleting = await server.client.delete(f"/v1/environments/{eid}")
    assert deleting.status_code == 409 and _error(deleting) == "environment_busy"
    builder.gate.set()
    await server.ctx.engine.environments.builds.wait(eid, 1)
    assert (await server.client.get(f"/v1/environments/{eid}")).json()["status"] == "ready"


async def test_a_build_that_loses_the_race_for_its_number_is_environment_busy(
    server, builder, monkeypatch
):
    """Two replicas start a build of one environment at once: both read the same latest
    version and find no build running, the version's key decides. The loser answers
    environment_busy, never a 500 (its failed insert must not end its transaction)."""
    eid = (await _create(server))["id"]
    builder.gate = asyncio.Event()
    first = await server.client.post(f"/v1/environments/{eid}/build")
    assert first.status_code == 200 and first.json()["version"] == 1
    running = env_store.building_version

    def read_before_the_winner_committed(tx: Tx, environment_id: str) -> int | None:
        # What the loser read in its transaction, begun before the winner's commit: no
        # build running, and the latest version the one before the winner's.
        environment = tx.orm.get(EnvironmentRow, environment_id)
        assert environment is not None and environment.latest_version == 1
        set_committed_value(environment, "latest_version", 0)  # as read, not as changed
        return None

    monkeypatch.setattr(env_store, "building_version", read_before_the_winner_committed)
    lost = await server.client.post(f"/v1/environments/{eid}/build")
    monkeypatch.setattr(env_store, "building_version", running)
    assert lost.status_code == 409 and _error(lost) == "environment_busy", lost.text
    builder.gate.set()
    await server.ctx.engine.environments.builds.wait(eid, 1)
    environment = (await server.client.get(f"/v1/environments/{eid}")).json()
    assert environment["status"] == "ready" and environment["version"] == 1
    assert (await _built(server, eid))["version"] == 2  # the loser took no number


async def test_builds_started_at_once_are_one_build_and_the_rest_busy(server, builder):
    # A race for real on PostgreSQL (writes run side by side there), when the timing lets it.
    eid = (await _create(server))["id"]
    builder.gate = asyncio.Event()
    answers = await asyncio.gather(
        *(server.client.post(f"/v1/environments/{eid}/build") for _ in range(4))
    )
    codes = sorted(a.status_code for a in answers)
    assert codes == [200, 409, 409, 409], [a.text for a in answers]
    assert all(_error(a) == "environment_busy" for a in answers if a.status_code == 409)
    builder.gate.set()
    await server.ctx.engine.environments.builds.wait(eid, 1)
    versions = (await server.client.get(f"/v1/environments/{eid}/versions")).json()
    assert [v["version"] for v in versions["versions"]] == [1]


async def test_a_failed_build_leaves_the_active_version_and_says_why(server, builder):
    eid = (await _create(server))["id"]
    await _put(server, eid, "data/hello.txt", b"one")
    assert (await _built(server, eid))["status"] == "ready"
    builder.fail = True
    record = await _built(server, eid)
    assert record["status"] == "failed" and record["error"] == "pip could not install demo"
    assert "ERROR: no demo" in record["log"]
    environment = (await server.client.get(f"/v1/environments/{eid}")).json()
    assert (environment["status"], environment["version"], environment["latestVersion"]) == (
        "ready",
        1,
        2,
    )
    not_ready = await server.client.post(f"/v1/environments/{eid}/versions/2/activate")
    assert not_ready.status_code == 409 and _error(not_ready) == "environment_not_ready"


async def test_a_first_build_that_fails_leaves_the_environment_failed(server, builder):
    eid = (await _create(server))["id"]
    builder.fail = True
    await _built(server, eid)
    environment = (await server.client.get(f"/v1/environments/{eid}")).json()
    assert (environment["status"], environment["version"]) == ("failed", None)


async def test_editing_changes_nothing_until_the_next_build_and_rollback_is_a_pointer(
    server, tmp_path
):
    eid = (await _create(server))["id"]
    await _put(server, eid, "data/hello.txt", b"one")
    await _built(server, eid)
    await _put(server, eid, "data/hello.txt", b"two")
    versions = tmp_path / "data" / "environments" / eid / "versions"
    assert (versions / "1" / "data" / "hello.txt").read_bytes() == b"one"
    assert (await server.client.get(f"/v1/environments/{eid}")).json()["version"] == 1
    await _built(server, eid)
    assert (versions / "2" / "data" / "hello.txt").read_bytes() == b"two"
    assert (await server.client.get(f"/v1/environments/{eid}")).json()["version"] == 2
    back = await server.client.post(f"/v1/environments/{eid}/versions/1/activate")
    assert back.status_code == 200 and back.json()["version"] == 1
    validate("Environment", back.json())
    missing = await server.client.post(f"/v1/environments/{eid}/versions/99/activate")
    assert missing.status_code == 404
    assert (await server.client.get(f"/v1/environments/{eid}/builds/99")).status_code == 404


async def test_retention_keeps_the_active_the_newest_and_what_a_session_reads(server, tmp_path):
    eid = (await _create(server))["id"]
    versions = tmp_path / "data" / "environments" / eid / "versions"
    for _ in range(3):
        await _built(server, eid)
    # keep_versions=2: the newest two ready ones (3, also active, and 2) stay; 1 goes.
    assert sorted(p.name for p in versions.iterdir()) == ["2", "3"]
    listed = (await server.client.get(f"/v1/environments/{eid}/versions")).json()["versions"]
    assert [(v["version"], v.get("collected", False)) for v in listed] == [
        (1, True), (2, False), (3, False)
    ]  # fmt: skip
    collected = await server.client.post(f"/v1/environments/{eid}/versions/1/activate")
    assert collected.status_code == 409 and _error(collected) == "environment_not_ready"
    assert (await server.client.get(f"/v1/environments/{eid}/builds/1")).json()["log"]

    def session_reads_version_2(tx: Tx) -> None:
        tx.orm.add(
            SessionRow(
                id="hsess_reads2",
                principal_id="p",
                harness_id="h",
                container_id="cntr_x",
                created_at=int(time.time()),
                updated_at=int(time.time()),
                environment_id=eid,
                environment_version=2,
            )
        )

    await server.ctx.db.write(session_reads_version_2)
    await _built(server, eid)  # 4: 3 and 4 the newest; 2 a live session's
    await _built(server, eid)  # 5: 4 and 5 the newest; 3 goes, 2 stays
    assert sorted(p.name for p in versions.iterdir()) == ["2", "4", "5"]


async def test_builds_left_running_by_a_stopped_server_end_failed_at_start_up(tmp_path, provider):
    data = tmp_path / "data"
    gate_builder = WritingBuilder()
    gate_builder.gate = asyncio.Event()
    async with in_process(data, provider.base_url, PROVIDER_KEY, builder=gate_builder) as first:
        eid = (await _create(first))["id"]
        await first.client.post(f"/v1/environments/{eid}/build")
    # The stopping server ended its build itself; one it could not end (a crash) ends at start.
    first.ctx.db.run(_mark_building, eid)
    async with in_process(
        data, provider.base_url, PROVIDER_KEY, builder=WritingBuilder()
    ) as second:
        record = (await second.client.get(f"/v1/environments/{eid}/builds/1")).json()
        assert record["status"] == "failed" and "stopped" in record["error"]
        assert (await second.client.post(f"/v1/environments/{eid}/build")).status_code == 200


async def test_a_build_stopped_before_its_first_step_ends_failed(server):
    """A build whose task the shutdown cancels before it ever ran (so before the handler
    that ends a stopped build) is ended by the shutdown itself, not left `building`."""
    eid = (await _create(server))["id"]
    builds = server.ctx.engine.environments.builds
    order = BuildOrder(environment_id=eid, principal_id="p", slug="s", declared={}, python="")
    started = await builds.start(order)  # its task scheduled, not yet run
    assert started is not None
    await builds.close()
    record = (await server.client.get(f"/v1/environments/{eid}/builds/{started.version}")).json()
    assert (record["status"], record["error"]) == ("failed", STOPPED)


def _mark_building(tx: Tx, environment_id: str) -> None:
    record = env_store.get_version(tx, environment_id, 1)
    assert record is not None and record.status == "failed" and "stopped" in record.error
    record.status, record.error = "building", ""
    tx.orm.add(record)


async def test_delete_removes_every_folder_and_says_which_harnesses_named_it(server, tmp_path):
    eid = (await _create(server))["id"]
    await _put(server, eid, "run.py", b"x")
    await _built(server, eid)
    harness = await server.client.post(
        "/v1/harnesses", json={"name": "Cutter", "base": server.base.name}
    )
    assert harness.status_code == 200, harness.text
    hid = harness.json()["id"]

    def name_it(tx: Tx) -> None:
        from storage.tables import HarnessRow

        row = tx.orm.get(HarnessRow, hid)
        assert row is not None
        row.config = {**row.config, "environment": eid}
        tx.orm.add(row)

    await server.ctx.db.write(name_it)
    naming = (await server.client.get(f"/v1/environments/{eid}/harnesses")).json()
    assert naming == {
        "id": eid,
        "harnesses": [{"id": hid, "name": "Cutter", "base": server.base.name}],
    }
    deleted = await server.client.delete(f"/v1/environments/{eid}")
    assert deleted.status_code == 200
    assert (
        deleted.json()["deleted"] is True and deleted.json()["detached_harnesses"][0]["id"] == hid
    )
    assert not (tmp_path / "data" / "environments" / eid).exists()
    assert (await server.client.get(f"/v1/environments/{eid}")).status_code == 404


# -- what builds can use ---------------------------------------------------------------------
async def test_runtimes_come_from_the_builder_and_a_runtime_must_be_one_of_them(server):
    runtimes = (await server.client.get("/v1/environments/runtimes")).json()
    validate("EnvironmentRuntimes", runtimes)
    assert runtimes["python"] == ["3.11", "3.12"] and runtimes["node"] == ["20"]
    assert runtimes["os"] == {"name": "Debian GNU/Linux", "version": "12 (bookworm)"}


async def test_a_package_check_refuses_an_unknown_manager_or_no_spec_with_400(server):
    for query in (
        "manager=cargo&spec=serde",
        "manager=pip&spec=",
        "manager=pip&spec=-r%20x",
        "spec=x",
    ):
        response = await server.client.get(f"/v1/environments/packages/check?{query}")
        assert response.status_code == 400 and _error(response) == "environment_invalid", query


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to root needs root (CI runs as root)")
def test_a_built_version_is_roots_read_only_and_readable_by_every_agent(tmp_path: Path) -> None:
    # The build's agent owned what it wrote, and a later build shares unchanged trees by hard
    # links: were the agent still the owner, it could put a write bit back and change this
    # version from there.
    version = tmp_path / "1"
    (version / "bin").mkdir(parents=True)
    private, tool = version / "private.txt", version / "bin" / "tool"
    private.write_text("x")
    tool.write_text("#!/bin/sh\n")
    os.chmod(private, 0o600 | stat.S_ISUID)
    os.chmod(tool, 0o700)
    for path in (version, version / "bin", private, tool):
        os.lchown(path, 200000, 200000)
    (version / "link").symlink_to("private.txt")
    folders.make_read_only(version)
    for path, mode in ((version, 0o555), (version / "bin", 0o555), (private, 0o444), (tool, 0o555)):
        info = os.lstat(path)
        assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (0, 0, mode), path
    assert os.lstat(version / "link").st_uid == 0
