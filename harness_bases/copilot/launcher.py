"""Starts the Copilot CLI for one turn, with the prompt on its stdin and a way to stop it.

This file is copied next to the pinned CLI at install time and run with Debian's python3
inside the sandbox; it imports nothing from UHP Server. `copilot --output-format json` reads
its prompt from stdin and has no control channel, so the launcher stands between:

- stdin: the first line is `{"prompt": …}`; the prompt goes to the CLI's stdin, which is
  then closed (a prompt never goes on a command line: above 128 KiB that fails). A later
  `{"type": "interrupt"}` line sends the CLI SIGINT, on which it stops the model call or
  tool that runs, reports `abort`, and keeps the session.
- stdout and stderr are the CLI's own (inherited): its JSON events reach the server as
  they are written.
- The launcher exits with the CLI, whatever its stdin does.

Usage: python3 launcher.py <copilot> [args…]
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading


def _exit_with(child: subprocess.Popen) -> None:
    code = child.wait()
    sys.stdout.flush()
    os._exit(code if code >= 0 else 128 - code)


def main() -> int:
    first = sys.stdin.buffer.readline()
    try:
        prompt = str(json.loads(first)["prompt"])
    except (ValueError, KeyError, TypeError):
        print("uhp launcher: no prompt on the first line of stdin", file=sys.stderr)
        return 2
    child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE)
    threading.Thread(target=_exit_with, args=(child,), daemon=True).start()
    assert child.stdin is not None
    try:
        child.stdin.write(prompt.encode("utf-8", errors="replace"))
        child.stdin.close()
    except OSError:
        pass  # it already exited: _exit_with reports it
    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict) and msg.get("type") == "interrupt" and child.poll() is None:
            child.send_signal(signal.SIGINT)
    child.wait()
    threading.Event().wait(5)  # _exit_with ends the process; never return first
    return 0


if __name__ == "__main__":
    sys.exit(main())
