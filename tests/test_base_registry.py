"""Bases register themselves through the `uhp_server.bases` entry points, and what the rest of
the server needs from a base (artifact exclusions, runtime image packages, which bases are
enabled and installed) derives from their declarations."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from harness_bases import ENTRY_POINT_GROUP, registry
from harness_bases.base import DECLARATIONS, CliPin, Enforcement, HarnessBase, missing_declarations
from uhp_server.context import usable_bases
from uhp_server.engine.turns import artifacts
from uhp_server.sandbox.docker import images
from uhp_server.settings import Settings

BUILT_IN = {
    *("codex", "claude-code", "hermes", "opencode", "pi", "qwen-code", "gemini-cli"),
    *("kilo", "cline", "copilot", "mini-swe-agent", "acp", "kimi", "openhands"),
}

THIRD_PARTY = """
from harness_bases.acp import AcpBase
from harness_bases.base import CliPin, Enforcement


class Incomplete(AcpBase):
    name = "incomplete"
    label = "Incomplete"
    backend = "openai"
    wire = "chat"
    cli_version = "1.2.3"
    cli_pins = (CliPin("npm", "tiny-agent", "1.2.3"),)
    enforcement = Enforcement(disabled_tools="instruction", max_step="counted")
    runtime_packages = ()
    host_packages = ()

    def install(self, tools_dir):
        pass

    def installed_version(self, tools_dir):
        return self.cli_version

    def prepare(self, turn):
        raise NotImplementedError


class TinyBase(Incomplete):
    name = "tiny-agent"
    label = "Tiny Agent"
    state_dirs = (".tiny-agent",)
    conversation_paths = (".tiny-agent/sessions",)
    runtime_packages = ("tiny-runtime-lib",)
    host_packages = ("tiny-host-tool",)
"""


def _declared_everything() -> list[tuple[str, list[str]]]:
    found = []
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        found.append((entry.name, missing_declarations(entry.load())))
    return found


def test_every_registered_base_declares_everything() -> None:
    """Read straight from the entry points: registry() would leave an incomplete base out."""
    declared = dict(_declared_everything())
    assert set(declared) >= BUILT_IN
    assert {name: missing for name, missing in declared.items() if missing} == {}


# `acp` runs whatever agent a harness names: its pins are its test agents, and what it keeps
# of a conversation is the harness's to say (tests/test_acp_config.py checks those).
@pytest.mark.parametrize("name", sorted(BUILT_IN - {"acp"}))
def test_built_in_declarations_are_well_formed(name: str) -> None:
    base = registry()[name]
    assert base.name == name
    assert isinstance(base.enforcement, Enforcement)
    assert base.cli_pins and all(isinstance(pin, CliPin) for pin in base.cli_pins)
    assert base.cli_version in {pin.version for pin in base.cli_pins}
    assert base.state_dirs and all("/" not in d and d.startswith(".") for d in base.state_dirs)
    # Relative to the agent home, inside a folder of the CLI's own: never the home itself.
    assert base.conversation_paths
    for path in base.conversation_paths:
        assert not path.startswith("/") and ".." not in path.split("/")
        assert path.startswith(".") and "/" in path and "*" not in path.split("/")[0]
    for packages in (base.runtime_packages, base.host_packages):
        assert isinstance(packages, tuple) and all(p and " " not in p for p in packages)


def test_a_base_lacking_a_declaration_is_named_missing() -> None:
    class Partial(HarnessBase):
        name = "partial"
        label = "Partial"
        backend = "openai"
        cli_version = "1"
        enforcement = Enforcement(disabled_tools="instruction", max_step="counted")

    assert missing_declarations(Partial) == [
        "wire",
        "cli_pins",
        "state_dirs",
        "conversation_paths",
        "runtime_packages",
        "host_packages",
    ]
    assert set(missing_declarations(Partial)) <= set(DECLARATIONS)


def _distribution(root: Path, entries: dict[str, str], module: str) -> Path:
    """A throw-away installed distribution: a module and a dist-info with entry points."""
    (root / "tiny_agent_base.py").write_text(module)
    info = root / "tiny_agent_base-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-agent-base\nVersion: 0.1\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entries.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")
    return root


@pytest.fixture
def third_party(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = _distribution(
        tmp_path,
        {
            "tiny-agent": "tiny_agent_base:TinyBase",
            "broken": "tiny_agent_base_missing:Nothing",
            "incomplete": "tiny_agent_base:Incomplete",
        },
        THIRD_PARTY,
    )
    monkeypatch.syspath_prepend(str(root))
    artifacts.excluded_dirs.cache_clear()
    yield root
    artifacts.excluded_dirs.cache_clear()


def test_a_third_party_base_is_found_through_its_entry_point(
    third_party: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="harness_bases.registry"):
        known = registry()
    assert "tiny-agent" in known and set(known) >= BUILT_IN
    assert known["tiny-agent"].label == "Tiny Agent"
    # One that cannot be imported, or declares too little, is left out with a warning.
    assert "broken" not in known and "incomplete" not in known
    left_out = {
        vars(r)["base"]: vars(r)["error"] for r in caplog.records if r.msg == "base_not_loaded"
    }
    assert set(left_out) == {"broken", "incomplete"}
    assert "state_dirs" in left_out["incomplete"]


def test_what_derives_from_the_declarations(third_party: Path, tmp_path: Path) -> None:
    # Its state folder is never searched for artifacts.
    workspace = tmp_path / "ws"
    (workspace / ".tiny-agent").mkdir(parents=True)
    (workspace / ".tiny-agent" / "session.json").write_text("{}")
    (workspace / "result.txt").write_text("kept")
    assert set(artifacts.snapshot(workspace)) == {"result.txt"}
    # Without UHP_BASES, every registered base that is installed is enabled.
    enabled = usable_bases(Settings(tools_dir=tmp_path / "no-tools", bases=None))
    assert "tiny-agent" in enabled
    assert "tiny-agent" not in usable_bases(Settings(tools_dir=tmp_path, bases="codex"))
    # The runtime image carries what it needs, and its tag says so.
    packages = images.runtime_packages(registry().values())
    assert "tiny-runtime-lib" in packages
    assert images.runtime_tag(packages) != images.runtime_tag(("python3",))


@pytest.mark.heavy
def test_the_cli_lists_and_installs_every_registered_base(third_party: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(third_party)}
    cli = [sys.executable, "-m", "uhp_server.cli"]
    names = subprocess.run([*cli, "bases", "list", "--names"], env=env, capture_output=True)
    assert names.returncode == 0, names.stderr
    assert names.stdout.decode().split() == sorted([*BUILT_IN, "tiny-agent"])
    host = subprocess.run([*cli, "bases", "host-packages"], env=env, capture_output=True)
    assert "tiny-host-tool" in host.stdout.decode().split()


def test_an_opt_in_base_is_enabled_only_when_named(
    third_party: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tiny = type(registry()["tiny-agent"])
    monkeypatch.setattr(tiny, "enabled_by_default", False)
    assert "tiny-agent" not in usable_bases(Settings(tools_dir=tmp_path / "t", bases=None))
    named = usable_bases(Settings(tools_dir=tmp_path / "t", bases="tiny-agent"))
    assert "tiny-agent" in named
