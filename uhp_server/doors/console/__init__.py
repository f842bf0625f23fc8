"""The owner's console: the server's own pages for a person in a browser, at `/console`.

A key is exchanged for a sign-in (engine.sign_ins), held by the browser as an HttpOnly,
SameSite=Strict cookie; every page then calls the same engine facade the API does, as the
key's principal, and adds no privilege (docs/console.md)."""

from uhp_server.doors.console.account import router as account
from uhp_server.doors.console.environments import router as environments
from uhp_server.doors.console.files import router as files
from uhp_server.doors.console.harnesses import router as harnesses
from uhp_server.doors.console.live import router as live
from uhp_server.doors.console.memories import router as memories
from uhp_server.doors.console.pages import router as pages
from uhp_server.doors.console.run import router as run
from uhp_server.doors.console.sessions import router as sessions
from uhp_server.doors.door import Door, GatedRouter
from uhp_server.doors.uhp.chapters import MEMORIES, turned_off
from uhp_server.engine import Engine


def _memories_on(engine: Engine) -> bool:
    return MEMORIES.capability not in turned_off(engine.settings)


door = Door(
    name="console",
    speaks="the owner's console, HTML for a browser",
    routers=(pages, sessions, live, files, run, account, harnesses, environments),
    # The memories pages, as the chapter's routes: not there when UHP_MEMORIES=off.
    gated=(GatedRouter(memories, _memories_on),),
)
