"""The fenced examples of README.md and docs/, found and run the way a reader pastes them.

A page's ```bash, ```sh and ```python blocks run in order in one bash session (so `UHP_KEY`,
`H`, `HARNESS` carry from block to block; a python block runs with the venv's python, reading
what bash exported). Every HTTP call must succeed: `curl` is a function adding
`--fail-with-body`, and the session runs with `set -euo pipefail`, so a 401 or an unset
variable fails the page. A block that cannot run here is marked just before it with
`<!-- example: not run (why) -->`; every other block runs.

What a reader fills in (their key, their server's address, their model endpoint, their MCP
server) is written in the docs as a placeholder; `fill_in` puts the test's values in its place.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
RUNNABLE = ("bash", "sh", "python")
NOT_RUN = re.compile(r"^<!-- example: not run \((?P<why>.+)\) -->$")
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<language>[\w+-]*)[ \t]*$")
PYTHON_END = "__UHP_DOC_EXAMPLE_PYTHON__"
SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin")  # after the venv's bin, which comes first

# The placeholders the docs use for what a reader fills in, by what they stand for.
SERVER = "http://127.0.0.1:8080"  # the reader's server, started on its defaults
KEY = "uhp_sk_…"  # the key printed on first start
MODEL_ENDPOINT = "https://inference.example/v1"  # a platform's model endpoint (Oumi, AgentOS)
MODEL_ENDPOINT_KEY = "sk-…"  # its key
MCP_SERVER = "https://mcp.example.com/mcp"  # an MCP server the harness reaches

# Every failing command ends the page; `curl` fails on an HTTP error with the body shown.
PRELUDE = """set -euo pipefail
shopt -s inherit_errexit
curl() { command curl --fail-with-body --show-error "$@"; }
"""


@dataclass(frozen=True)
class Example:
    page: Path
    line: int  # the opening fence's, counted from 1
    language: str
    code: str
    not_run: str | None  # the marker's reason, when the page says it cannot run here

    @property
    def where(self) -> str:
        page = self.page.relative_to(REPO) if self.page.is_relative_to(REPO) else self.page
        return f"{page}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.language in RUNNABLE and self.not_run is None


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def examples_in(page: Path) -> list[Example]:
    """Every fenced block of `page` in a language a reader runs, in order."""
    found: list[Example] = []
    lines = page.read_text().splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        end = _closing(lines, index + 1)
        if opening["language"] in RUNNABLE:
            indent = len(opening["indent"])
            code = "\n".join(line[indent:] for line in lines[index + 1 : end])
            marker = _marker_before(lines, index)
            found.append(Example(page, index + 1, opening["language"], code, marker))
        index = end + 1
    return found


def _closing(lines: list[str], start: int) -> int:
    for index in range(start, len(lines)):
        fence = FENCE.match(lines[index])
        if fence is not None and not fence["language"]:
            return index
    raise ValueError(f"a fence opened before line {start} is never closed")


def _marker_before(lines: list[str], fence: int) -> str | None:
    """The reason of a `not run` marker on the last non-blank line before the fence."""
    for line in reversed(lines[:fence]):
        if line.strip():
            marker = NOT_RUN.match(line.strip())
            return marker["why"] if marker else None
    return None


def fill_in(code: str, values: Mapping[str, str]) -> str:
    """`code` with each placeholder replaced by the test's value (longest first)."""
    for placeholder in sorted(values, key=len, reverse=True):
        code = code.replace(placeholder, values[placeholder])
    return code


def page_script(examples: list[Example], values: Mapping[str, str]) -> str:
    """One bash script running a page's runnable examples in order, each announced on stderr
    (the last announcement before a failure names the example that failed)."""
    parts = [PRELUDE]
    for example in examples:
        if not example.runs:
            continue
        code = fill_in(example.code, values)
        parts.append(f"echo {_quote('>>> example ' + example.where)} >&2")
        if example.language == "python":
            parts.append(f"python - <<'{PYTHON_END}'\n{code}\n{PYTHON_END}")
        else:
            parts.append(code)
    return "\n".join(parts) + "\n"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


@dataclass(frozen=True)
class PageRun:
    returncode: int
    stdout: str
    stderr: str

    def failed_example(self) -> str:
        """The example that was running when the page stopped, from its announcement."""
        announced = re.findall(r"^>>> example (.+)$", self.stderr, re.M)
        return announced[-1] if announced else "(before the first example)"


def run_page(
    examples: list[Example],
    values: Mapping[str, str],
    workdir: Path,
    env: Mapping[str, str],
    timeout: float,
) -> PageRun:
    """Run a page's examples in `workdir` (with `.venv` linked to this venv, as after the
    install; its `bin` first on PATH, so `python` and `pip` are the venv's)."""
    workdir.mkdir(parents=True, exist_ok=True)
    venv = workdir / ".venv"
    if not venv.exists():
        venv.symlink_to(sys.prefix)
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    script = workdir / "examples.sh"
    script.write_text(page_script(examples, values))
    full_env = {"PATH": os.pathsep.join(SYSTEM_PATH), "HOME": str(home), "LANG": "C.UTF-8", **env}
    full_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{full_env['PATH']}"
    done = subprocess.run(
        ["bash", str(script)],
        cwd=workdir,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return PageRun(done.returncode, done.stdout, done.stderr)
