"""The Unified Harness Protocol door: every `/v1` route of the protocol, the routes this server
adds to it (the harness events feed, trace deletion, files, sharing) and the shared view at
`/s/<token>`. Which optional chapters it serves: chapters.py."""

from uhp_server.doors.door import Door, GatedRouter
from uhp_server.doors.uhp import (
    discovery,
    environments,
    files,
    harness_events,
    harness_memories,
    harnesses,
    memories,
    sessions,
    share,
    tasks,
)
from uhp_server.doors.uhp.chapters import MEMORIES, turned_off
from uhp_server.engine import Engine
from uhp_server.http.versioning import SUPPORTED_VERSIONS


def _memories_on(engine: Engine) -> bool:
    return MEMORIES.capability not in turned_off(engine.settings)


door = Door(
    name="uhp",
    speaks=f"the Unified Harness Protocol ({', '.join(SUPPORTED_VERSIONS)}) and its share page",
    routers=(
        discovery.router,
        environments.router,
        harnesses.router,
        tasks.router,
        sessions.router,
        files.router,
        share.router,
        harness_events.router,
    ),
    # The Memories chapter: served unless the operator turns it off (UHP_MEMORIES=off).
    gated=(
        GatedRouter(memories.router, _memories_on),
        GatedRouter(harness_memories.router, _memories_on),
    ),
)

__all__ = ["door"]
