"""`uhp-server bases install`: every registered base, side by side, where an opt-in base this
host cannot install is left out loudly and the rest installs; named, or a default base, it is
an error."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from pathlib import Path
from typing import TypeVar

import pytest

from harness_bases import node_runtime
from uhp_server import cli


class Installing:
    def __init__(self, name: str, *, by_default: bool, fails: bool) -> None:
        self.name, self.enabled_by_default, self.fails = name, by_default, fails
        self.cli_version = "1.0.0"
        self.installed = False

    def install(self, tools_dir: Path) -> None:
        if self.fails:
            raise RuntimeError(f"{self.name} needs a host CPython >= 3.12; none found")
        self.installed = True

    def installed_version(self, tools_dir: Path) -> str | None:
        return self.cli_version if self.installed else None

    def compile_cache_warmup(self, tools_root: str) -> None:
        return None  # no node CLI: nothing for node's compile cache


K = TypeVar("K", bound=Installing)


def registered(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, known: dict[str, K]
) -> dict[str, K]:
    """`known` as the registry of bases `bases install` sees, its folders under `tmp_path`."""
    monkeypatch.setattr(cli, "registry", lambda: known)
    monkeypatch.setenv("UHP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("UHP_TOOLS_DIR", str(tmp_path / "tools"))
    return known


def bases(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **fails: bool) -> dict[str, Installing]:
    known = {
        "default-one": Installing(
            "default-one", by_default=True, fails=fails.get("default", False)
        ),
        "opt-in-one": Installing("opt-in-one", by_default=False, fails=fails.get("opt_in", False)),
    }
    return registered(monkeypatch, tmp_path, known)


def test_an_opt_in_base_the_host_cannot_install_is_left_out_loudly(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    known = bases(monkeypatch, tmp_path, opt_in=True)
    assert cli.main(["bases", "install"]) == 0
    assert known["default-one"].installed
    assert "opt-in-one: LEFT OUT, not installed: opt-in-one needs a host CPython" in (
        capsys.readouterr().err
    )


def test_named_it_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bases(monkeypatch, tmp_path, opt_in=True)
    with pytest.raises(RuntimeError, match="needs a host CPython"):
        cli.main(["bases", "install", "opt-in-one"])


def test_a_default_base_that_cannot_install_is_an_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bases(monkeypatch, tmp_path, default=True)
    with pytest.raises(RuntimeError, match="needs a host CPython"):
        cli.main(["bases", "install"])


class Meeting(Installing):
    """An install that finishes only once `barrier`'s other installs have begun too."""

    def __init__(self, name: str, barrier: threading.Barrier) -> None:
        super().__init__(name, by_default=True, fails=False)
        self.barrier = barrier

    def install(self, tools_dir: Path) -> None:
        self.barrier.wait()  # BrokenBarrierError after its timeout: they ran one by one
        super().install(tools_dir)


def test_bases_install_side_by_side(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    known = meetings(monkeypatch, tmp_path, 3)
    assert cli.main(["bases", "install", "--jobs", "3"]) == 0
    assert all(base.installed for base in known.values())
    said = capsys.readouterr().out
    assert all(f"{name}: 1.0.0 (" in said for name in known)


def test_four_bases_install_at_once_unless_told(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The default `--jobs` is 4, as its help says: of five bases, four install at once and
    never five."""
    Counted.running = Counted.most = 0
    known = {f"base-{i}": Counted(f"base-{i}") for i in range(5)}
    registered(monkeypatch, tmp_path, known)
    assert cli.main(["bases", "install"]) == 0
    assert all(base.installed for base in known.values())
    assert Counted.most == 4


class Counted(Installing):
    """An install that lasts long enough for the others started with it to begin, counting
    how many ran at once."""

    lock = threading.Lock()
    running = most = 0

    def __init__(self, name: str) -> None:
        super().__init__(name, by_default=True, fails=False)

    def install(self, tools_dir: Path) -> None:
        with Counted.lock:
            Counted.running += 1
            Counted.most = max(Counted.most, Counted.running)
        time.sleep(0.3)
        with Counted.lock:
            Counted.running -= 1
        super().install(tools_dir)


def meetings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, count: int) -> dict[str, Meeting]:
    """`count` registered bases whose installs each wait for all the others to begin."""
    barrier = threading.Barrier(count, timeout=10)
    known = {f"base-{i}": Meeting(f"base-{i}", barrier) for i in range(count)}
    return registered(monkeypatch, tmp_path, known)


def test_a_failed_default_base_leaves_the_others_installed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    known = bases(monkeypatch, tmp_path, default=True)
    with pytest.raises(RuntimeError, match="needs a host CPython"):
        cli.main(["bases", "install", "--jobs", "1"])
    assert known["opt-in-one"].installed
    assert "default-one: NOT INSTALLED: default-one needs a host CPython" in (
        capsys.readouterr().err
    )


def test_the_shared_node_is_installed_once_by_installs_side_by_side(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    installs: list[str] = []
    installed = threading.Event()

    def npm_install(prefix: Path, package: str, version: str, **_: object) -> None:
        time.sleep(0.2)  # long enough for the other install to come meanwhile
        installs.append(f"{package}@{version}")
        installed.set()

    def installed_version(tools_dir: Path) -> str | None:
        return node_runtime.NODE_VERSION if installed.is_set() else None

    monkeypatch.setattr(node_runtime, "npm_install", npm_install)
    monkeypatch.setattr(node_runtime, "installed_version", installed_version)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda _: node_runtime.install(tmp_path), range(2)))
    assert installs == [f"{node_runtime.package()}@{node_runtime.NODE_VERSION}"]


class FailsOnce(Installing):
    """An install that fails the first time, as a race in npm's or pip's cache can."""

    def install(self, tools_dir: Path) -> None:
        if not self.fails:
            self.fails = True
            raise RuntimeError("npm ERR! EEXIST: file already exists, rename ...")
        self.installed = True


def test_an_install_that_failed_beside_others_is_tried_again_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    known = {"racy": FailsOnce("racy", by_default=True, fails=False)}
    registered(monkeypatch, tmp_path, known)
    assert cli.main(["bases", "install"]) == 0
    assert known["racy"].installed
    assert "racy: 1.0.0 (" in capsys.readouterr().out
