"""Which settings give a base its models, in words an operator acts on: warned once at start
for every enabled base no configured provider can serve, and named in the `model_unavailable`
refusal of a task that then cannot run (a quiet `{"backends": {}}` sends a newcomer nowhere).

Derived from the providers' own rules (gateway/providers.py: which wire a provider serves,
directly or translated), so a new translation changes the hint without an edit here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from harness_bases.base import HarnessBase
from uhp_server.gateway.providers import Provider, conventional_providers
from uhp_server.settings import Settings

log = logging.getLogger("uhp_server.app")  # the start log's

PROVIDERS_FILE = "UHP_PROVIDERS_FILE"
# The conventional providers' variables: the key that turns one on, and what locates it.
KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
LOCATIONS = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}


@dataclass(frozen=True)
class Unserved:
    """Enabled bases no configured provider can serve, and what would serve each."""

    bases: tuple[str, ...]
    by_setting: dict[str, list[str]]  # a variable -> the bases it would serve

    def hint(self) -> str:
        return "; ".join(
            f"{name} would serve {self._which(bases)}" for name, bases in self.by_setting.items()
        )

    def _which(self, bases: list[str]) -> str:
        return "all of them" if len(bases) == len(self.bases) > 1 else ", ".join(bases)


def enabling_settings(wire: str, settings: Settings) -> list[str]:
    """The variables that would give a base speaking `wire` a provider: each conventional
    provider's key when that provider could serve the wire, and the providers file."""
    with_keys = settings.model_copy(update={f"{name}_api_key": "set" for name in KEYS})
    able = [KEYS[p.name] for p in conventional_providers(with_keys) if p.serves(wire)]
    return [*able, PROVIDERS_FILE]


def unserved(
    bases: Iterable[HarnessBase], providers: Iterable[Provider], settings: Settings
) -> Unserved | None:
    """The enabled bases none of `providers` can serve (None: every one has a provider)."""
    configured = list(providers)
    missing = [b for b in bases if not any(p.serves(b.wire) for p in configured)]
    if not missing:
        return None
    by_setting: dict[str, list[str]] = {}
    for base in missing:
        for name in enabling_settings(base.wire, settings):
            by_setting.setdefault(name, []).append(base.name)
    return Unserved(tuple(b.name for b in missing), by_setting)


def warn_unserved(
    bases: Iterable[HarnessBase], providers: Iterable[Provider], settings: Settings
) -> None:
    """Once, at start: the bases whose every task would be refused `model_unavailable`."""
    found = unserved(bases, providers, settings)
    if found is not None:
        log.warning(
            "no_model_provider",
            extra={
                "bases": list(found.bases),
                "hint": f"every task on these bases is refused until one is set: {found.hint()}",
            },
        )


def no_provider_message(base: HarnessBase, settings: Settings) -> str:
    """The refusal of a task on a base no configured provider serves, naming what to set."""
    names = enabling_settings(base.wire, settings)
    keys = " or ".join(n for n in names if n != PROVIDERS_FILE)
    choices = f"set {keys}, or add a provider in {PROVIDERS_FILE}" if keys else f"set {names[0]}"
    return (
        f"No model provider is configured for this harness's base ({base.name}): {choices}, "
        "then restart the server."
    )


def provider_settings(provider: Provider, settings: Settings) -> str:
    """Where an operator checks a configured provider: its variables, or the providers file."""
    conventional = provider.name in KEYS and provider.api_key == getattr(
        settings, f"{provider.name}_api_key"
    )
    return f"{LOCATIONS[provider.name]}, {KEYS[provider.name]}" if conventional else PROVIDERS_FILE
