"""Model providers: where the gateway sends a turn's model calls, and which API they speak.

Two axes meet in the gateway. A CLI speaks one *wire* (Codex: Responses, Claude Code:
Anthropic Messages, Hermes: Chat Completions); a provider serves one *API*. The gateway
passes a call through when the two agree and translates it (gateway/wires) when they do not.

Providers come from the conventional variables (`OPENAI_*` as provider "openai",
`ANTHROPIC_*` as provider "anthropic") and from `UHP_PROVIDERS_FILE` (providers_file.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from uhp_server.gateway.wires import ProviderApi, api_named, translation, wire_named
from uhp_server.settings import Settings

# The API the conventional ANTHROPIC_* variables configure (OPENAI_* say theirs: UHP_OPENAI_API).
ANTHROPIC_API = "anthropic"


@dataclass(frozen=True)
class Provider:
    """One model endpoint. base_url is the API root endpoint paths are appended to (it ends in
    /v1 for Anthropic, normalised; an OpenAI-style root is used as configured)."""

    name: str
    api: str  # the wire it serves: "responses" | "chat" | "anthropic" (wires.api_names())
    base_url: str
    api_key: str = field(repr=False)
    models: tuple[str, ...] | None = None  # a static list, for endpoints without a models route
    default_model: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    # Applied to every upstream request body (a per-turn connection's generation settings).
    generation: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # None: the operator's own provider, trusted. A bool: a per-turn connection handed in by a
    # front door, checked and pinned by the URL policy on every call (url_policy.py).
    allow_private: bool | None = None

    @property
    def served(self) -> ProviderApi:
        """Its API, as the gateway calls it: auth, version headers, usage counting."""
        return api_named(self.api)

    @property
    def backend(self) -> str:
        """The backend whose clients its API's own answers suit ("openai", "anthropic")."""
        return wire_named(self.api).backend

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def auth_headers(self) -> dict[str, str]:
        if not self.api_key:
            return {}
        return self.served.auth_headers(self.api_key)

    def upstream_api(self, wire: str) -> str:
        """The API a call on `wire` reaches this provider as: its own, or the one its API
        takes other wires' calls in (ProviderApi.other_wires_as: a `responses` provider, the
        OpenAI platform, serves Chat Completions too, so Chat passes through to it and other
        wires are translated to Chat for it)."""
        if self.api == wire:
            return wire
        return self.served.other_wires_as

    def serves(self, wire: str) -> bool:
        """Whether a CLI speaking `wire` can use this provider (directly or translated)."""
        try:
            api = self.upstream_api(wire)
            if api != wire:
                translation(wire, api)
        except ValueError:
            return False
        return True


def provider_secrets(provider: Provider | None) -> tuple[str, ...]:
    """What of a provider must never reach a sandbox, a log or a stored event: its key and
    header values (a per-turn connection's run token)."""
    if provider is None:
        return ()
    return (provider.api_key, *provider.headers.values())


def api_root(api: str, base_url: str) -> str:
    """The root endpoint paths are appended to, as a provider of `api` takes its base URL."""
    return api_named(api).root(base_url)


def model_list(value: str | None) -> tuple[str, ...] | None:
    """A comma-separated model list (UHP_OPENAI_MODELS); None when unset or empty."""
    models = tuple(m.strip() for m in (value or "").split(",") if m.strip())
    return models or None


def conventional_providers(settings: Settings) -> list[Provider]:
    """The zero-configuration providers: each one whose key is set."""
    found = []
    if settings.openai_api_key:
        found.append(
            Provider(
                "openai",
                settings.openai_api,
                api_root(settings.openai_api, settings.openai_base_url),
                settings.openai_api_key,
                models=model_list(settings.openai_models),
                default_model=settings.openai_default_model or None,
            )
        )
    if settings.anthropic_api_key:
        found.append(
            Provider(
                "anthropic",
                ANTHROPIC_API,
                api_root(ANTHROPIC_API, settings.anthropic_base_url),
                settings.anthropic_api_key,
                models=model_list(settings.anthropic_models),
                default_model=settings.anthropic_default_model or None,
            )
        )
    return found
