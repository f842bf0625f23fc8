"""Node's compile cache of the node CLIs (harness_bases/compile_cache.py): made by `bases
install` with the tools folder where a sandbox shows it, read by a turn only where it was made
with the base's warm-up as pinned now, and given to each agent user as hard links of the same
files."""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import stat
from pathlib import Path

import pytest

from harness_bases import compile_cache
from harness_bases.base import SandboxPaths, Warmup
from tests.support.direct_turn import direct_spec
from tests.support.fakes import FakeBase
from uhp_server.engine.turns.executor import _prepare

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bubblewrap")
TOOLS = SandboxPaths().tools
CACHE_ENV = {"NODE_COMPILE_CACHE": f"{TOOLS}/{compile_cache.FOLDER}"}
# A stand-in for a node CLI's warm-up: what node would do with NODE_COMPILE_CACHE (a folder
# named for its user, an entry in it, 0600), done only where the tools folder is at the
# sandbox's path (the entries are keyed by the files' paths there).
WRITES_AN_ENTRY = (
    f'test -f "{TOOLS}/cli.js" && d="$NODE_COMPILE_CACHE/v22-x64-abc-$(id -u)" && '
    'mkdir -p "$d" && umask 077 && echo code > "$d/0a1b2c3d"'
)


@dataclasses.dataclass
class NodeBase(FakeBase):
    """A base whose CLI is a node program: it has a warm-up."""

    name: str = "pi"
    warmup: Warmup | None = None

    def compile_cache_warmup(self, tools_root: str) -> Warmup | None:
        return self.warmup


def a_cli(tools: Path) -> None:
    tools.mkdir(parents=True, exist_ok=True)
    (tools / "cli.js").write_text("console.log(1)\n")


def sh(script: str, exit_codes: tuple[int, ...] = (0,)) -> Warmup:
    return Warmup(["/bin/sh", "-c", script], exit_codes=exit_codes)


@needs_bwrap
def test_the_warm_up_runs_at_the_sandboxs_path_and_leaves_the_entries_readable(
    tmp_path: Path,
) -> None:
    a_cli(tmp_path)
    base = NodeBase(warmup=sh(WRITES_AN_ENTRY))
    assert compile_cache.warm(tmp_path, base)
    entry = tmp_path / compile_cache.FOLDER / f"v22-x64-abc-{os.getuid()}" / "0a1b2c3d"
    assert entry.read_text() == "code\n"
    assert stat.S_IMODE(entry.stat().st_mode) == 0o644  # node writes 0600: nobody else reads
    assert compile_cache.warmed(tmp_path, base)
    assert compile_cache.turn_env(tmp_path, TOOLS, base) == CACHE_ENV


@needs_bwrap
def test_the_warm_up_writes_nothing_but_the_cache_and_reaches_no_network(
    tmp_path: Path,
) -> None:
    a_cli(tmp_path)
    with socket.socket() as listening:  # the host's loopback: reachable from the host
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        for script in (
            f'echo x > "{TOOLS}/cli.js"',  # the tools themselves: read-only
            f"echo x > {tmp_path}/outside",  # the host: read-only
            f"exec 3<>/dev/tcp/127.0.0.1/{port}",  # no network of the host's
        ):
            warmup = Warmup(["/bin/bash", "-c", script])
            assert not compile_cache.warm(tmp_path, NodeBase(warmup=warmup)), script
    assert (tmp_path / "cli.js").read_text() == "console.log(1)\n"
    assert not (tmp_path / "outside").exists()


@needs_bwrap
def test_a_failed_warm_up_leaves_the_base_without_the_cache(tmp_path: Path) -> None:
    a_cli(tmp_path)
    base = NodeBase(warmup=sh("exit 3"))
    assert compile_cache.warm(tmp_path, base) is False
    assert not compile_cache.warmed(tmp_path, base)
    assert compile_cache.turn_env(tmp_path, TOOLS, base) == {}
    # An exit the warm-up expects (a prompt with no model) is its success.
    expected = NodeBase(warmup=sh(WRITES_AN_ENTRY + "; exit 1", exit_codes=(1,)))
    assert compile_cache.warm(tmp_path, expected)


def test_no_node_cli_no_warm_up(tmp_path: Path) -> None:
    assert compile_cache.warm(tmp_path, FakeBase()) is None
    assert compile_cache.turn_env(tmp_path, TOOLS, FakeBase()) == {}


@needs_bwrap
def test_another_pinned_node_or_version_is_not_warmed_by_the_old_cache(tmp_path: Path) -> None:
    a_cli(tmp_path)
    base = NodeBase(warmup=sh(WRITES_AN_ENTRY))
    assert compile_cache.warm(tmp_path, base)
    newer_node = NodeBase(warmup=sh(WRITES_AN_ENTRY + " # node 24"))
    assert compile_cache.turn_env(tmp_path, TOOLS, newer_node) == {}
    newer_cli = NodeBase(warmup=sh(WRITES_AN_ENTRY), cli_version="1.0.1")
    assert compile_cache.turn_env(tmp_path, TOOLS, newer_cli) == {}


def made_entries(tools: Path, *names: str) -> Path:
    made = tools / compile_cache.FOLDER / f"v22-x64-abc-{os.getuid()}"
    made.mkdir(parents=True, exist_ok=True)
    for name in names:
        (made / name).write_text(name)
    return made


def test_an_agent_user_gets_the_same_entries_as_links_and_follows_a_new_warm_up(
    tmp_path: Path,
) -> None:
    made = made_entries(tmp_path, "0000aaaa", "0000bbbb")
    compile_cache.for_user(tmp_path, 200001)
    theirs = tmp_path / compile_cache.FOLDER / "v22-x64-abc-200001"
    assert (theirs / "0000aaaa").stat().st_ino == (made / "0000aaaa").stat().st_ino
    assert stat.S_IMODE(theirs.stat().st_mode) == 0o755
    # A warm-up again: one entry replaced (a new file), one gone, one new; node's temporary
    # file is not an entry.
    (made / "0000aaaa").unlink()
    (made / "0000aaaa").write_text("again")
    (made / "0000bbbb").unlink()
    (made / "0000cccc").write_text("new")
    (made / "0000dddd.tmp").write_text("half")
    compile_cache.for_user(tmp_path, 200001)
    assert sorted(os.listdir(theirs)) == ["0000aaaa", "0000cccc"]
    assert (theirs / "0000aaaa").read_text() == "again"
    assert (theirs / "0000aaaa").stat().st_ino == (made / "0000aaaa").stat().st_ino


@needs_bwrap
def test_a_user_given_the_entries_is_not_given_them_again_until_a_new_warm_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a_cli(tmp_path)
    assert compile_cache.warm(tmp_path, NodeBase(warmup=sh(WRITES_AN_ENTRY)))
    linked: list[str] = []
    link_folder = compile_cache._link_folder

    def counted(made: Path, theirs: Path) -> None:
        linked.append(theirs.name)
        link_folder(made, theirs)

    monkeypatch.setattr(compile_cache, "_link_folder", counted)
    compile_cache.for_user(tmp_path, 200001)
    compile_cache.for_user(tmp_path, 200001)  # a later turn: two small reads
    assert linked == ["v22-x64-abc-200001"]
    assert (tmp_path / compile_cache.FOLDER / "v22-x64-abc-200001" / "0a1b2c3d").is_file()
    again = WRITES_AN_ENTRY.replace("0a1b2c3d", "0e0e0e0e")  # another base, or a new pin
    assert compile_cache.warm(tmp_path, NodeBase(name="qwen-code", warmup=sh(again)))
    compile_cache.for_user(tmp_path, 200001)
    assert linked == ["v22-x64-abc-200001", "v22-x64-abc-200001"]
    assert (tmp_path / compile_cache.FOLDER / "v22-x64-abc-200001" / "0e0e0e0e").is_file()


def test_the_users_folder_is_readable_whatever_the_umask(tmp_path: Path) -> None:
    made_entries(tmp_path, "0000aaaa")
    old = os.umask(0o077)
    try:
        compile_cache.for_user(tmp_path, 200001)
    finally:
        os.umask(old)
    theirs = tmp_path / compile_cache.FOLDER / "v22-x64-abc-200001"
    assert stat.S_IMODE(theirs.stat().st_mode) == 0o755


def test_a_user_that_cannot_be_given_the_cache_still_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    made_entries(tmp_path, "0000aaaa")

    def too_many_links(source: object, target: object) -> None:
        raise OSError(31, "Too many links")

    monkeypatch.setattr(compile_cache.os, "link", too_many_links)
    compile_cache.for_user(tmp_path, 200001)  # no exception: the turn goes on
    assert "compile_cache_not_given" in caplog.text


def test_no_cache_folder_is_nothing_to_give(tmp_path: Path) -> None:
    compile_cache.for_user(tmp_path, 200001)
    assert not (tmp_path / compile_cache.FOLDER).exists()


@needs_bwrap
def test_a_turn_of_a_warmed_base_reads_the_cache_where_the_sandbox_shows_it(
    tmp_path: Path,
) -> None:
    tools = tmp_path / "tools"
    a_cli(tools)
    base = NodeBase(warmup=sh(WRITES_AN_ENTRY))
    spec = direct_spec(
        "SAY hi",
        model="m",
        gateway_url="http://gateway",
        home=tmp_path / "home",
        workspace=tmp_path / "workspace",
        tools=tools,
    )
    spec = dataclasses.replace(spec, paths=SandboxPaths())
    assert compile_cache.ENV not in _prepare(base, spec).env  # not warmed yet
    assert compile_cache.warm(tools, base)
    assert _prepare(base, spec).env[compile_cache.ENV] == CACHE_ENV["NODE_COMPILE_CACHE"]
