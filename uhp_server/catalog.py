"""The model catalogue (Harnesses §3): what each backend serves, computed from the upstreams.

`available` is never asserted: a model is available when the backend's upstream is
configured and its models endpoint lists it right now.
"""

from __future__ import annotations

from typing import Any

from harness_bases.base import HarnessBase
from uhp_server.errors import ApiError


class ModelCatalog:
    def __init__(self, upstreams: Any) -> None:
        self.upstreams = upstreams

    async def _listed(self, backend: str) -> list[str]:
        return await self.upstreams.list_models(backend) or []

    async def default_for(self, backend: str, harness_default: str | None) -> str | None:
        return harness_default or await self.upstreams.default_model(backend)

    async def backend_entry(self, backend: str) -> dict[str, Any] | None:
        listed = await self._listed(backend)
        default = await self.default_for(backend, None)
        names = list(listed)
        if default and default not in names:
            names.append(default)  # configured but not served: shown, and unavailable
        if not names:
            return None
        return {
            "default": default or "",
            "models": [self._model(name, backend, listed, default) for name in names],
        }

    async def harness_models(
        self, harness_id: str, base: HarnessBase, harness_default: str | None
    ) -> dict[str, Any]:
        listed = await self._listed(base.backend)
        default = await self.default_for(base.backend, harness_default)
        names = list(listed)
        if default and default not in names:
            names.append(default)
        result: dict[str, Any] = {
            "harness_id": harness_id,
            "backend": base.backend,
            "models": [self._model(name, base.backend, listed, default) for name in names],
        }
        if default:
            result["default"] = default
            if default in listed:
                result["fallback"] = default
        return result

    async def resolve(
        self, base: HarnessBase, harness_default: str | None, requested: str | None
    ) -> tuple[str, dict[str, Any]]:
        """The model a task runs, and the metadata that reports a substitution (Tasks §1.3)."""
        listed = await self._listed(base.backend)
        default = await self.default_for(base.backend, harness_default)
        if requested and requested in listed:
            return requested, {}
        if default and default in listed:
            if not requested or requested == default:
                return default, {}
            return default, {
                "requested_model": requested,
                "model_fallback": True,
                "model_fallback_reason": (
                    f"model '{requested}' is not available for this harness's backend"
                ),
            }
        raise ApiError(
            422,
            "model_unavailable",
            f"No model can be served for this harness right now"
            f"{f' (asked for {requested!r})' if requested else ''}.",
            param="model" if requested else None,
        )

    @staticmethod
    def _model(name: str, backend: str, listed: list[str], default: str | None) -> dict[str, Any]:
        return {
            "id": name,
            "label": name,
            "backend": backend,
            "available": name in listed,
            "default": name == default,
        }
