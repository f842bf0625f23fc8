"""Sessions on an environment, in process (the FakeBase, the FakeSandbox): a harness names
one of its principal's environments; a task's `metadata.environment` overrides it; a task on
a missing or unbuilt environment is refused before anything is stored or started; a new
session keeps the version active at its start; each turn mounts that version read-only with
its dependencies first in the agent's environment and a note in its instructions; the
response, the session and its turns say which version (Environments §4-§6).

The environments are rows and folders made directly (tests/support/environments.py)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from storage import environments as environment_store
from storage.tables import EnvironmentRow
from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.environments import add_environment, add_version, principal_of
from tests.support.fakes import FakeProcess
from tests.support.in_process import InProcess, in_process
from tests.support.schema import validate
from uhp_server.environments.layout import EnvironmentLayout
from uhp_server.sandbox.base import ExtraMount

# The runtime image's profile.d script (a login shell's PATH, environments/turn.py).
PROFILE = Path(__file__).parents[1] / "uhp_server/sandbox/docker/image/uhp-environment.sh"
PROJECT = {"README.md": "the teaser cutter\n", "cut.py": "print('cut')\n"}


@pytest.fixture
async def server(tmp_path: Path, provider: RunningProvider) -> AsyncIterator[InProcess]:
    async with in_process(tmp_path / "data", provider.base_url, PROVIDER_KEY) as running:
        yield running


def layout(server: InProcess) -> EnvironmentLayout:
    return EnvironmentLayout(server.ctx.settings.environments_dir)


def environment(server: InProcess, name: str = "Teaser Cutter", **kwargs: Any) -> EnvironmentRow:
    return add_environment(server.ctx.db, principal_of(server.ctx.db), name, **kwargs)


def built(server: InProcess, env: EnvironmentRow, files: dict[str, str] | None = None) -> int:
    return add_version(server.ctx.db, layout(server), env, files or PROJECT)


def count(server: InProcess, table: str) -> int:
    rows = server.ctx.db.run(lambda tx: tx.rows(f"SELECT count(*) FROM {table}", {}))
    return int(rows[0][0])


async def harness(server: InProcess, **fields: Any) -> dict[str, Any]:
    created = await server.client.post("/v1/harnesses", json={"base": "fake", **fields})
    assert created.status_code == 200, created.text
    return created.json()


async def task(server: InProcess, status: int = 200, **metadata: str) -> dict[str, Any]:
    body: dict[str, Any] = {"input": "hello"}
    if metadata:
        body["metadata"] = metadata
    answered = await server.client.post("/v1/responses", json=body)
    assert answered.status_code == status, answered.text
    return answered.json()


async def follow_up(server: InProcess, previous: dict[str, Any], **metadata: str) -> Any:
    body: dict[str, Any] = {"input": "hello", "previous_response_id": previous["id"]}
    if metadata:
        body["metadata"] = metadata
    return await server.client.post("/v1/responses", json=body)


def refusal(answered: Any, status: int, code: str, param: str) -> None:
    assert answered.status_code == status, answered.text
    body = answered.json()
    validate("ErrorEnvelope", body)
    assert body["error"]["code"] == code, body
    assert body["error"]["param"] == param, body


def mounted(proc: FakeProcess) -> tuple[ExtraMount, ...]:
    return proc.mounts.extra


# -- a harness names an environment ----------------------------------------------------------
async def test_a_harness_names_its_principals_environment_and_reads_it_back(server):
    env = environment(server)
    created = await harness(server, environment=env.id)
    assert created["environment"] == env.id
    read = await server.client.get(f"/v1/harnesses/{created['id']}")
    assert read.json()["environment"] == env.id
    validate("Harness", read.json())
    # A PUT of what was read keeps it; one without it leaves the harness on none.
    put = await server.client.put(f"/v1/harnesses/{created['id']}", json=read.json())
    assert put.status_code == 200 and put.json()["environment"] == env.id
    cleared = await server.client.put(f"/v1/harnesses/{created['id']}", json={"name": "plain"})
    assert cleared.status_code == 200 and "environment" not in cleared.json()


async def test_a_harness_naming_another_principals_or_no_environment_is_refused(server):
    others = add_environment(server.ctx.db, principal_of(server.ctx.db, "someone-else"), "Theirs")
    before = count(server, "harness")
    for named in (others.id, "henv_0123456789abcdef0123456789abcdef"):
        answered = await server.client.post(
            "/v1/harnesses", json={"base": "fake", "environment": named}
        )
        refusal(answered, 404, "environment_not_found", "environment")
    assert count(server, "harness") == before  # nothing written
    mine = await harness(server)
    answered = await server.client.put(
        f"/v1/harnesses/{mine['id']}", json={"environment": others.id}
    )
    refusal(answered, 404, "environment_not_found", "environment")
    assert "environment" not in (await server.client.get(f"/v1/harnesses/{mine['id']}")).json()


# -- refused before the task starts ----------------------------------------------------------
async def assert_nothing_started(server: InProcess, responses: int, sessions: int) -> None:
    assert count(server, "response") == responses
    assert count(server, "session") == sessions
    assert server.sandbox.started == []  # no CLI started
    assert server.base.specs == []


async def test_a_task_on_a_missing_environment_is_refused_404_before_it_starts(server):
    await task(server)  # the default harnesses exist; a session and a response
    server.sandbox.started.clear()
    server.base.specs.clear()
    responses, sessions = count(server, "response"), count(server, "session")
    others = add_environment(server.ctx.db, principal_of(server.ctx.db, "someone-else"), "Theirs")
    built(server, others)
    for named in ("henv_0123456789abcdef0123456789abcdef", others.id):
        answered = await server.client.post(
            "/v1/responses", json={"input": "hello", "metadata": {"environment": named}}
        )
        refusal(answered, 404, "environment_not_found", "metadata.environment")
    await assert_nothing_started(server, responses, sessions)


async def test_a_task_on_an_environment_with_nothing_built_is_refused_409(server):
    env = environment(server)
    add_version(server.ctx.db, layout(server), env, PROJECT, ready=False)  # still building
    answered = await server.client.post(
        "/v1/responses", json={"input": "hello", "metadata": {"environment": env.id}}
    )
    refusal(answered, 409, "environment_not_ready", "metadata.environment")
    await assert_nothing_started(server, 0, 0)


async def test_a_harness_whose_environment_was_deleted_refuses_its_tasks(server):
    env = environment(server)
    built(server, env)
    named = await harness(server, environment=env.id)
    server.ctx.db.run(environment_store.delete_environment, env.id)
    answered = await server.client.post(
        "/v1/responses", json={"input": "hello", "metadata": {"harness_id": named["id"]}}
    )
    refusal(answered, 404, "environment_not_found", "environment")
    await assert_nothing_started(server, 0, 0)


async def test_the_chat_door_refuses_in_its_own_format(server):
    models = (await server.client.get("/openai/v1/models")).json()["data"]
    answered = await server.client.post(
        "/openai/v1/chat/completions",
        json={
            "model": models[0]["id"],
            "messages": [{"role": "user", "content": "hello"}],
            "metadata": {"environment": "henv_0123456789abcdef0123456789abcdef"},
        },
    )
    assert answered.status_code == 404, answered.text
    assert answered.json()["error"]["code"] == "environment_not_found"
    await assert_nothing_started(server, 0, 0)


# -- what a turn on an environment gets ------------------------------------------------------
async def test_a_turn_mounts_the_active_version_read_only_with_its_variables_and_note(server):
    env = environment(server, entry="python cut.py --episode N")
    version = built(server, env)
    (layout(server).version(env.id, version) / "apt" / "usr" / "bin").mkdir(parents=True)
    named = await harness(server, environment=env.id)
    answered = await task(server, harness_id=named["id"])
    assert answered["status"] == "completed"
    (proc,) = server.sandbox.started
    mount = "/env/teaser-cutter"
    assert mounted(proc) == (ExtraMount(layout(server).version(env.id, version), mount),)
    env_vars = proc.invocation.env
    assert env_vars["PATH"].split(":")[:3] == [
        f"{mount}/.venv/bin",
        f"{mount}/node_modules/.bin",
        f"{mount}/apt/usr/bin",
    ]
    assert env_vars["PYTHONPATH"].split(":")[0] == mount
    assert env_vars["NODE_PATH"].split(":")[0] == f"{mount}/node_modules"
    assert env_vars["PROJECT_ROOT"] == mount
    assert env_vars["UHP_ENVIRONMENT_PATH"] == ":".join(env_vars["PATH"].split(":")[:3])
    assert "LD_LIBRARY_PATH" not in env_vars  # no apt libraries in this version
    (spec,) = server.base.specs
    note = spec.system_prompt
    assert mount in note and "read-only" in note and "shared" in note
    assert "installed" in note and spec.paths.workspace in note
    assert "python cut.py --episode N" in note


async def test_the_base_path_follows_the_environments(server):
    """Whatever the base puts on PATH comes after the environment's programs."""
    env = environment(server)
    built(server, env)
    original = server.base.prepare

    def prepare(turn):  # a base whose PATH is its own
        invocation = original(turn)
        invocation.env["PATH"] = "/tools/bin:/usr/bin"
        invocation.env["PYTHONPATH"] = "/tools/py"
        return invocation

    server.base.prepare = prepare
    await task(server, environment=env.id)
    (proc,) = server.sandbox.started
    path = proc.invocation.env["PATH"].split(":")
    assert path[0] == "/env/teaser-cutter/.venv/bin" and path[-2:] == ["/tools/bin", "/usr/bin"]
    assert proc.invocation.env["PYTHONPATH"] == "/env/teaser-cutter:/tools/py"


async def test_a_turn_without_an_environment_mounts_none_and_says_nothing(server):
    answered = await task(server)
    (proc,) = server.sandbox.started
    assert mounted(proc) == () and "PROJECT_ROOT" not in proc.invocation.env
    assert "environment" not in answered["metadata"]
    session = (await server.client.get(f"/v1/sessions/{answered['metadata']['session_id']}")).json()
    assert "environment" not in session


async def test_the_tasks_environment_overrides_the_harnesss(server):
    default, override = environment(server, "Default One"), environment(server, "Other One")
    built(server, default)
    version = built(server, override)
    named = await harness(server, environment=default.id)
    answered = await task(server, harness_id=named["id"], environment=override.id)
    (proc,) = server.sandbox.started
    assert mounted(proc)[0] == (
        ExtraMount(layout(server).version(override.id, version), "/env/other-one")
    )
    assert answered["metadata"]["environment"] == override.id


# -- which version, and what says so ---------------------------------------------------------
async def test_a_session_keeps_its_version_after_a_rebuild_and_a_new_one_reads_the_new(server):
    env = environment(server)
    first = built(server, env)
    named = await harness(server, environment=env.id)
    opened = await task(server, harness_id=named["id"])
    second = built(server, env, {"README.md": "rebuilt\n"})  # active now
    continued = await follow_up(server, opened)
    assert continued.status_code == 200, continued.text
    fresh = await task(server, harness_id=named["id"])
    kept, new = server.sandbox.started[1], server.sandbox.started[2]
    assert mounted(kept)[0].source == layout(server).version(env.id, first)
    assert mounted(new)[0].source == layout(server).version(env.id, second)
    assert continued.json()["metadata"]["environment_version"] == str(first)
    assert fresh["metadata"]["environment_version"] == str(second)
    # A rollback reaches the next new session, never the one under way.
    assert server.ctx.db.run(environment_store.activate, env.id, first)
    again = await follow_up(server, fresh)
    assert again.status_code == 200 and mounted(server.sandbox.started[3])[0].source == (
        layout(server).version(env.id, second)
    )


async def test_the_response_session_and_turns_say_which_environment_and_version(server):
    env = environment(server)
    version = built(server, env)
    answered = await task(server, environment=env.id)
    validate("Response", answered)
    assert answered["metadata"]["environment"] == env.id
    assert answered["metadata"]["environment_version"] == str(version)
    read = (await server.client.get(f"/v1/responses/{answered['id']}")).json()
    assert read["metadata"]["environment"] == env.id
    session_id = answered["metadata"]["session_id"]
    session = (await server.client.get(f"/v1/sessions/{session_id}")).json()
    validate("Session", session)
    assert session["environment"] == env.id and session["environment_version"] == version
    listed = (await server.client.get("/v1/sessions")).json()["sessions"]
    assert [s["environment"] for s in listed if s["id"] == session_id] == [env.id]
    turns = (await server.client.get(f"/v1/sessions/{session_id}/turns")).json()["turns"]
    assert [(t["environment"], t["environment_version"]) for t in turns] == [(env.id, version)]
    rows = server.ctx.db.run(
        lambda tx: tx.rows(
            "SELECT environment_id, environment_version FROM response WHERE id = :id",
            {"id": answered["id"]},
        )
    )
    assert tuple(rows[0]) == (env.id, version)


async def test_a_continued_session_naming_another_environment_is_refused(server):
    first, other = environment(server, "First"), environment(server, "Second")
    built(server, first)
    built(server, other)
    opened = await task(server, environment=first.id)
    refusal(
        await follow_up(server, opened, environment=other.id),
        409,
        "uhpserver_environment_mismatch",
        "metadata.environment",
    )
    plain = await task(server)  # a session without one cannot take one up either
    refusal(
        await follow_up(server, plain, environment=first.id),
        409,
        "uhpserver_environment_mismatch",
        "metadata.environment",
    )
    same = await follow_up(server, opened, environment=first.id)
    assert same.status_code == 200, same.text
    assert len(server.sandbox.started) == 3  # the two refused never started


async def test_a_session_whose_version_folder_is_gone_fails_its_turn_clearly(server):
    env = environment(server)
    version = built(server, env)
    opened = await task(server, environment=env.id)
    folder = layout(server).version(env.id, version)
    for path in (folder, *folder.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    shutil.rmtree(folder)
    continued = await follow_up(server, opened)
    assert continued.status_code == 200, continued.text
    body = continued.json()
    assert body["status"] == "failed"
    assert body["error"]["code"] == "environment_unavailable"
    assert f"Version {version}" in body["error"]["message"]
    assert len(server.sandbox.started) == 1  # its CLI never started


def test_the_profile_puts_the_environments_programs_back_after_a_login_shell_reset() -> None:
    """/etc/profile of the docker image sets PATH afresh; the image's profile.d script puts the
    environment's programs back in front, once, and leaves a turn without one as it was."""
    programs = "/env/p/.venv/bin:/env/p/node_modules/.bin"
    login = f'PATH=/usr/bin:/bin; . {PROFILE}; . {PROFILE}; echo "$PATH"'
    for variables, expected in (
        ({"UHP_ENVIRONMENT_PATH": programs}, f"{programs}:/usr/bin:/bin"),
        ({}, "/usr/bin:/bin"),
    ):
        shell = subprocess.run(
            ["/bin/sh", "-c", login],
            env={"PATH": "/usr/bin:/bin", **variables},
            capture_output=True,
            text=True,
            check=True,
        )
        assert shell.stdout.strip() == expected
