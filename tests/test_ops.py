"""Operations: /healthz, /readyz and /metrics (README: Operations)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import API_KEY, DEFAULT_MODEL, TEST_BASE, provider_under_test, server_env
from tests.scripted_provider import RunningProvider
from tests.support.fakes import FakeSandbox
from tests.support.in_process import in_process
from tests.support.server import ServerProcess
from uhp_server.engine.turns.phases import TurnPhase


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by (name, sorted labels); parsing fails on a malformed one."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return found


def value(found: dict, name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
async def fake(tmp_path: Path, provider: RunningProvider):
    from tests.conftest import PROVIDER_KEY

    async with in_process(tmp_path / "data", provider.base_url, PROVIDER_KEY) as running:
        yield running


async def test_healthz_and_readyz_answer_without_a_credential(fake):
    anonymous = {"Authorization": ""}
    health = await fake.client.get("/healthz", headers=anonymous)
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    ready = await fake.client.get("/readyz", headers=anonymous)
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"status": "ready"}
    (probe,) = fake.sandbox.started
    assert probe.invocation.argv == ["/bin/true"]


async def test_a_readiness_probe_storm_starts_one_sandbox(fake):
    answers = await asyncio.gather(*(fake.client.get("/readyz") for _ in range(50)))
    assert {a.status_code for a in answers} == {200}
    assert len(fake.sandbox.started) == 1


async def test_readyz_is_503_with_a_reason_when_the_sandbox_cannot_start(tmp_path, provider):
    from tests.conftest import PROVIDER_KEY

    broken = FakeSandbox()
    broken.start_error = "bwrap: setting up uid map: Permission denied"
    async with in_process(
        tmp_path / "data", provider.base_url, PROVIDER_KEY, sandbox=broken
    ) as running:
        ready = await running.client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json() == {
            "status": "unavailable",
            "reason": "The sandbox cannot start a process.",
        }
        assert (await running.client.get("/healthz")).status_code == 200


async def test_readyz_is_503_when_the_database_does_not_answer(fake, monkeypatch):
    async def broken_read(*_args, **_kwargs):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(fake.ctx.readiness.db, "read", broken_read)
    ready = await fake.client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["reason"] == "The database does not answer."


async def test_metrics_after_a_turn(fake):
    assert (await fake.submit("hello")).json()["status"] == "completed"
    await asyncio.sleep(0.1)  # the turn winds its process down after answering
    scrape = await fake.client.get("/metrics", headers={"Authorization": ""})
    assert scrape.status_code == 200
    assert scrape.headers["content-type"].startswith("text/plain")
    found = samples(scrape.text)
    assert value(found, "uhp_turns_total", base="fake", status="completed") == 1
    assert value(found, "uhp_turns_running", base="fake") == 0
    assert ("uhp_turns_queued", ()) in found
    for histogram in ("uhp_turn_duration_seconds", "uhp_turn_first_event_seconds"):
        assert value(found, histogram + "_count", base="fake") == 1
        buckets = [k for k in found if k[0] == histogram + "_bucket"]
        assert len(buckets) > 5
        assert value(found, histogram + "_bucket", base="fake", le="+Inf") == 1
    # Every phase of the turn was timed once, and together they are the turn's duration.
    phases = [phase.value for phase in TurnPhase]
    for phase in phases:
        assert value(found, "uhp_turn_phase_seconds_count", base="fake", phase=phase) == 1
    total = sum(value(found, "uhp_turn_phase_seconds_sum", base="fake", phase=p) for p in phases)
    assert total >= value(found, "uhp_turn_duration_seconds_sum", base="fake")
    # created, in_progress, the answer's events and the terminal one: several commits.
    assert value(found, "uhp_event_log_commit_seconds_count") >= 2
    assert value(found, "uhp_turns_queued") == 0
    fake.ctx.metrics.set_queued(3)  # what admission control reports
    found = samples((await fake.client.get("/metrics")).text)
    assert value(found, "uhp_turns_queued") == 3


async def test_metrics_token_guards_metrics_only(tmp_path, provider):
    from tests.conftest import PROVIDER_KEY

    async with in_process(
        tmp_path / "data", provider.base_url, PROVIDER_KEY, metrics_token="scrape-secret"
    ) as running:
        assert (await running.client.get("/metrics")).status_code == 401
        wrong = await running.client.get("/metrics", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        odd = await running.client.get(
            "/metrics", headers={"Authorization": "Bearer \xe9".encode("latin-1")}
        )
        assert odd.status_code == 401
        right = {"Authorization": "Bearer scrape-secret"}
        assert (await running.client.get("/metrics", headers=right)).status_code == 200
        assert (await running.client.get("/healthz", headers={})).status_code == 200


@pytest.mark.slow
def test_metrics_count_a_real_task_and_its_model_calls(
    tmp_path: Path, provider: RunningProvider, base_installed: Path
) -> None:
    server = ServerProcess(tmp_path / "server", server_env(provider)).start()
    try:
        with httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=120
        ) as client:
            assert client.get("/readyz").status_code == 200
            body = client.post("/v1/responses", json={"input": "SAY metrics please"}).json()
            assert body["status"] == "completed", body
            found = samples(client.get("/metrics").text)
    finally:
        server.stop()
    assert value(found, "uhp_turns_total", base=TEST_BASE, status="completed") == 1
    assert value(found, "uhp_turn_first_event_seconds_count", base=TEST_BASE) == 1
    duration_buckets = [k for k in found if k[0] == "uhp_turn_duration_seconds_bucket"]
    assert len(duration_buckets) > 5
    assert value(found, "uhp_turn_duration_seconds_bucket", base=TEST_BASE, le="+Inf") == 1
    assert value(found, "uhp_event_log_commit_seconds_count") >= 2
    provider_name = provider_under_test()
    calls = {
        labels: v
        for (name, labels), v in found.items()
        if name == "uhp_gateway_calls_total" and ("provider", provider_name) in labels
    }
    assert calls, found
    # Some CLIs also probe routes the provider refuses (Hermes: one 4xx): counted as such.
    assert any(("status_class", "2xx") in labels for labels in calls), calls
    assert any(("model", DEFAULT_MODEL) in labels for labels in calls)
    tokens = {
        dict(labels)["kind"]: v
        for (name, labels), v in found.items()
        if name == "uhp_gateway_tokens_total"
    }
    assert tokens.get("input", 0) > 0 and tokens.get("output", 0) > 0
