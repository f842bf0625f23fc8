"""Which environment, and which version of it, a task reads (Environments §4-§6), decided
before the task starts: a task on a missing environment, or on one with nothing built, is
refused here, before anything is stored, a session claimed or a CLI started.

- A new session reads the environment the task names (`metadata.environment`), else its
  harness's, at the version active now, and keeps that version for all its later turns: a
  rebuild or a rollback reaches the next session, never a conversation under way, whose
  earlier turns read the project as it was.
- A continued session reads the environment and version it started with. A task naming
  another environment there is refused (`uhpserver_environment_mismatch`, 409), as a task
  naming another harness is (`harness_mismatch`): the conversation and its working
  directory were made against that project, and switching it silently would break both. A
  client starts a new session to work in another environment. A harness re-pointed to
  another environment reaches the new sessions only, for the same reason.
"""

from __future__ import annotations

from storage import environments as environment_store
from storage.tables import SessionRow
from storage.unit import Tx
from uhp_server.environments.errors import environment_not_found, environment_not_ready
from uhp_server.environments.layout import EnvironmentLayout
from uhp_server.environments.mount import EnvironmentMount
from uhp_server.errors import VENDOR, ApiError

TASK_PARAM = "metadata.environment"


NOT_READY = "The environment has no finished build yet: build it, or wait for its build to end."


def environment_mismatch(session: SessionRow) -> ApiError:
    started = session.environment_id or "no environment"
    return ApiError(
        409,
        VENDOR + "environment_mismatch",
        f"The session was started with {started}; start a new session to work in another.",
        param=TASK_PARAM,
    )


def task_environment(
    tx: Tx,
    layout: EnvironmentLayout,
    principal_id: str,
    named: str | None,
    harness_environment: str | None,
    session: SessionRow | None,
) -> EnvironmentMount | None:
    """What the task's turn mounts (None: no environment). `named`: the task's own
    `metadata.environment`; `session`: the session it continues, None for a new one."""
    if session is not None:
        return _continued(tx, layout, principal_id, named, session)
    environment_id = named or harness_environment
    if not environment_id:
        return None
    param = TASK_PARAM if named else "environment"
    environment = environment_store.get_environment(tx, principal_id, environment_id)
    if environment is None:
        if named:
            raise environment_not_found(param=param)
        raise environment_not_found("The harness names an environment that is not there.", param)
    if environment.active_version is None:
        raise environment_not_ready(NOT_READY, param)
    return _mount(
        layout, environment.id, environment.slug, environment.active_version, environment.entry
    )


def _continued(
    tx: Tx, layout: EnvironmentLayout, principal_id: str, named: str | None, session: SessionRow
) -> EnvironmentMount | None:
    if named and named != session.environment_id:
        raise environment_mismatch(session)
    if session.environment_id is None or session.environment_version is None:
        return None
    environment = environment_store.get_environment(tx, principal_id, session.environment_id)
    if environment is None:
        raise environment_not_found(
            "The environment this session read has been deleted.", TASK_PARAM
        )
    version = environment_store.get_version(tx, environment.id, session.environment_version)
    if version is None or version.status != environment_store.READY:
        raise environment_not_ready(NOT_READY, TASK_PARAM)
    return _mount(layout, environment.id, environment.slug, version.version, environment.entry)


def _mount(
    layout: EnvironmentLayout, environment_id: str, slug: str, version: int, entry: str
) -> EnvironmentMount:
    return EnvironmentMount(
        environment_id=environment_id,
        slug=slug,
        version=version,
        host_path=layout.version(environment_id, version),
        entry=entry,
    )
