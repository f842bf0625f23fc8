"""Every fenced shell and Python example of README.md and docs/ runs against a real server
(issue 33): a page's examples in order, in one bash session, as a reader pastes them
(tests/support/doc_examples.py), with the scripted provider as the model, a real MCP server
for the harness's MCP server, and the provider again as the model endpoint a platform (Oumi,
AgentOS) hands over. A block that cannot run here says why in the page; every other one runs
and passes, so a doc example can never break silently again."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness_bases.claude_code import ClaudeCodeBase
from tests.conftest import API_KEY, MODELS, PROVIDER_KEY, installed_tools, server_env
from tests.scripted_provider import RunningProvider, start_provider
from tests.support import doc_examples
from tests.support.doc_examples import Example, examples_in, pages, run_page
from tests.support.doc_installs import install_problems
from tests.support.mcp_server import RunningMcpServer
from tests.support.server import ServerProcess

# The model the docs name (the reader's provider serves it; the scripted one does here).
DOCS_MODEL = "gpt-5.4"
PAGE_TIMEOUT = 240.0  # seconds: a page's examples all together
REGISTRIES = "pypi.org,files.pythonhosted.org"  # README's environment installs from PyPI
CA_BUNDLE = os.environ.get("UHP_TEST_BUILD_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")


def pages_with_examples() -> list[Path]:
    return [page for page in pages() if any(e.runs for e in examples_in(page))]


def every_example() -> list[Example]:
    return [example for page in pages() for example in examples_in(page)]


@pytest.fixture(scope="module")
def docs_provider() -> Iterator[RunningProvider]:
    with start_provider(PROVIDER_KEY, [*MODELS, DOCS_MODEL]) as running:
        yield running


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[RunningMcpServer]:
    running = RunningMcpServer().start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def docs_server(
    tmp_path_factory: pytest.TempPathFactory, docs_provider: RunningProvider, base_installed: Path
) -> Iterator[ServerProcess]:
    env = server_env(
        docs_provider,
        # The platform's model endpoint and the harness's MCP server are on loopback here.
        UHP_MODEL_CONNECTION_ALLOW_PRIVATE_HOSTS="true",
        UHP_MCP_ALLOW_PRIVATE_HOSTS="true",
        # The AgentOS door acts as the principal of the key the docs use.
        UHP_AGENTOS_PRINCIPAL="default",
        UHP_EGRESS_ALLOW_HOSTS=REGISTRIES,
        UHP_EGRESS_ALLOW_PRIVATE_HOSTS="true",  # the registries resolve to TEST-NET here
        UHP_ENVIRONMENT_BUILD_CA_BUNDLE=CA_BUNDLE,
    )
    running = ServerProcess(tmp_path_factory.mktemp("docs"), env).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def values(
    docs_server: ServerProcess, docs_provider: RunningProvider, mcp_server: RunningMcpServer
) -> dict[str, str]:
    """What a reader fills in, as the test fills it in."""
    return {
        doc_examples.SERVER: docs_server.url,
        doc_examples.KEY: API_KEY,
        doc_examples.MODEL_ENDPOINT: docs_provider.base_url,
        doc_examples.MODEL_ENDPOINT_KEY: PROVIDER_KEY,
        doc_examples.MCP_SERVER: mcp_server.url,
    }


def reader_env(server: ServerProcess) -> dict[str, str]:
    """A reader's shell after "Using it": their key exported as UHP_KEY, `uhp-server`
    commands reaching the server's data, Claude Code installed (the pinned one)."""
    claude = installed_tools("claude-code") / "claude-code" / ClaudeCodeBase.cli_version
    return {
        "UHP_KEY": API_KEY,
        "UHP_DATA_DIR": str(server.data_dir),
        "PATH": os.pathsep.join([str(claude / "node_modules" / ".bin"), *doc_examples.SYSTEM_PATH]),
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    "page", pages_with_examples(), ids=lambda p: str(p.relative_to(doc_examples.REPO))
)
def test_every_example_of_the_page_runs(
    page: Path, values: dict[str, str], docs_server: ServerProcess, tmp_path: Path
) -> None:
    run = run_page(examples_in(page), values, tmp_path, reader_env(docs_server), PAGE_TIMEOUT)
    assert run.returncode == 0, (
        f"{run.failed_example()} failed (exit {run.returncode}):\n"
        f"--- stderr\n{run.stderr[-4000:]}\n--- stdout\n{run.stdout[-4000:]}"
    )


BROKEN_CURL = """# Broken

```bash
export UHP_KEY=uhp_sk_…
curl -s http://127.0.0.1:8080/v1/harnesses -H "Authorization: Bearer $UHP_API_KEY"
```
"""

BROKEN_PYTHON = """# Broken

```python
from openai import OpenAI

client = OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="uhp_sk_not_a_key")
print(client.models.list())
```
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "said"),
    [
        # The Oumi example's old variable, defined (a reader's other shell): the 401 fails it.
        (BROKEN_CURL, "401"),
        (BROKEN_PYTHON, "AuthenticationError"),
    ],
    ids=["curl-401", "python-401"],
)
def test_an_example_whose_call_is_refused_fails_its_page(
    text: str, said: str, values: dict[str, str], docs_server: ServerProcess, tmp_path: Path
) -> None:
    page = tmp_path / "broken.md"
    page.write_text(text)
    env = {**reader_env(docs_server), "UHP_API_KEY": "uhp_sk_a_key_of_another_server"}
    run = run_page(examples_in(page), values, tmp_path / "run", env, PAGE_TIMEOUT)
    assert run.returncode != 0 and said in run.stderr + run.stdout, run
    assert run.failed_example().endswith("broken.md:3")


@pytest.mark.slow
def test_an_unset_variable_fails_its_page(
    values: dict[str, str], docs_server: ServerProcess, tmp_path: Path
) -> None:
    page = tmp_path / "broken.md"
    page.write_text(BROKEN_CURL)
    run = run_page(examples_in(page), values, tmp_path / "run", reader_env(docs_server), 60)
    assert run.returncode != 0 and "UHP_API_KEY: unbound variable" in run.stderr, run


def test_examples_are_found_with_their_markers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Text.\n\n```bash\necho one\n```\n\n<!-- example: not run (needs a public host name) -->\n"
        "```sh\ndeploy\n```\n\n```json\n{}\n```\n\n- a list\n\n  ```python\n  print(2)\n  ```\n"
    )
    found = examples_in(page)
    assert [(e.line, e.language, e.code, e.not_run) for e in found] == [
        (3, "bash", "echo one", None),
        (8, "sh", "deploy", "needs a public host name"),
        (18, "python", "print(2)", None),
    ]
    assert [e.runs for e in found] == [True, False, True]


def test_every_example_not_run_says_why_and_they_stay_few() -> None:
    marked = [e for e in every_example() if e.not_run is not None]
    for example in marked:
        assert len(example.not_run or "") >= 10, f"{example.where}: say why it cannot run"
    runnable = [e for e in every_example() if e.runs]
    assert len(marked) <= len(runnable), [e.where for e in marked]


def test_placeholders_are_filled_in_longest_first() -> None:
    code = 'curl http://127.0.0.1:8080/x -H "Bearer uhp_sk_…" -d \'{"api_key": "sk-…"}\''
    filled = doc_examples.fill_in(
        code, {doc_examples.SERVER: "http://h:1", doc_examples.KEY: "K", "sk-…": "P"}
    )
    assert filled == 'curl http://h:1/x -H "Bearer K" -d \'{"api_key": "P"}\''


def test_every_install_line_installs_the_release_the_tests_run() -> None:
    """A page's `pip install X` names a requirement the tested version satisfies, with every
    upper bound pyproject.toml puts on X: `pip install mcp` gave a reader mcp 2.x, whose
    client the cookbook's MCP example imports no longer (the tests ran 1.x)."""
    problems = [problem for page in pages() for problem in install_problems(page)]
    assert problems == []


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("`.venv/bin/pip install mcp`", "lacks pyproject.toml's <2"),
        ("`.venv/bin/pip install 'mcp<1.0,<2'`", "excludes the tested"),
        ("`.venv/bin/pip install uhp-no-such-package`", "not installed with the tests"),
    ],
    ids=["unbounded", "another-release", "untested"],
)
def test_an_install_line_that_drifts_from_the_tests_is_caught(
    line: str, said: str, tmp_path: Path
) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"# Page\n\nThe client ({line}):\n")
    problems = install_problems(page)
    assert len(problems) == 1 and said in problems[0], problems
