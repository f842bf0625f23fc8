"""Node's compile cache of the node CLIs (harness_bases/compile_cache.py): made by `bases
install` with the tools folder where a sandbox shows it, read by a turn only where it was made
for the base's pinned version, and given to each agent user as hard links of the same files."""

from __future__ import annotations

import dataclasses
import os
import shutil
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
# A stand-in for a node CLI's warm-up: what node would do with NODE_COMPILE_CACHE (a folder
# named for its user, an entry in it), done only where the tools folder is at the sandbox's
# path (the entries are keyed by the files' paths there).
WRITES_AN_ENTRY = (
    f'test -f "{TOOLS}/cli.js" && d="$NODE_COMPILE_CACHE/v22-x64-abc-$(id -u)" && '
    'mkdir -p "$d" && umask 077 && echo code > "$d/entry"'
)


def a_cli(tools: Path) -> None:
    tools.mkdir(parents=True, exist_ok=True)
    (tools / "cli.js").write_text("console.log(1)\n")


@needs_bwrap
def test_the_warm_up_runs_with_the_tools_at_the_sandboxs_path_and_leaves_them_readable(
    tmp_path: Path,
) -> None:
    a_cli(tmp_path)
    warmup = Warmup(["/bin/sh", "-c", WRITES_AN_ENTRY])
    assert compile_cache.warm(tmp_path, "pi", "1.0", warmup)
    entry = tmp_path / compile_cache.FOLDER / f"v22-x64-abc-{os.getuid()}" / "entry"
    assert entry.read_text() == "code\n"
    assert stat.S_IMODE(entry.stat().st_mode) == 0o644  # node writes 0600: nobody else reads
    assert compile_cache.warmed(tmp_path, "pi", "1.0")
    assert compile_cache.turn_env(tmp_path, TOOLS, "pi", "1.0") == {
        "NODE_COMPILE_CACHE": f"{TOOLS}/{compile_cache.FOLDER}"
    }


@needs_bwrap
def test_a_failed_warm_up_leaves_the_base_without_the_cache(tmp_path: Path) -> None:
    a_cli(tmp_path)
    assert not compile_cache.warm(tmp_path, "pi", "1.0", Warmup(["/bin/sh", "-c", "exit 3"]))
    assert not compile_cache.warmed(tmp_path, "pi", "1.0")
    assert compile_cache.turn_env(tmp_path, TOOLS, "pi", "1.0") == {}
    # An exit the warm-up expects (a prompt with no model) is its success.
    expected = Warmup(["/bin/sh", "-c", WRITES_AN_ENTRY + "; exit 1"], exit_codes=(1,))
    assert compile_cache.warm(tmp_path, "pi", "1.0", expected)


def test_a_base_warmed_at_another_version_gets_no_cache(tmp_path: Path) -> None:
    marker = tmp_path / compile_cache.FOLDER / ".warmed" / "pi-1.0"
    marker.parent.mkdir(parents=True)
    marker.touch()
    assert compile_cache.turn_env(tmp_path, TOOLS, "pi", "1.1") == {}
    assert compile_cache.turn_env(tmp_path, TOOLS, "qwen-code", "1.0") == {}


def test_an_agent_user_gets_the_same_entries_as_links_and_later_ones_too(tmp_path: Path) -> None:
    made = tmp_path / compile_cache.FOLDER / f"v22-x64-abc-{os.getuid()}"
    made.mkdir(parents=True)
    (made / "first").write_text("one")
    compile_cache.for_user(tmp_path, 200001)
    theirs = tmp_path / compile_cache.FOLDER / "v22-x64-abc-200001"
    assert (theirs / "first").stat().st_ino == (made / "first").stat().st_ino
    (made / "second").write_text("two")  # a later install's warm-up
    compile_cache.for_user(tmp_path, 200001)
    compile_cache.for_user(tmp_path, 200001)  # and again: nothing left to do
    assert sorted(os.listdir(theirs)) == ["first", "second"]
    assert sorted(p.name for p in (tmp_path / compile_cache.FOLDER).iterdir()) == sorted(
        [made.name, theirs.name]
    )


def test_no_cache_folder_is_nothing_to_give(tmp_path: Path) -> None:
    compile_cache.for_user(tmp_path, 200001)
    assert not (tmp_path / compile_cache.FOLDER).exists()


def test_a_turn_of_a_warmed_base_reads_the_cache_where_the_sandbox_shows_it(
    tmp_path: Path,
) -> None:
    base = FakeBase()
    spec = direct_spec(
        "SAY hi",
        model="m",
        gateway_url="http://gateway",
        home=tmp_path / "home",
        workspace=tmp_path / "workspace",
        tools=tmp_path / "tools",
    )
    spec = dataclasses.replace(spec, paths=SandboxPaths())
    assert compile_cache.ENV not in _prepare(base, spec).env  # not warmed
    marker = tmp_path / "tools" / compile_cache.FOLDER / ".warmed" / "fake-1.0.0"
    marker.parent.mkdir(parents=True)
    marker.touch()
    env = _prepare(base, spec).env
    assert env[compile_cache.ENV] == f"{TOOLS}/{compile_cache.FOLDER}"
