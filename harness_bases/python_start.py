"""How a turn starts a Python program (Hermes, mini-swe-agent, Copilot's launcher, Kimi CLI,
OpenHands CLI): never with the user's site-packages.

A session's home persists from turn to turn and the agent's commands can write it. Python
imports `~/.local/lib/pythonX.Y/site-packages` at start-up, `.pth` files and
`usercustomize.py` included, before any code of ours runs: a file planted there by one turn's
command would run in the next turn's interpreter while that turn's credentials (the gateway
token, MCP tokens) are still in its environment, before the launcher takes them out. `-s`
leaves the user site out; the interpreter's own site-packages (read-only, in the tools folder)
stay.
"""

from __future__ import annotations

NO_USER_SITE = "-s"


def python_argv(python: str, *args: str) -> list[str]:
    """`python -s ARGS...`: the argv that starts `python` for a turn."""
    return [python, NO_USER_SITE, *args]
