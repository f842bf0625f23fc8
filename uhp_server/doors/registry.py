"""Finding the doors: every door, built-in or a third party's, registers its `Door` in the
`uhp_server.doors` entry-point group under its name (`uhp`, `openai-chat`, ...), and the server
serves every registered door.

A door that fails to load stops the server, naming it and why, as the chosen sandbox does and
unlike a base (left out with a warning). A missing base shows in `/v1/harnesses` and the others
still run a task; a missing door shows nowhere: its clients would meet an ordinary 404 for a
contract the operator installed, indistinguishable from a wrong URL. No setting turns a door
off, so a broken one is a broken install, best found at start-up.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

from uhp_server.doors.door import Door

ENTRY_POINT_GROUP = "uhp_server.doors"


def _load(entry: EntryPoint) -> Door:
    """The door an entry point names; TypeError/ValueError (ImportError, …) when unusable."""
    found = entry.load()
    if not isinstance(found, Door):
        raise TypeError(f"{entry.value} is not a Door")
    if found.name != entry.name:
        raise ValueError(
            f"{entry.value} is registered as {entry.name!r} but names itself {found.name!r}"
        )
    if not (found.routers or found.sub_apps):
        raise ValueError(f"{entry.value} serves no routes")
    return found


def doors() -> dict[str, Door]:
    """Every registered door, by name, in name order. RuntimeError naming the first that does
    not load, and why."""
    found: dict[str, Door] = {}
    for entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        if entry.name in found:
            continue  # the same distribution seen twice on sys.path: the first wins
        try:
            found[entry.name] = _load(entry)
        except Exception as exc:
            raise RuntimeError(f"door {entry.name!r} cannot be loaded: {exc}") from exc
    return found
