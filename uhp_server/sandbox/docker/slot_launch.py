"""How a ready pool's container learns its turn: a shell script on its stdin.

A slot's container starts ahead of any turn (ready_pool.py) running, under the image's
uhp-launch (which starts the gateway relay), a shell that waits on its stdin. Once the turn's
folders are mounted into the slot, the server writes one line holding a length, then that
many bytes of script: change to the turn's working folder, export the turn's environment,
exec the CLI. The CLI then owns the stdin that follows, its JSON-RPC pipe, exactly as a
container created for the turn would (dash's `read` takes one byte at a time and `head -c`
no more than it is asked, so nothing of what follows is consumed).

The result matches a container created for the turn: the image's environment (PATH), the
engine's (HOSTNAME, HOME), the launcher shell's PWD (the working folder) and the
invocation's on top; the OLDPWD our `cd` leaves is dropped, as a created container has none.
"""

from __future__ import annotations

import re
import shlex

from harness_bases.base import Invocation

# The slot's program, after uhp-launch: wait for the length, read the script, run it. A
# closed stdin (the server went away before binding the slot) ends it at once.
WAITING = 'read -r size && turn=$(head -c "$size") && eval "$turn"'
COMMAND = ("/bin/sh", "-c", WAITING)

# What `export` accepts as a name; any other (which Docker would take) goes the cold way.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Bigger than any CLI's invocation; a pipe takes it at once.
MAX_SCRIPT_BYTES = 1024 * 1024


def turn_script(invocation: Invocation) -> bytes | None:
    """The script that makes the waiting shell the turn's CLI, or None when the invocation
    cannot be said this way (the turn then creates its own container)."""
    if not invocation.argv or any(not _NAME.match(name) for name in invocation.env):
        return None
    words = [invocation.cwd, *invocation.env.keys(), *invocation.env.values(), *invocation.argv]
    if any("\0" in word for word in words):
        return None
    lines = [
        f"cd -- {shlex.quote(invocation.cwd)} || exit 126",
        "unset OLDPWD",
        *(f"export {shlex.quote(f'{name}={value}')}" for name, value in invocation.env.items()),
        "exec " + " ".join(shlex.quote(word) for word in invocation.argv),
    ]
    try:
        script = ("\n".join(lines) + "\n").encode()
    except UnicodeEncodeError:  # a lone surrogate: not for a shell's bytes; a cold start says it
        return None
    return script if len(script) <= MAX_SCRIPT_BYTES else None


def go_message(script: bytes) -> bytes:
    """What the server writes on the slot's stdin: the length line, then the script."""
    return b"%d\n" % len(script) + script
