"""Sessions on an environment, end to end (Environments §5, §6, §9): a real server, the real
CLI of the base under test in the sandbox under test, the scripted model provider. The
environments are version folders the tests prepare directly, as a build leaves them (a
Python virtual environment made with `python3 -m venv` at the version's mount path, a
package in it, the project's own files): the chapter's routes and builder are tested on
their own.

The agent reads the project at its mount and runs its scripts with its dependencies; every
change to it is refused by the mount; the response and the session name the environment
and version; two sessions, and two principals, see only their own; a task on a missing or
unbuilt environment is refused before it starts.

Run with UHP_TEST_SANDBOX=docker too (and UHP_TEST_DOCKER_RUNTIME=runsc: gVisor)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from storage.db import Database
from storage.tables import EnvironmentRow
from tests.support import passes, read_only_probe
from tests.support.base_under_test import BASE
from tests.support.environments import add_environment, add_version, principal_of
from tests.support.schema import validate
from tests.support.server import ServerProcess
from uhp_server.environments.layout import EnvironmentLayout, mount_path

pytestmark = pytest.mark.slow

PYTHON = "python3.11"  # the interpreter both sandboxes' systems hold at /usr/bin
LIBRARY = "teaser_lib.py"
HELPERS = "WHERE = 'the project helpers'\n"
CUT = "import sys\nimport teaser_lib\nprint(teaser_lib.cut(sys.argv[1]), 'via', sys.prefix)\n"


@pytest.fixture(scope="module")
def db(server: ServerProcess) -> Iterator[Database]:
    """The server's own database, for the environments' rows."""
    database = Database(server.database)
    yield database
    database.close()


@pytest.fixture(scope="module")
def layout(server: ServerProcess) -> EnvironmentLayout:
    return EnvironmentLayout(server.data_dir / "environments")


def unique(name: str) -> str:
    return f"{name} {uuid.uuid4().hex[:8]}"


def python_project(folder: Path, mount: str) -> None:
    """A project as a requirements.txt build leaves it: a virtual environment at `.venv`
    made for the mount path (its programs name it), a package installed in it, a program
    of the package's, and the project's own modules."""
    subprocess.run(
        ["/usr/bin/python3", "-m", "venv", "--without-pip", folder / ".venv"], check=True
    )
    site = folder / ".venv" / "lib" / PYTHON / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    (site / LIBRARY).write_text("def cut(episode):\n    return f'teaser {episode} cut'\n")
    program = folder / ".venv" / "bin" / "teaser"
    program.write_text(
        f"#!{mount}/.venv/bin/python\nimport sys, teaser_lib\nprint(teaser_lib.cut(sys.argv[1]))\n"
    )
    program.chmod(0o755)
    (folder / "cut.py").write_text(CUT)
    (folder / "helpers.py").write_text(HELPERS)
    (folder / "README.md").write_text("the teaser cutter\n")


def built_environment(
    db: Database, layout: EnvironmentLayout, principal: str = "default", name: str = "Teaser"
) -> EnvironmentRow:
    env = add_environment(db, principal_of(db, principal), unique(name), entry="python cut.py N")
    mount = mount_path(env.slug)
    add_version(db, layout, env, make=lambda folder: python_project(folder, mount))
    return env


def run(client: httpx.Client, prompt: str, **metadata: str) -> dict[str, Any]:
    body: dict[str, Any] = {"input": prompt}
    if metadata:
        body["metadata"] = metadata
    answered = client.post("/v1/responses", json=body)
    assert answered.status_code == 200, answered.text
    result = answered.json()
    validate("Response", result)
    assert result["status"] == "completed", result
    return result


def said(response: dict[str, Any]) -> str:
    return "".join(
        part["text"]
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
    )


def harness_on(client: httpx.Client, environment_id: str) -> str:
    created = client.post("/v1/harnesses", json=BASE.harness(environment=environment_id))
    assert created.status_code == 200, created.text
    assert created.json()["environment"] == environment_id
    return created.json()["id"]


def test_the_agent_runs_the_projects_scripts_with_its_dependencies_and_says_which_version(
    client: httpx.Client, db: Database, layout: EnvironmentLayout
) -> None:
    env = built_environment(db, layout)
    mount = mount_path(env.slug)
    harness_id = harness_on(client, env.id)
    # The virtual environment's program on PATH, the project's script with its package, the
    # project's own module from anywhere (PYTHONPATH), the project listed at its mount.
    prompt = (
        f"RUN teaser 12 && python3 {mount}/cut.py 13"
        f" && python3 -c 'import helpers; print(helpers.WHERE)'"
        f" && echo root=$PROJECT_ROOT && cd {mount} && ls"
        "\nSAY {output}"
    )
    result = run(client, prompt, harness_id=harness_id)
    out = said(result)
    assert "teaser 12 cut" in out
    assert f"teaser 13 cut via {mount}/.venv" in out
    assert "the project helpers" in out
    assert f"root={mount}" in out
    assert "README.md" in out and "cut.py" in out
    assert result["metadata"]["environment"] == env.id
    assert result["metadata"]["environment_version"] == "1"
    session = client.get(f"/v1/sessions/{result['metadata']['session_id']}").json()
    validate("Session", session)
    assert (session["environment"], session["environment_version"]) == (env.id, 1)
    turns = client.get(f"/v1/sessions/{session['id']}/turns").json()["turns"]
    assert [(t["environment"], t["environment_version"]) for t in turns] == [(env.id, 1)]


@passes.same_on_every_base
def test_every_change_to_the_project_is_refused_by_the_mount(
    client: httpx.Client, db: Database, layout: EnvironmentLayout
) -> None:
    env = add_environment(db, principal_of(db), unique("Probe"))
    mount = mount_path(env.slug)

    def probe(folder: Path) -> None:
        folder.rmdir()  # the probe's own project: world-writable, so only the mount refuses
        read_only_probe.project(folder)
        (folder / "probe.sh").write_text(read_only_probe.command(mount) + "\n")

    version = add_version(db, layout, env, make=probe, seal=False)
    result = run(client, f"RUN sh {mount}/probe.sh\nSAY {{output}}", environment=env.id)
    assert said(result).split("\n") == read_only_probe.EXPECTED
    folder = layout.version(env.id, version)
    assert (folder / "data.txt").read_text() == "from the project\n"
    assert sorted(p.name for p in folder.iterdir()) == ["data.txt", "probe.sh"]


@passes.same_on_every_base
def test_two_sessions_on_one_environment_see_neither_the_others_work_nor_other_versions(
    client: httpx.Client, db: Database, layout: EnvironmentLayout
) -> None:
    env = built_environment(db, layout)
    mount = mount_path(env.slug)
    first = run(client, "RUN echo first-session-secret > mine.txt\nSAY wrote", environment=env.id)
    # A rebuild: the next session reads version 2, and only it.
    add_version(db, layout, env, make=lambda folder: python_project(folder, mount))
    old = layout.version(env.id, 1)
    listing = "import os; print('env=' + ','.join(sorted(os.listdir('/env'))))"
    prompt = (
        f"RUN cat mine.txt; cat {old}/README.md; cat {old.parent}/2/README.md;"
        f' python3 -c "{listing}"; grep -F " {mount} " /proc/self/mountinfo'
        "\nSAY {output}"
    )
    second = run(client, prompt, environment=env.id)
    out = said(second)
    assert "first-session-secret" not in out  # its own working directory, empty
    assert "the teaser cutter" not in out  # no host path of any version reachable
    # ... nor named: the mount table shows the version's overlay, not its folder's path
    # (sandbox/neutral_mounts.py).
    (table_line,) = [line for line in out.splitlines() if f" {mount} " in line]
    assert str(layout.root) not in table_line and "henv_" not in table_line
    assert f"env={env.slug}" in out  # /env holds only its own environment
    assert second["metadata"]["environment_version"] == "2"
    assert first["metadata"]["session_id"] != second["metadata"]["session_id"]


@passes.same_on_every_base
@passes.same_in_every_sandbox
def test_another_principal_reaches_neither_the_environment_nor_its_sessions(
    client: httpx.Client,
    server: ServerProcess,
    other_key: str,
    db: Database,
    layout: EnvironmentLayout,
) -> None:
    mine = built_environment(db, layout)
    theirs = built_environment(db, layout, principal="other", name="Theirs")
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {other_key}"}, timeout=120
    ) as other:
        refused = other.post(
            "/v1/responses", json={"input": "SAY no", "metadata": {"environment": mine.id}}
        )
        assert refused.status_code == 404, refused.text
        assert refused.json()["error"]["code"] == "environment_not_found"
        refused = other.post("/v1/harnesses", json=BASE.harness(environment=mine.id))
        assert refused.status_code == 404 and refused.json()["error"]["code"] == (
            "environment_not_found"
        )
        listing = "import os; print('env=' + ','.join(sorted(os.listdir('/env'))))"
        mine_at = layout.version(mine.id, 1)
        result = run(
            other,
            f'RUN cat {mine_at}/README.md; python3 -c "{listing}"\nSAY {{output}}',
            environment=theirs.id,
        )
        out = said(result)
        assert out.count("env=") == 1 and f"env={theirs.slug}" in out
        assert "the teaser cutter" not in out


@passes.same_on_every_base
@passes.same_in_every_sandbox
def test_a_task_on_a_missing_or_unbuilt_environment_is_refused_before_it_starts(
    client: httpx.Client, db: Database, layout: EnvironmentLayout
) -> None:
    sessions_before = client.get("/v1/sessions", params={"limit": 100}).json()["sessions"]
    unbuilt = add_environment(db, principal_of(db), unique("Unbuilt"))
    add_version(db, layout, unbuilt, {"README.md": "x\n"}, ready=False)
    for named, status, code in (
        ("henv_" + "0" * 32, 404, "environment_not_found"),
        (unbuilt.id, 409, "environment_not_ready"),
    ):
        refused = client.post(
            "/v1/responses",
            json={
                "input": "RUN touch /tmp/started\nSAY started",
                "metadata": {"environment": named},
            },
        )
        assert refused.status_code == status, refused.text
        validate("ErrorEnvelope", refused.json())
        assert refused.json()["error"]["code"] == code
    sessions_after = client.get("/v1/sessions", params={"limit": 100}).json()["sessions"]
    assert [s["id"] for s in sessions_after] == [s["id"] for s in sessions_before]
