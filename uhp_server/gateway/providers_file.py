"""UHP_PROVIDERS_FILE: several named providers, in YAML or TOML.

    providers:
      groq:
        api: chat                      # responses | chat | anthropic
        base_url: https://api.groq.com/openai/v1
        api_key_env: GROQ_API_KEY      # the key is read from this variable, never from the file
        models: [llama-3.3-70b-versatile]   # optional static list
        default_model: llama-3.3-70b-versatile  # optional
        headers: {X-Title: uhp}        # optional extra request headers

Every mistake stops start-up with a message naming the file and the field
(`providers.groq.api`), so a typo never silently drops a provider.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from uhp_server.gateway.providers import Provider, api_root, conventional_providers
from uhp_server.gateway.url_policy import CredentialsInUrl, UrlRefused, parse_url
from uhp_server.gateway.wires import api_names
from uhp_server.settings import Settings

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER = re.compile(r"[A-Za-z0-9-]{1,64}")
_FIELDS = {"api", "base_url", "api_key_env", "models", "default_model", "headers"}
# Set by the gateway itself; a configured value would be overridden or break the call.
_RESERVED_HEADERS = {"authorization", "x-api-key", "host", "content-length", "content-type"}


class ProvidersFileError(ValueError):
    """A bad providers file; the message names the file and the field."""


def read_providers_file(path: Path, taken: set[str]) -> list[Provider]:
    """The providers `path` defines. `taken`: names already configured (openai, anthropic)."""
    data = _parse(path)
    if not isinstance(data, dict) or set(data) != {"providers"}:
        raise ProvidersFileError(f"{path}: providers: the file must hold one `providers` table")
    table = data["providers"]
    if not isinstance(table, dict) or not table:
        raise ProvidersFileError(f"{path}: providers: must name at least one provider")
    providers = []
    for name, entry in table.items():
        where = f"{path}: providers.{name}"
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ProvidersFileError(f"{where}: a name is letters, digits, '_', '.', '-'")
        if name in taken:
            raise ProvidersFileError(f"{where}: the name is already taken by {name.upper()}_*")
        providers.append(_provider(where, name, entry))
    return providers


def _parse(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProvidersFileError(f"{path}: cannot be read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise ProvidersFileError(f"{path}: not UTF-8 (byte {exc.start})") from None
    try:
        if path.suffix.lower() == ".toml":
            return tomllib.loads(text)
        return yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise ProvidersFileError(f"{path}: not valid {_kind(path)}: {exc}") from None


def _kind(path: Path) -> str:
    return "TOML" if path.suffix.lower() == ".toml" else "YAML"


def _provider(where: str, name: str, entry: Any) -> Provider:
    if not isinstance(entry, dict):
        raise ProvidersFileError(f"{where}: must be a table of settings")
    unknown = sorted(set(entry) - _FIELDS)
    if unknown:
        raise ProvidersFileError(f"{where}.{unknown[0]}: unknown field")
    api = entry.get("api")
    if api not in api_names():
        raise ProvidersFileError(f"{where}.api: must be one of {', '.join(api_names())}")
    models = _models(where, entry.get("models"))
    default = entry.get("default_model")
    if default is not None and (not isinstance(default, str) or not default.strip()):
        raise ProvidersFileError(f"{where}.default_model: must be a model name")
    if default is not None and models is not None and default not in models:
        raise ProvidersFileError(f"{where}.default_model: {default!r} is not in `models`")
    return Provider(
        name=name,
        api=api,
        base_url=api_root(api, _base_url(where, entry.get("base_url"))),
        api_key=_api_key(where, entry.get("api_key_env")),
        models=models,
        default_model=default,
        headers=_headers(where, entry.get("headers")),
    )


def _base_url(where: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ProvidersFileError(f"{where}.base_url: required, an http(s) URL")
    try:
        parse_url(value)
    except CredentialsInUrl as exc:  # the file's own fields (it has no `auth`)
        instead = exc.where_instead("`api_key_env` (the variable holding the key) or `headers`")
        raise ProvidersFileError(f"{where}.base_url: {instead}") from None
    except UrlRefused as exc:
        raise ProvidersFileError(f"{where}.base_url: {exc}") from None
    return value


def _api_key(where: str, env_name: Any) -> str:
    if env_name is None:
        return ""  # an endpoint without authentication (a local vLLM, Ollama)
    if not isinstance(env_name, str) or not _ENV_NAME.fullmatch(env_name):
        raise ProvidersFileError(f"{where}.api_key_env: must name an environment variable")
    key = os.environ.get(env_name, "")
    if not key:
        raise ProvidersFileError(f"{where}.api_key_env: the variable {env_name} is not set")
    return key


def _models(where: str, value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise ProvidersFileError(f"{where}.models: must be a non-empty list of model names")
    for i, model in enumerate(value):
        if not isinstance(model, str) or not model.strip():
            raise ProvidersFileError(f"{where}.models[{i}]: must be a model name")
    return tuple(value)


def _headers(where: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProvidersFileError(f"{where}.headers: must be a table of header names to values")
    headers = {}
    for key, text in value.items():
        if not isinstance(key, str) or not _HEADER.fullmatch(key):
            raise ProvidersFileError(f"{where}.headers.{key}: not a valid header name")
        if key.lower() in _RESERVED_HEADERS:
            raise ProvidersFileError(f"{where}.headers.{key}: set by the gateway itself")
        if not isinstance(text, str) or any(ord(c) < 0x20 for c in text):
            raise ProvidersFileError(f"{where}.headers.{key}: must be a one-line string")
        headers[key.lower()] = text
    return headers


def load_providers(settings: Settings) -> list[Provider]:
    """Every configured provider, in order: the conventional ones, then the file's.
    Raises ProvidersFileError (naming the file and the field) for a bad providers file."""
    providers = conventional_providers(settings)
    if settings.providers_file:
        taken = {p.name for p in providers}
        providers += read_providers_file(settings.providers_file, taken)
    return providers
