"""harness_bases.python_runtime: finding a host CPython >= 3.12, copying it so that it runs from
any path (the tools folder as a sandbox mounts it), and refusing clearly when there is none.

These machines (and CI) have pyenv's 3.12 and 3.13; the copy is a real one of them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness_bases import python_runtime as runtime

SYSTEM_PYTHON = "/usr/bin/python3"  # Debian bookworm's 3.11: too old


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 1\n")
    path.chmod(0o755)
    return path


def test_pyenv_versions_are_the_new_enough_cpythons_newest_first(tmp_path: Path) -> None:
    for version in ("3.11.7", "3.12.1", "3.13.0", "3.12.10"):
        major_minor = ".".join(version.split(".")[:2])
        _executable(tmp_path / "versions" / version / "bin" / f"python{major_minor}")
    _executable(tmp_path / "versions" / "pypy3.10-7.3.15" / "bin" / "python3.10")
    (tmp_path / "versions" / "3.14.0").mkdir()  # an unfinished install: no executable
    found = runtime.pyenv_versions(tmp_path)
    assert [path.parts[-3] for path in found] == ["3.13.0", "3.12.10", "3.12.1"]


def test_the_setting_names_the_only_candidate(tmp_path: Path) -> None:
    environ = {"PATH": "/usr/bin:/bin", runtime.PYTHON_ENV: "/somewhere/python3.13"}
    assert runtime.candidates(environ, tmp_path) == ["/somewhere/python3.13"]


def test_without_the_setting_path_comes_before_pyenv(tmp_path: Path) -> None:
    on_path = _executable(tmp_path / "bin" / "python3.12")
    pyenv = _executable(tmp_path / "pyenv" / "versions" / "3.13.0" / "bin" / "python3.13")
    environ = {"PATH": str(on_path.parent)}
    assert runtime.candidates(environ, tmp_path / "pyenv") == [str(on_path), str(pyenv)]


def test_no_interpreter_is_a_clear_install_error_naming_what_was_tried(tmp_path: Path) -> None:
    broken = _executable(tmp_path / "bin" / "python3.13")  # exits 1
    environ = {"PATH": str(broken.parent)}
    with pytest.raises(runtime.PythonRuntimeError) as raised:
        runtime.find_host_python(environ, tmp_path / "no-pyenv")
    message = str(raised.value)
    assert "no CPython >= 3.12 found" in message
    assert f"{broken}: does not run" in message
    assert runtime.PYTHON_ENV in message
    with pytest.raises(runtime.PythonRuntimeError, match=r"no python3\.13 or python3\.12 on PATH"):
        runtime.find_host_python({"PATH": str(tmp_path)}, tmp_path / "no-pyenv")


def test_a_named_interpreter_too_old_or_missing_is_refused_with_its_reason(
    tmp_path: Path,
) -> None:
    with pytest.raises(runtime.PythonRuntimeError, match=r"/usr/bin/python3: is 3\.11\.\d+, older"):
        runtime.find_host_python({runtime.PYTHON_ENV: SYSTEM_PYTHON}, tmp_path)
    with pytest.raises(runtime.PythonRuntimeError, match=r"/nonexistent/python: does not run"):
        runtime.find_host_python({runtime.PYTHON_ENV: "/nonexistent/python"}, tmp_path)


def test_an_upper_bound_skips_the_newer_interpreters_and_names_them(tmp_path: Path) -> None:
    """A CLI whose Requires-Python stops below a version (OpenHands CLI: ==3.12.*) is given
    the newest interpreter under it; with none, the refusal says why each was not taken."""
    versions = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    python313 = next(iter(sorted(versions.glob("3.13.*/bin/python3.13"))), None)
    python312 = next(iter(sorted(versions.glob("3.12.*/bin/python3.12"))), None)
    if python313 is None or python312 is None:
        pytest.skip("SKIPPED LOUDLY: this machine lacks pyenv's 3.12 or 3.13")
    environ = {"PATH": "/usr/bin:/bin"}
    found = runtime.find_host_python(environ, versions.parent, below=(3, 13))
    assert found.version[:2] == (3, 12)
    assert runtime.probe(str(python313), below=(3, 13)) == (
        f"is {runtime.probe(str(python313)).dotted_version}, not older than 3.13"  # type: ignore[union-attr]
    )
    with pytest.raises(runtime.PythonRuntimeError, match=r"python3\.13: is 3\.13\.\d+, not older"):
        runtime.find_host_python({runtime.PYTHON_ENV: str(python313)}, tmp_path, below=(3, 13))


def test_set_runpath_refuses_what_it_cannot_rewrite(tmp_path: Path) -> None:
    script = _executable(tmp_path / "script")
    with pytest.raises(runtime.PythonRuntimeError, match="not a 64-bit little-endian ELF"):
        runtime.set_runpath(script, b"$ORIGIN")
    plain = tmp_path / "true"
    shutil.copy2("/bin/true", plain)  # Debian's coreutils carry no RUNPATH
    assert runtime.set_runpath(plain, b"$ORIGIN") is False
    assert plain.read_bytes() == Path("/bin/true").read_bytes()


@pytest.fixture(scope="module")
def copied(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real copy of this machine's newest CPython >= 3.12 (whatever the setting is)."""
    environ = {key: value for key, value in os.environ.items() if key != runtime.PYTHON_ENV}
    source = runtime.find_host_python(environ)
    target = tmp_path_factory.mktemp("tools") / "python"
    python = runtime.copy_interpreter(source, target)
    runtime.copy_describes_itself(python, target)
    return target


def test_the_copy_loads_its_own_libpython(copied: Path) -> None:
    ldd = subprocess.run(
        ["ldd", str(copied / "bin" / "python3")], capture_output=True, text=True, check=True
    )
    libpython = [line for line in ldd.stdout.splitlines() if "libpython" in line]
    if libpython:  # a shared build (pyenv's): from the copy, never from the host's prefix
        resolved = libpython[0].split("=>")[1].split("(")[0].strip()
        assert Path(resolved).resolve().is_relative_to(copied), ldd.stdout
    assert not (copied / "lib" / copied.name).exists()
    assert not list(copied.glob("lib/python3.*/test"))  # the test suite is left out
    assert list(copied.glob("lib/python3.*/site-packages")) != []


def test_the_copy_runs_from_a_bind_mounted_path_seeing_only_usr(copied: Path) -> None:
    """As a sandbox runs it: only /usr (and its /lib links) and the tools folder elsewhere."""
    script = (
        "import sys, ssl, sqlite3, ctypes, json; "
        "print(json.dumps([sys.prefix, sys.version_info[:2] >= (3, 12)]))"
    )
    result = subprocess.run(
        [
            "bwrap",
            "--unshare-all",
            "--die-with-parent",
            *("--ro-bind", "/usr", "/usr"),
            *("--symlink", "usr/lib", "/lib"),
            *("--symlink", "usr/lib64", "/lib64"),
            *("--symlink", "usr/bin", "/bin"),
            *("--ro-bind", str(copied.parent), "/opt/uhp-tools"),
            *("--proc", "/proc", "--dev", "/dev", "--clearenv"),
            "/opt/uhp-tools/python/bin/python3",
            "-c",
            script,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == '["/opt/uhp-tools/python", true]'
