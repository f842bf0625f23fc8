"""`uhp-server bases install`: every registered base, where an opt-in base this host cannot
install is left out loudly and the rest installs; named, or a default base, it is an error."""

from __future__ import annotations

from pathlib import Path

import pytest

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


def bases(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **fails: bool) -> dict[str, Installing]:
    known = {
        "default-one": Installing(
            "default-one", by_default=True, fails=fails.get("default", False)
        ),
        "opt-in-one": Installing("opt-in-one", by_default=False, fails=fails.get("opt_in", False)),
    }
    monkeypatch.setattr(cli, "registry", lambda: known)
    monkeypatch.setenv("UHP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("UHP_TOOLS_DIR", str(tmp_path / "tools"))
    return known


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
