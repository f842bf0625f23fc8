"""The owner's console: the server's own pages for a person in a browser, at `/console`.

A key is exchanged for a sign-in (engine.sign_ins), held by the browser as an HttpOnly,
SameSite=Strict cookie; every page then calls the same engine facade the API does, as the
key's principal, and adds no privilege (docs/console.md)."""

from uhp_server.doors.console.account import router as account
from uhp_server.doors.console.files import router as files
from uhp_server.doors.console.harnesses import router as harnesses
from uhp_server.doors.console.live import router as live
from uhp_server.doors.console.pages import router as pages
from uhp_server.doors.console.run import router as run
from uhp_server.doors.console.sessions import router as sessions
from uhp_server.doors.door import Door

door = Door(
    name="console",
    speaks="the owner's console, HTML for a browser",
    routers=(pages, sessions, live, files, run, account, harnesses),
)
