"""One cancel path for every door: a task parked on its agent's question (a door that pauses,
here the Oumi harness door) ends the same whichever door cancels it. Cancelled through
`POST /v1/responses/{id}/cancel` or `POST /v1/sessions/{id}/cancel`, its questions are
withdrawn, as they are when its own door cancels it: the session's last turn ends
`cancelled`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.fakes import Ask, answer
from tests.support.in_process import InProcess, in_process
from tests.support.waiting import wait_for


async def _parked_oumi_task(server: InProcess) -> tuple[str, str]:
    """(its session id, its response id) once its turn has parked on the question."""
    server.base.script("plan", [Ask("Which city?"), *answer("done")])
    harness_id = (await server.client.get("/v1/harnesses")).json()["harnesses"][0]["id"]
    submitted = await server.client.post(
        f"/oumi/harnesses/{harness_id}/submit",
        json={
            "protocol_version": "1",
            "session_id": "row-1",
            "invocation_id": "inv-1",
            "session_action": "start",
            "input_messages": [{"role": "user", "content": "plan"}],
            # Never called: the fake base's turns make no model call.
            "model_connection": {
                "base_url": "https://example.com/v1",
                "model": "m",
                "api_key": "k",
            },
        },
    )
    assert submitted.status_code in (200, 202), submitted.text

    async def parked() -> dict[str, Any] | None:
        sessions = (await server.client.get("/v1/sessions")).json()["sessions"]
        if not sessions:
            return None
        turns = (await server.client.get(f"/v1/sessions/{sessions[0]['id']}/turns")).json()
        response = (await server.client.get(f"/v1/responses/{turns['turns'][0]['id']}")).json()
        details = response.get("incomplete_details") or {}
        return response if details.get("reason") == "input_required" else None

    await wait_for(parked, timeout=10)
    response = await parked()
    assert response is not None
    return response["metadata"]["session_id"], response["id"]


async def test_a_parked_task_cancelled_through_uhp_has_its_questions_withdrawn(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with in_process(
        tmp_path / "data", provider.base_url, PROVIDER_KEY, paused_turn_keep_seconds=0.2
    ) as server:
        session_id, response_id = await _parked_oumi_task(server)
        cancelled = await server.client.post(f"/v1/responses/{response_id}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        # The answer is the cancelled response itself, as it stands: its turn had ended.
        assert cancelled.json()["id"] == response_id
        turns = (await server.client.get(f"/v1/sessions/{session_id}/turns")).json()["turns"]
        assert [turn["status"] for turn in turns] == ["incomplete", "cancelled"]
        # Idempotent: a second cancel closes nothing more.
        again = await server.client.post(f"/v1/responses/{response_id}/cancel")
        assert again.status_code == 200, again.text
        turns = (await server.client.get(f"/v1/sessions/{session_id}/turns")).json()["turns"]
        assert len(turns) == 2


async def test_a_parked_task_cancelled_through_its_session_has_its_questions_withdrawn(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with in_process(
        tmp_path / "data", provider.base_url, PROVIDER_KEY, paused_turn_keep_seconds=0.2
    ) as server:
        session_id, response_id = await _parked_oumi_task(server)
        cancelled = await server.client.post(f"/v1/sessions/{session_id}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["status"] == "cancelled"
        assert cancelled.json()["cancelled_response_id"] == response_id
        turns = (await server.client.get(f"/v1/sessions/{session_id}/turns")).json()["turns"]
        assert [turn["status"] for turn in turns] == ["incomplete", "cancelled"]
        again = await server.client.post(f"/v1/sessions/{session_id}/cancel")
        assert again.status_code == 200 and "cancelled_response_id" not in again.json()
        turns = (await server.client.get(f"/v1/sessions/{session_id}/turns")).json()["turns"]
        assert len(turns) == 2
