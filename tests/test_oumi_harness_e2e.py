"""The Oumi harness protocol door, played by the platform against the base under test
(UHP_TEST_BASE) on a real server: the scripted provider in its Chat-Completions-only mode is
the platform's model connection (its key, model and generation settings)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import API_KEY, TEST_BASE, server_env
from tests.scripted_provider import RunningProvider, start_provider
from tests.support import passes
from tests.support.base_under_test import BASE
from tests.support.server import ServerProcess
from tests.support.written import everything_written

pytestmark = pytest.mark.slow

PLATFORM_KEY = "sk-platform-eval-key-19fe22"
MODEL = "oumi-eval-model"
SETTINGS = {"temperature": 0.2, "max_tokens": 400, "seed": 3}
# The question tool as the CLI names it to its model (the scripted provider also matches a
# prefixed name by its suffix, but Claude Code defers MCP tools, listing none).
# Gemini CLI's is its own `ask_user` (it asks natively, so the server's is not added).
ASK_TOOL = {"claude-code": "mcp__uhp-user__ask_user"}.get(TEST_BASE, "ask_user")
# The CLI's own question tool, where it has one that asks through the same machinery.
NATIVE_ASK_TOOLS = {
    "claude-code": ["AskUserQuestion"],
    "codex": ["request_user_input"],
    "hermes": ["clarify"],
}.get(TEST_BASE, [])
STATUS_FIELDS = {"protocol_version", "session_id", "invocation_id", "status", "error"}


@pytest.fixture(scope="module")
def platform() -> Iterator[RunningProvider]:
    with start_provider(PLATFORM_KEY, [MODEL], chat_only=True) as running:
        yield running


@pytest.fixture(scope="module")
def oumi_server(
    tmp_path_factory: pytest.TempPathFactory,
    provider: RunningProvider,
    platform: RunningProvider,
    base_installed: Path,
) -> Iterator[ServerProcess]:
    env = server_env(
        provider,
        UHP_MODEL_CONNECTION_ALLOW_PRIVATE_HOSTS="true",
        UHP_MAX_CONCURRENT_TURNS="2",
        UHP_PAUSED_TURN_KEEP_SECONDS="40",
    )
    running = ServerProcess(tmp_path_factory.mktemp("oumi"), env).start()
    yield running
    running.stop()


class Platform:
    """What the Oumi platform does: submit, poll, collect, cancel; every request timed."""

    def __init__(self, server: ServerProcess, provider: RunningProvider, harness_id: str):
        self.endpoint = f"{server.url}/oumi/harnesses/{harness_id}"
        self.provider = provider
        self.http = httpx.Client(
            headers={"Authorization": f"Bearer {API_KEY}", "Accept-Encoding": "identity"},
            timeout=30,  # the protocol's answer time
            follow_redirects=False,
        )

    def connection(self, key: str = PLATFORM_KEY) -> dict[str, Any]:
        return {
            "base_url": self.provider.base_url,
            "model": MODEL,
            "api_key": key,
            "generation_settings": SETTINGS,
        }

    def submit(self, body: dict[str, Any]) -> httpx.Response:
        return self.http.post(f"{self.endpoint}/submit", json=body)

    def start(self, messages: list[dict[str, Any]], key: str = PLATFORM_KEY) -> dict[str, Any]:
        body = {
            "protocol_version": "1",
            "session_id": "ses_" + uuid.uuid4().hex,
            "invocation_id": uuid.uuid4().hex,
            "session_action": "start",
            "input_messages": messages,
            "model_connection": self.connection(key),
        }
        return body

    def status(self, invocation_id: str) -> httpx.Response:
        return self.http.get(f"{self.endpoint}/get_status", params={"invocation_id": invocation_id})

    def collect(self, invocation_id: str) -> httpx.Response:
        return self.http.get(
            f"{self.endpoint}/collect_output", params={"invocation_id": invocation_id}
        )

    def wait(self, invocation_id: str, until: tuple[str, ...], timeout: float = 150) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answer = self.status(invocation_id)
            assert answer.status_code == 200, answer.text
            status = answer.json()
            check_status_object(status)
            if status["status"] in until:
                return status
            time.sleep(0.3)
        raise AssertionError(f"invocation stayed {status['status']}")


def check_status_object(status: dict[str, Any]) -> None:
    assert set(status) <= STATUS_FIELDS and None not in status.values()
    assert status["protocol_version"] == "1"
    assert status["status"] in (
        "queued",
        "running",
        "input_required",
        "completed",
        "failed",
        "cancelled",
    )
    assert ("error" in status) == (status["status"] == "failed")
    if "error" in status:
        assert set(status["error"]) == {"message"} and status["error"]["message"].strip()


def check_messages(messages: list[dict[str, Any]], pending_ok: bool) -> None:
    """The chat format rules: every call answered before the next non-tool message (except
    the final pending ones), ids non-empty and unique, ending with an assistant message."""
    assert messages and messages[-1]["role"] == "assistant"
    open_calls: list[str] = []
    for message in messages:
        assert None not in [v for k, v in message.items() if k != "content"]
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls
            open_calls.remove(message["tool_call_id"])
            continue
        assert not open_calls, "a call was left unanswered"
        assert message["role"] == "assistant"
        for call in message.get("tool_calls", []):
            assert call["id"] and call["type"] == "function"
            json.loads(call["function"]["arguments"])
            open_calls.append(call["id"])
    if not pending_ok:
        assert not open_calls


@pytest.fixture(scope="module")
def oumi(oumi_server: ServerProcess, platform: RunningProvider) -> Iterator[Platform]:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    listing = httpx.get(f"{oumi_server.url}/v1/harnesses", headers=headers).json()
    harness = next(h for h in listing["harnesses"] if h["base"] == TEST_BASE)
    door = Platform(oumi_server, platform, harness["id"])
    yield door
    door.http.close()


def test_start_poll_collect_with_the_opening_conversation(oumi: Platform) -> None:
    oumi.provider.reset()
    body = oumi.start(
        [
            {"role": "system", "content": "Always be brief. Marker: sys-7731."},
            {"role": "user", "content": "Earlier question about lunch-4410."},
            {"role": "assistant", "content": "Earlier answer about soup-2210."},
            {"role": "user", "content": "RUN echo tool-ran-5521\nSAY final {output}"},
        ]
    )
    started = oumi.submit(body)
    assert started.status_code == 202, started.text
    assert started.json()["status"] in ("queued", "running")
    assert started.json()["session_id"] == body["session_id"]
    assert "content-encoding" not in started.headers
    too_early = oumi.collect(body["invocation_id"])
    assert too_early.status_code in (200, 409)
    status = oumi.wait(body["invocation_id"], ("completed", "failed"))
    assert status["status"] == "completed", status
    output = oumi.collect(body["invocation_id"])
    assert output.status_code == 200
    collected = output.json()
    assert set(collected) == STATUS_FIELDS - {"error"} | {"messages"}
    assert collected["status"] == "completed"
    check_messages(collected["messages"], pending_ok=False)
    assert "tool-ran-5521" in collected["messages"][-1]["content"]
    tool_results = [m["content"] for m in collected["messages"] if m["role"] == "tool"]
    assert any("tool-ran-5521" in r for r in tool_results)
    # Every model call went to the platform's connection, with its key, model and settings;
    # the opening conversation reached the model.
    calls = [r for r in oumi.provider.requests() if r["path"].endswith("/chat/completions")]
    assert calls
    for call in calls:
        assert call["headers"]["authorization"] == f"Bearer {PLATFORM_KEY}"
        assert call["body"]["model"] == MODEL
        assert call["body"]["temperature"] == 0.2 and call["body"]["seed"] == 3
    seen = json.dumps(calls[0]["body"]["messages"])
    for marker in ("sys-7731", "lunch-4410", "soup-2210"):
        assert marker in seen


@passes.same_on_every_base
def test_a_retry_with_a_fresh_key_starts_nothing_twice(oumi: Platform) -> None:
    body = oumi.start([{"role": "user", "content": "SAY once"}])
    first = oumi.submit(body)
    retry = dict(body, model_connection=oumi.connection("sk-platform-fresh-key-2"))
    again = oumi.submit(retry)
    assert first.status_code == again.status_code == 202 or again.status_code == 200
    assert again.json()["invocation_id"] == body["invocation_id"]
    status = oumi.wait(body["invocation_id"], ("completed", "failed"))
    assert status["status"] in ("completed", "failed")
    done = oumi.submit(retry)
    assert done.status_code == 200 and done.json()["status"] == status["status"]
    # The invocation belongs to its row: named under another session_id it is refused (a 400
    # fails only that row), for a start and a cancel alike, and nothing is echoed.
    elsewhere = dict(retry, session_id="another-row")
    answer = oumi.submit(elsewhere)
    assert answer.status_code == 400, answer.text
    cancel = {k: elsewhere[k] for k in ("protocol_version", "session_id", "invocation_id")}
    assert oumi.http.post(f"{oumi.endpoint}/cancel", json=cancel).status_code == 400
    assert oumi.status(body["invocation_id"]).json()["session_id"] == body["session_id"]


def question_call(tool: str, text: str) -> str:
    """The arguments a model gives `tool` to ask `text`."""
    options = [
        {"label": "Paris", "description": "France"},
        {"label": "Rome", "description": "Italy"},
    ]
    asked = {"question": text, "header": "City", "options": options}
    if tool == "AskUserQuestion":
        return json.dumps({"questions": [{**asked, "multiSelect": False}]})
    if tool == "request_user_input":
        return json.dumps({"questions": [{**asked, "id": "city"}]})
    if tool == "clarify":
        return json.dumps({"question": text, "choices": ["Paris", "Rome"]})
    if TEST_BASE == "gemini-cli":  # its own ask_user (the server's is not offered to it)
        return json.dumps({"questions": [{**asked, "type": "choice"}]})
    return json.dumps({"question": text})


@pytest.mark.parametrize("tool", [ASK_TOOL, *NATIVE_ASK_TOOLS])
def test_a_question_pauses_as_input_required_and_the_resume_answers_it(
    oumi: Platform, tool: str
) -> None:
    oumi.provider.reset()
    question = question_call(tool, "Which city, Paris or Rome?")
    asking = BASE.asking(
        f"TOOL {tool} {question}", "Which city, Paris or Rome?", "SAY city is {output}"
    )
    body = oumi.start([{"role": "user", "content": asking}])
    assert oumi.submit(body).status_code == 202
    status = oumi.wait(body["invocation_id"], ("input_required", "completed", "failed"))
    assert status["status"] == "input_required", status
    paused = oumi.collect(body["invocation_id"]).json()
    assert paused["status"] == "input_required"
    check_messages(paused["messages"], pending_ok=True)
    (call,) = paused["messages"][-1]["tool_calls"]
    assert call["function"]["name"] == "ask_user"
    assert json.loads(call["function"]["arguments"])["question"] == "Which city, Paris or Rome?"
    oumi.provider.reset()
    resume = dict(
        body,
        session_action="resume",
        input_messages=[{"role": "tool", "tool_call_id": call["id"], "content": "Rome-8812"}],
        model_connection=oumi.connection(),
    )
    resumed = oumi.submit(resume)
    assert resumed.status_code in (200, 202), resumed.text
    assert oumi.submit(resume).status_code in (200, 202)  # a retried resume applies once
    status = oumi.wait(body["invocation_id"], ("completed", "failed"))
    assert status["status"] == "completed", status
    output = oumi.collect(body["invocation_id"]).json()
    check_messages(output["messages"], pending_ok=False)
    if not BASE.answered_in_a_new_turn:  # the tool's result, which the model says back
        assert "Rome-8812" in output["messages"][-1]["content"]
    ids = {c["id"] for m in output["messages"] for c in m.get("tool_calls", [])}
    assert call["id"] not in ids  # only what came after the resume
    answers = [r for r in oumi.provider.requests() if "Rome-8812" in json.dumps(r["body"])]
    assert answers, "the answer never reached the model"


@passes.same_on_every_base
def test_cancel_stops_the_turn(oumi: Platform) -> None:
    body = oumi.start([{"role": "user", "content": "RUN sleep 60\nSAY never"}])
    assert oumi.submit(body).status_code == 202
    oumi.wait(body["invocation_id"], ("running",))
    cancel = {k: body[k] for k in ("protocol_version", "session_id", "invocation_id")}
    answer = oumi.http.post(f"{oumi.endpoint}/cancel", json=cancel)
    assert answer.status_code == 200
    check_status_object(answer.json())
    status = oumi.wait(body["invocation_id"], ("cancelled", "completed", "failed"), timeout=30)
    assert status["status"] == "cancelled"
    assert oumi.collect(body["invocation_id"]).status_code == 409


@passes.same_on_every_base
def test_a_refusing_model_fails_the_row_readably(oumi: Platform) -> None:
    body = oumi.start([{"role": "user", "content": "SAY hi"}], key="sk-wrong-key-0000000")
    assert oumi.submit(body).status_code == 202
    status = oumi.wait(body["invocation_id"], ("completed", "failed"))
    assert status["status"] == "failed"
    message = status["error"]["message"]
    assert "sk-wrong-key" not in message and "://" not in message and "/tmp" not in message
    assert oumi.collect(body["invocation_id"]).status_code == 409


@pytest.mark.parametrize(
    ("base_url", "said"),
    [
        ("http://127.0.0.1:9/v1", "refused the connection"),
        ("http://no-such-host.invalid/v1", "could not be resolved"),
    ],
)
@passes.same_on_every_base
def test_an_unreachable_model_says_what_happened(oumi: Platform, base_url: str, said: str) -> None:
    body = oumi.start([{"role": "user", "content": "SAY hi"}])
    body["model_connection"]["base_url"] = base_url
    assert oumi.submit(body).status_code == 202
    status = oumi.wait(body["invocation_id"], ("completed", "failed"))
    assert status["status"] == "failed"
    message = status["error"]["message"]
    assert said in message, message
    assert "://" not in message and "127.0.0.1" not in message and ".invalid" not in message


@passes.same_on_every_base
def test_bad_bodies_and_unknown_resumes_fail_only_the_row_unknown_invocations_are_404(
    oumi: Platform, oumi_server: ServerProcess
) -> None:
    good = oumi.start([{"role": "user", "content": "SAY x"}])
    for broken in (
        {**good, "protocol_version": "2"},
        {**good, "session_action": "restart"},
        {**good, "input_messages": []},
        {**good, "input_messages": [{"role": "assistant", "content": "no user"}]},
        {**good, "model_connection": {"base_url": "x"}},
        {k: v for k, v in good.items() if k != "invocation_id"},
    ):
        answer = oumi.submit(broken)
        assert 400 <= answer.status_code < 500, answer.text
        assert answer.status_code not in (401, 403, 404, 409)
    huge = oumi.http.post(
        f"{oumi.endpoint}/submit",
        content=b'{"x": "' + b"a" * (10 * 1024 * 1024 + 10) + b'"}',
        headers={"content-type": "application/json"},
    )
    assert huge.status_code == 413
    assert oumi.status("never-submitted").status_code == 404
    assert oumi.collect("never-submitted").status_code == 404
    resume_unknown = dict(
        good,
        session_action="resume",
        input_messages=[{"role": "tool", "tool_call_id": "c", "content": "x"}],
    )
    # A resume names an invocation Oumi submitted: a 404 would fail the whole evaluation.
    refused = oumi.submit(resume_unknown)
    assert refused.status_code == 400, refused.text
    assert oumi.status(resume_unknown["invocation_id"]).status_code == 404  # nothing started
    other = httpx.post(
        f"{oumi_server.url}/oumi/harnesses/chrn_not_mine/submit",
        json=good,
        headers={"Authorization": f"Bearer {API_KEY}"},
    )
    assert other.status_code == 404
    unauthenticated = httpx.post(f"{oumi.endpoint}/submit", json=good)
    assert unauthenticated.status_code == 401


@passes.same_on_every_base
def test_an_oumi_session_is_an_ordinary_session(oumi: Platform, oumi_server: ServerProcess) -> None:
    marker = "listed-" + uuid.uuid4().hex[:8]
    body = oumi.start([{"role": "user", "content": f"SAY {marker}"}])
    oumi.submit(body)
    oumi.wait(body["invocation_id"], ("completed", "failed"))
    http = httpx.Client(base_url=oumi_server.url, headers={"Authorization": f"Bearer {API_KEY}"})
    sessions = http.get("/v1/sessions").json()["sessions"]
    (session,) = [s for s in sessions if s["title"] == f"SAY {marker}"]
    turns = http.get(f"/v1/sessions/{session['id']}/turns")
    assert turns.status_code == 200 and marker in turns.text
    assert http.post(f"/v1/sessions/{session['id']}/share").status_code in (200, 201)
    assert http.delete(f"/v1/traces/{session['id']}").status_code == 200
    http.close()


@passes.same_on_every_base
def test_an_invocation_whose_session_was_deleted_fails_only_its_row(
    oumi: Platform, oumi_server: ServerProcess
) -> None:
    """Never a 404 for a submitted invocation (that fails the whole evaluation): `failed`,
    with a readable reason, and a retried start runs nothing again."""
    marker = "deleted-" + uuid.uuid4().hex[:8]
    body = oumi.start([{"role": "user", "content": f"SAY {marker}"}])
    oumi.submit(body)
    oumi.wait(body["invocation_id"], ("completed", "failed"))
    http = httpx.Client(base_url=oumi_server.url, headers={"Authorization": f"Bearer {API_KEY}"})
    sessions = http.get("/v1/sessions").json()["sessions"]
    (session,) = [s for s in sessions if s["title"] == f"SAY {marker}"]
    assert http.delete(f"/v1/traces/{session['id']}").status_code == 200
    http.close()
    oumi.provider.reset()
    status = oumi.status(body["invocation_id"])
    assert status.status_code == 200, status.text
    check_status_object(status.json())
    assert status.json()["status"] == "failed" and status.json()["session_id"] == body["session_id"]
    assert "deleted" in status.json()["error"]["message"]
    assert oumi.collect(body["invocation_id"]).status_code == 409
    retried = oumi.submit(body)
    assert retried.status_code == 200 and retried.json()["status"] == "failed", retried.text
    resume = dict(
        body,
        session_action="resume",
        input_messages=[{"role": "tool", "tool_call_id": "call_x", "content": "x"}],
    )
    assert oumi.submit(resume).json()["status"] == "failed"
    cancel = {k: body[k] for k in ("protocol_version", "session_id", "invocation_id")}
    cancelled = oumi.http.post(f"{oumi.endpoint}/cancel", json=cancel)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "failed"
    # Gone or not, the invocation still belongs to its row: another session_id is refused,
    # not echoed, and not remembered in place of the row's.
    elsewhere = dict(cancel, session_id="another-row")
    assert oumi.http.post(f"{oumi.endpoint}/cancel", json=elsewhere).status_code == 400
    assert oumi.submit(dict(body, session_id="another-row")).status_code == 400
    assert oumi.status(body["invocation_id"]).json()["session_id"] == body["session_id"]
    time.sleep(1)
    assert oumi.provider.requests() == []  # nothing was started again


@pytest.mark.skipif(TEST_BASE != "codex", reason="Codex's per-turn input limit and its file")
@passes.same_on_every_base
def test_a_prompt_over_a_million_characters_completes(oumi: Platform) -> None:
    """Past Codex's per-turn input limit: the agent still reads the whole message."""
    marker = "oumi-tail-" + uuid.uuid4().hex[:8]
    prompt = (
        f"RUN tail -c {len(marker)} ~/.uhp/input/message.md\nSAY read back: {{output}}\n"
        + "lorem ipsum " * 92_000
        + marker
    )
    body = oumi.start([{"role": "user", "content": prompt}])
    assert oumi.submit(body).status_code == 202
    status = oumi.wait(body["invocation_id"], ("completed", "failed"))
    assert status["status"] == "completed", status
    messages = oumi.collect(body["invocation_id"]).json()["messages"]
    assert marker in messages[-1]["content"]


@passes.same_on_every_base
def test_no_platform_key_is_stored_or_logged(oumi: Platform, oumi_server: ServerProcess) -> None:
    body = oumi.start([{"role": "user", "content": "SAY keyless"}])
    oumi.submit(body)
    oumi.wait(body["invocation_id"], ("completed", "failed"))
    written = everything_written(oumi_server.data_dir)
    for key in (PLATFORM_KEY, "sk-platform-fresh-key-2", "sk-wrong-key-0000000"):
        assert key.encode() not in written


@pytest.mark.parametrize("tool", [ASK_TOOL, *NATIVE_ASK_TOOLS])
def test_a_question_outlives_a_server_restart(
    tmp_path: Path,
    provider: RunningProvider,
    platform: RunningProvider,
    base_installed: Path,
    tool: str,
) -> None:
    """Paused when the server stops: after the restart the invocation still reports
    input_required, and the resume continues the same native conversation in a new turn."""
    env = server_env(provider, UHP_MODEL_CONNECTION_ALLOW_PRIVATE_HOSTS="true")
    first = ServerProcess(tmp_path / "data", env).start()
    try:
        listing = httpx.get(
            f"{first.url}/v1/harnesses", headers={"Authorization": f"Bearer {API_KEY}"}
        ).json()
        harness_id = next(h["id"] for h in listing["harnesses"] if h["base"] == TEST_BASE)
        door = Platform(first, platform, harness_id)
        asking = BASE.asking(f"TOOL {tool} {question_call(tool, 'Which colour?')}", "Which colour?")
        body = door.start([{"role": "user", "content": f"REMEMBER kiwi-3391\n{asking}"}])
        assert door.submit(body).status_code == 202
        assert door.wait(body["invocation_id"], ("input_required", "failed"))["status"] == (
            "input_required"
        )
    finally:
        first.stop()
    second = ServerProcess(tmp_path / "data", env).start()
    try:
        door = Platform(second, platform, harness_id)
        status = door.status(body["invocation_id"]).json()
        assert status["status"] == "input_required"
        (call,) = door.collect(body["invocation_id"]).json()["messages"][-1]["tool_calls"]
        platform.reset()
        resume = dict(
            body,
            session_action="resume",
            input_messages=[{"role": "tool", "tool_call_id": call["id"], "content": "teal-5120"}],
        )
        assert door.submit(resume).status_code in (200, 202)
        status = door.wait(body["invocation_id"], ("completed", "failed"))
        assert status["status"] == "completed", status
        output = door.collect(body["invocation_id"]).json()
        check_messages(output["messages"], pending_ok=False)
        seen = json.dumps([r["body"] for r in platform.requests()])
        assert "teal-5120" in seen  # the answer reached the agent
        assert "kiwi-3391" in seen  # in the same conversation as before the restart
    finally:
        second.stop()


@passes.same_on_every_base
def test_a_resume_after_the_session_expired_fails_only_the_row(
    tmp_path: Path, provider: RunningProvider, platform: RunningProvider, base_installed: Path
) -> None:
    """The paused turn's session expires before the answer comes: the resume is refused the
    way the protocol's error table fails a row (never 401/403/404, which fail the whole
    evaluation, nor a 5xx), and the invocation stays known to get_status afterwards."""
    env = server_env(
        provider,
        UHP_MODEL_CONNECTION_ALLOW_PRIVATE_HOSTS="true",
        UHP_PAUSED_TURN_KEEP_SECONDS="1",  # parked at once: the answer needs a new turn
        UHP_SESSION_RETENTION_DAYS=str(4 / 86400),  # idle for 4 s: expired
    )
    server = ServerProcess(tmp_path / "data", env).start()
    try:
        listing = httpx.get(
            f"{server.url}/v1/harnesses", headers={"Authorization": f"Bearer {API_KEY}"}
        ).json()
        harness_id = next(h["id"] for h in listing["harnesses"] if h["base"] == TEST_BASE)
        door = Platform(server, platform, harness_id)
        question = question_call(ASK_TOOL, "Which colour?")
        body = door.start([{"role": "user", "content": f"TOOL {ASK_TOOL} {question}"}])
        assert door.submit(body).status_code == 202
        assert door.wait(body["invocation_id"], ("input_required", "failed"))["status"] == (
            "input_required"
        )
        (call,) = door.collect(body["invocation_id"]).json()["messages"][-1]["tool_calls"]
        time.sleep(6)  # the session expires while it waits for the answer
        resume = dict(
            body,
            session_action="resume",
            input_messages=[{"role": "tool", "tool_call_id": call["id"], "content": "teal"}],
        )
        refused = door.submit(resume)
        assert refused.status_code not in (401, 403, 404), refused.text
        assert refused.status_code < 500, refused.text
        if refused.status_code in (200, 202):
            assert refused.json()["status"] == "failed", refused.text
        else:
            assert 400 <= refused.status_code < 500
            assert "expired" in refused.text
        for _ in range(2):  # a retry is refused the same way
            assert door.submit(resume).status_code == refused.status_code
        status = door.status(body["invocation_id"])
        assert status.status_code == 200, status.text
        check_status_object(status.json())
        assert door.collect(body["invocation_id"]).status_code != 404
    finally:
        server.stop()
