"""`uhpserver_keepWarmSeconds`, in process: how a harness sets it, and the key a warm
process is reused by (engine/turns/warm.py). The process itself: test_warm_sessions_e2e.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from harness_bases import registry
from tests.support.harness_api import AUTH, create, make_client, refused
from uhp_server.engine.turns.run import Run, TurnPlan
from uhp_server.engine.turns.warm import WarmKey, harness_revision
from uhp_server.gateway.mcp_targets import McpTarget

FIELD = "uhpserver_keepWarmSeconds"


@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    with make_client(tmp_path / "data") as client:
        yield client


@pytest.mark.parametrize("value", [-1, 3601, "60", True, 1.5, [60], {"s": 60}])
def test_a_keep_warm_time_that_is_not_0_to_3600_seconds_is_refused(
    http: TestClient, value: Any
) -> None:
    error = refused(
        http.post("/v1/harnesses", json={"base": "codex", FIELD: value}, headers=AUTH), FIELD
    )
    assert "3600" in error["message"]


def test_off_unless_set_and_kept_through_a_get_put_round_trip(http: TestClient) -> None:
    plain = create(http, {"base": "codex"})
    assert FIELD not in plain
    off = create(http, {"base": "codex", FIELD: 0})
    assert FIELD not in off  # 0 is off, shown as absent like null
    warm = create(http, {"base": "codex", FIELD: 3600})
    assert warm[FIELD] == 3600
    put = http.put(f"/v1/harnesses/{warm['id']}", json=warm, headers=AUTH)
    assert put.status_code == 200 and put.json()[FIELD] == 3600
    cleared = http.put(f"/v1/harnesses/{warm['id']}", json={**warm, FIELD: None}, headers=AUTH)
    assert cleared.status_code == 200 and FIELD not in cleared.json()


def test_a_put_refuses_a_bad_value_in_the_callers_format(http: TestClient) -> None:
    warm = create(http, {"base": "codex", FIELD: 60})
    response = http.put(f"/v1/harnesses/{warm['id']}", json={**warm, FIELD: 99999}, headers=AUTH)
    refused(response, FIELD)
    assert http.get(f"/v1/harnesses/{warm['id']}", headers=AUTH).json()[FIELD] == 60


def _run(**plan: Any) -> Run:
    base = registry()["codex"]
    fields: dict[str, Any] = dict(
        base=base,
        prompt="hi",
        model="gpt-test",
        system_prompt="",
        disabled_tools=(),
        max_step=None,
        timeout_seconds=60,
        max_output_tokens=None,
        native_session_id="thread-1",
        workspace=Path("/nowhere/ws"),
        home=Path("/nowhere/home"),
        keep_warm_seconds=60,
        harness_revision=harness_revision("chrn_1", {"systemPrompt": ""}),
    )
    fields.update(plan)
    principal = fields.pop("principal", "p_1")
    return Run("resp_1", principal, "sess_1", TurnPlan(**fields), None, None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "change",
    [
        {"principal": "p_2"},
        {"model": "gpt-other"},
        {"harness_revision": harness_revision("chrn_1", {"systemPrompt": "terse"})},
        {"system_prompt": "Answer in French."},
        {"ask_user": True},
        {"max_step": 3},
        {"max_output_tokens": 100},
        {"mcp_servers": (McpTarget("docs", "https://mcp.example/docs"),)},
        {"memory": object()},
        {"base": registry()["claude-code"]},
    ],
)
def test_a_warm_process_is_reused_only_by_a_turn_asking_what_it_was_started_with(
    change: dict[str, Any],
) -> None:
    kept = WarmKey.of(_run())
    assert WarmKey.of(_run()) == kept  # the same turn again: reused
    assert WarmKey.of(_run(**change)) != kept


def test_the_prompt_and_budget_of_time_do_not_change_the_key() -> None:
    kept = WarmKey.of(_run())
    assert WarmKey.of(_run(prompt="something else", timeout_seconds=5)) == kept


def test_a_harness_revision_changes_with_any_change_to_its_stored_configuration() -> None:
    stored = {"systemPrompt": "", "skills": [], FIELD: 60}
    assert harness_revision("chrn_1", stored) == harness_revision("chrn_1", dict(stored))
    assert harness_revision("chrn_1", stored) != harness_revision("chrn_2", stored)
    assert harness_revision("chrn_1", stored) != harness_revision(
        "chrn_1", {**stored, "skills": [{"name": "x"}]}
    )
