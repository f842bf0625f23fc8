"""Every script in bench/ runs in its smoke mode (`--smoke`, bench/_smoke.py): tiny sizes, no
target held, so an interface change that breaks a benchmark fails here instead of when someone
next measures. Parametrized over the files in bench/: a new script is picked up, and one
without a smoke mode fails (argparse refuses `--smoke`). Files whose name starts with `_` are
parts the scripts share.

What a script uses and this machine has (an engine, gVisor, PostgreSQL, haproxy, LiteLLM) it
must use: the test requires it (bench/_smoke.py's REQUIRE_ENV). What the machine lacks the
script leaves out loudly; the test then fails under CI (scripts/test.sh provides them all but
LiteLLM) and is skipped, saying what was left out, elsewhere. A script that cannot run without
PostgreSQL (its NEEDS) runs in the PostgreSQL pass, which has the cluster to itself."""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import _smoke
from tests.support import postgres

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(p for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_"))
TIMEOUT = 600  # seconds, per script: a hang, not a slow machine, is what this catches
# What scripts/test.sh starts before its passes: under CI a script leaving one out fails.
CI_PROVIDES = frozenset({_smoke.DOCKER, _smoke.GVISOR, _smoke.POSTGRESQL, _smoke.HAPROXY})


def declared_needs(script: Path) -> frozenset[str]:
    """The script's module-level `NEEDS = (...)`, read without importing it."""
    for node in ast.parse(script.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "NEEDS" for t in node.targets
        ):
            needs = frozenset(ast.literal_eval(node.value))
            assert needs <= _smoke.KNOWN, f"{script.name}: NEEDS names {needs - _smoke.KNOWN}"
            return needs
    return frozenset()


@functools.cache
def on_this_machine() -> frozenset[str]:
    """What the benches may need that answers here, found the way the scripts find it."""
    absent = {
        _smoke.DOCKER: _smoke.docker_absent,
        _smoke.GVISOR: _smoke.gvisor_absent,
        _smoke.POSTGRESQL: _smoke.postgresql_absent,
        _smoke.HAPROXY: _smoke.haproxy_absent,
        _smoke.LITELLM: _smoke.litellm_absent,
    }
    return frozenset(name for name, why in absent.items() if not why())


def bench_env() -> dict[str, str]:
    """The test run's environment without its UHP_TEST_* choices (a base, a sandbox, a
    provider, a runtime under test): a bench measures its own defaults. The cluster's
    address and role stay."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("UHP_TEST_") or k.startswith("UHP_TEST_POSTGRES_")
    }
    env[_smoke.REQUIRE_ENV] = ",".join(sorted(on_this_machine()))
    return env


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_bench_script_runs_in_its_smoke_mode(script: Path) -> None:
    on_postgresql = postgres.TEST_DATABASE == "postgresql"
    if (_smoke.POSTGRESQL in declared_needs(script)) != on_postgresql:
        pytest.skip(
            "the PostgreSQL pass runs it (UHP_TEST_DATABASE=postgresql)"
            if not on_postgresql
            else "the main pass runs it"
        )
    done = subprocess.run(
        [sys.executable, str(script), "--smoke"],
        cwd=ROOT,
        env=bench_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    output = f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-6000:]}"
    assert done.returncode == 0, f"{script.name} --smoke exited {done.returncode}\n{output}"
    left_out = [line for line in done.stderr.splitlines() if line.startswith(_smoke.LEFT_OUT)]
    if left_out:
        message = f"{script.name} ran with parts left out:\n" + "\n".join(left_out)
        things = {line.removeprefix(_smoke.LEFT_OUT).split(":")[0].strip() for line in left_out}
        if os.environ.get("CI") and things & CI_PROVIDES:
            pytest.fail(message)
        print(f"\n{message}\n", file=sys.stderr)
        pytest.skip(message)


def test_the_smoke_set_is_every_script() -> None:
    """Every script there is found; the shared parts are not taken for scripts."""
    names = {p.name for p in SCRIPTS}
    assert {"overhead.py", "sandbox.py", "scale.py", "translation_compare.py"} <= names
    assert not any(name.startswith("_") for name in names)
    assert declared_needs(ROOT / "bench" / "scale.py") == {_smoke.POSTGRESQL, _smoke.HAPROXY}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_script_that_measures_postgresql_declares_it(script: Path) -> None:
    """Its smoke run then belongs to the PostgreSQL pass: CI's main pass has no cluster, and
    a PostgreSQL part left out there fails CI (stop 36's memory_recall.py)."""
    text = script.read_text()
    if "postgresql_databases(" in text or "postgresql_absent()" in text:
        assert _smoke.POSTGRESQL in declared_needs(script), f"{script.name}: NEEDS postgresql"
