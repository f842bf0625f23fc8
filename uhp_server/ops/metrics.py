"""The server's Prometheus metrics, one registry per app (docs/operations.md, "Metrics").

Each app owns its registry rather than using prometheus_client's global one, so two apps in one
process (tests, an embedding) never share or double-register counters. Label values are bounded
by the operator's configuration (bases, providers, models), never by a client's input, except
the model of a per-turn model connection (a front door's): that one is counted under
`connection`, so a client cannot grow the label set.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

CONTENT_TYPE = CONTENT_TYPE_LATEST

# Agent turns run from seconds to an hour; the first event comes within a minute.
TURN_BUCKETS = (1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600)
FIRST_EVENT_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60)
# One group commit of the event log: well under a millisecond on a local disk.
# One phase of a turn (engine/turns/phases.py): a millisecond (a mark) to a minute (the agent).
PHASE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
COMMIT_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5)

CONNECTION_MODEL = "connection"  # the model label of every per-turn model connection


def status_class(status: int | None) -> str:
    """`2xx`…`5xx` for an HTTP status; `error` when no answer came (unreachable, refused)."""
    return "error" if status is None else f"{status // 100}xx"


class Metrics:
    """Every metric the server exports; the engine and the gateway call the methods below."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        reg = self.registry
        ProcessCollector(registry=reg)
        PlatformCollector(registry=reg)
        self.turns = Counter(
            "uhp_turns", "Turns ended, by base and final status.", ["base", "status"], registry=reg
        )
        self.turns_running = Gauge(
            "uhp_turns_running", "Turns executing now, by base.", ["base"], registry=reg
        )
        self.turns_queued = Gauge(
            "uhp_turns_queued", "Accepted turns waiting for a free execution slot.", registry=reg
        )
        self.turn_duration = Histogram(
            "uhp_turn_duration_seconds",
            "From a turn's start to its outcome, by base.",
            ["base"],
            buckets=TURN_BUCKETS,
            registry=reg,
        )
        self.first_event = Histogram(
            "uhp_turn_first_event_seconds",
            "From a turn's start to the agent's first event, by base.",
            ["base"],
            buckets=FIRST_EVENT_BUCKETS,
            registry=reg,
        )
        self.turn_phases = Histogram(
            "uhp_turn_phase_seconds",
            "One phase of a turn's execution, by base and phase (docs/operations.md).",
            ["base", "phase"],
            buckets=PHASE_BUCKETS,
            registry=reg,
        )
        self.event_log_commit = Histogram(
            "uhp_event_log_commit_seconds",
            "One commit of event-log rows (a group of appends) on the writer.",
            buckets=COMMIT_BUCKETS,
            registry=reg,
        )
        self.gateway_calls = Counter(
            "uhp_gateway_calls",
            "Model calls the gateway sent upstream, by provider, model and status class.",
            ["provider", "model", "status_class"],
            registry=reg,
        )
        self.gateway_tokens = Counter(
            "uhp_gateway_tokens",
            "Tokens the providers reported, by provider, model and kind.",
            ["provider", "model", "kind"],
            registry=reg,
        )

    # -- turns -------------------------------------------------------------------------------
    def turn_started(self, base: str) -> None:
        self.turns_running.labels(base).inc()

    def set_queued(self, count: int) -> None:
        """How many accepted turns wait for an execution slot (admission control sets it)."""
        self.turns_queued.set(count)

    def turn_first_event(self, base: str, seconds: float) -> None:
        self.first_event.labels(base).observe(seconds)

    def turn_phase(self, base: str, phase: str, seconds: float) -> None:
        self.turn_phases.labels(base, phase).observe(seconds)

    def turn_ended(self, base: str, status: str, seconds: float) -> None:
        self.turns.labels(base, status).inc()
        self.turn_duration.labels(base).observe(seconds)
        self.turns_running.labels(base).dec()

    # -- storage -----------------------------------------------------------------------------
    def event_log_committed(self, seconds: float) -> None:
        self.event_log_commit.observe(seconds)

    # -- gateway -----------------------------------------------------------------------------
    def gateway_call(self, provider: str, model: str, status: int | None) -> None:
        self.gateway_calls.labels(provider, model, status_class(status)).inc()

    def gateway_usage(self, provider: str, model: str, tokens: Mapping[str, int]) -> None:
        """`tokens`: a change in a call's usage, e.g. {"input_tokens": 12, "output_tokens": 3}."""
        for kind, count in tokens.items():
            if count > 0:
                self.gateway_tokens.labels(provider, model, kind.removesuffix("_tokens")).inc(count)

    def render(self) -> bytes:
        return generate_latest(self.registry)
