"""The model catalogue (Harnesses §3): every model of every provider, and where an id routes.

`available` is never asserted: a model is available when its provider serves it right now
(gateway/upstreams.py says how that is measured). Any base runs any provider's model: the
gateway translates between the wire the base's CLI speaks and the API the provider serves.

Ids: a model is named by its bare id, or `provider/model` to pick the provider. A bare id
served by several providers goes to the first of them in the base's order: providers serving
the base's own wire first, then configuration order (`openai`, `anthropic`, then the
providers file). In a harness's model list the first occurrence keeps the bare id and the
others are listed qualified. `GET /v1/models` lists each provider's models under its name.

Default model of a base: the harness's `defaultModel`, else the default of the first provider
in the base's order whose default it serves now (its configured default, the first of its
static list, or the first model it lists); when none is served, the first configured one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness_bases.base import HarnessBase
from uhp_server.errors import ApiError
from uhp_server.gateway.provider_hints import no_provider_message, provider_settings
from uhp_server.gateway.providers import Provider


@dataclass(frozen=True)
class ModelRoute:
    """Where a model id goes: its provider and the provider's own name for the model."""

    id: str  # as the catalogue and the response report it
    provider: Provider
    model: str


Listings = dict[str, list[str]]


class ModelCatalog:
    def __init__(self, upstreams: Any) -> None:
        self.upstreams = upstreams

    # -- lookups -------------------------------------------------------------------------
    def order(self, wire: str) -> list[Provider]:
        """Providers as a base speaking `wire` prefers them (see the module docstring),
        leaving out those it cannot use (no translation between the two APIs)."""
        providers = [p for p in self.upstreams.providers.values() if p.serves(wire)]
        return sorted(providers, key=lambda p: p.upstream_api(wire) != wire)

    async def _listings(self) -> Listings:
        return {
            name: await self.upstreams.list_models(name) or [] for name in self.upstreams.providers
        }

    def _ids(self, order: list[Provider], listings: Listings) -> list[ModelRoute]:
        """Every served model once, bare where it is the first of its name."""
        seen: set[str] = set()
        routes = []
        for provider in order:
            for model in listings[provider.name]:
                model_id = model if model not in seen else f"{provider.name}/{model}"
                seen.add(model)
                routes.append(ModelRoute(model_id, provider, model))
        return routes

    def _route(self, model_id: str, order: list[Provider], listings: Listings) -> ModelRoute | None:
        prefix, _, rest = model_id.partition("/")
        named = self.upstreams.providers.get(prefix) if rest else None
        # A provider the base cannot use is no route, even when named explicitly.
        if named in order and rest in listings[named.name]:
            return ModelRoute(model_id, named, rest)
        for provider in order:
            if model_id in listings[provider.name]:
                return ModelRoute(model_id, provider, model_id)
        return None

    async def _default(self, order: list[Provider], listings: Listings) -> str | None:
        """The first provider default that is served now, as an id routing back to its
        provider; when none is, the first configured one (then shown unavailable)."""
        routes = self._ids(order, listings)
        fallback = None
        for provider in order:
            model = await self.upstreams.default_model(provider.name)
            if not model:
                continue
            for route in routes:
                if route.provider is provider and route.model == model:
                    return route.id
            if fallback is None:
                served_elsewhere = self._route(model, order, listings) is not None
                fallback = f"{provider.name}/{model}" if served_elsewhere else model
        return fallback

    async def default_for(self, base: HarnessBase, harness_default: str | None) -> str | None:
        if harness_default:
            return harness_default
        return await self._default(self.order(base.wire), await self._listings())

    # -- the protocol's shapes -------------------------------------------------------------
    async def provider_entry(self, name: str) -> dict[str, Any] | None:
        """One provider's models for `GET /v1/models`, under their own (bare) names."""
        listed = await self.upstreams.list_models(name) or []
        default = await self.upstreams.default_model(name)
        names = list(listed) + _unlisted(self.upstreams.providers[name], listed)
        if default and default not in names:
            names.append(default)
        if not names:
            return None
        models = [_model(m, m, name, m in listed, m == default) for m in names]
        return {"default": default or "", "models": models}

    async def harness_models(
        self, harness_id: str, base: HarnessBase, harness_default: str | None
    ) -> dict[str, Any]:
        order = self.order(base.wire)
        listings = await self._listings()
        default = harness_default or await self._default(order, listings)
        routes = self._ids(order, listings)
        models = [_model(r.id, r.model, r.provider.name, True, r.id == default) for r in routes]
        seen = {r.model for r in routes}
        for provider in order:  # configured but not served now: listed, unavailable
            for model in _unlisted(provider, listings[provider.name]):
                model_id = model if model not in seen else f"{provider.name}/{model}"
                seen.add(model)
                models.append(_model(model_id, model, provider.name, False, model_id == default))
        served = default is not None and self._route(default, order, listings) is not None
        if default and not any(m["id"] == default for m in models):
            models.append(_model(default, default, "", served, True))
        result: dict[str, Any] = {"harness_id": harness_id, "backend": base.backend}
        result["models"] = models
        if default:
            result["default"] = default
            if served:
                result["fallback"] = default
        return result

    async def resolve(
        self, base: HarnessBase, harness_default: str | None, requested: str | None
    ) -> tuple[ModelRoute, dict[str, Any]]:
        """The model a task runs, and the metadata that reports a substitution (Tasks §1.3)."""
        order = self.order(base.wire)
        listings = await self._listings()
        if requested and (route := self._route(requested, order, listings)):
            return route, {}
        default = harness_default or await self._default(order, listings)
        route = self._route(default, order, listings) if default else None
        if route is not None:
            if not requested or requested == default:
                return route, {}
            return route, {
                "requested_model": requested,
                "model_fallback": True,
                "model_fallback_reason": f"model '{requested}' is not available for this harness",
            }
        raise ApiError(
            422,
            "model_unavailable",
            self._unavailable(base, order, requested, default),
            param="model" if requested else None,
        )

    def _unavailable(
        self, base: HarnessBase, order: list[Provider], requested: str | None, default: str | None
    ) -> str:
        """Why nothing runs, naming the setting to look at (provider_hints.py): no provider
        that could serve the base is configured, or those configured do not serve its default
        model now (unreachable, a wrong key, a model they do not have)."""
        settings = self.upstreams.settings
        if not order:
            return no_provider_message(base, settings)
        asked = f" (asked for {requested!r})" if requested else ""
        why = f"its default model {default!r} is not" if default else "no model is"
        checked = "; ".join(f"{p.name}: {provider_settings(p, settings)}" for p in order)
        return (
            f"No model can be served for this harness right now{asked}: {why} served by its "
            f"providers now (check {checked}); GET /v1/models shows what each serves."
        )


def _unlisted(provider: Provider, listed: list[str]) -> list[str]:
    """The models configured for a provider (static list, default) it does not serve now:
    both listings show them, unavailable."""
    configured = [*(provider.models or ()), provider.default_model]
    return list(dict.fromkeys(m for m in configured if m and m not in listed))


def _model(model_id: str, label: str, provider: str, available: bool, default: bool) -> dict:
    entry: dict[str, Any] = {"id": model_id, "label": label}
    if provider:
        entry["backend"] = provider
    entry.update(available=available, default=default)
    return entry
