"""What a harness on the `acp` base names: the agent's command line, its environment and how
it reaches a model (`uhpserver_baseConfig`), checked field by field.

    {"command": ["claude-code-acp"],
     "env": {"DISABLE_AUTOUPDATER": "1"},
     "model_access": {"wire": "anthropic", "base_url_env": "ANTHROPIC_BASE_URL",
                      "token_env": "ANTHROPIC_AUTH_TOKEN", "model_env": "ANTHROPIC_MODEL"},
     "conversation_paths": [".claude"]}

The command runs inside the sandbox: a bare name is looked up on the sandbox's PATH, which
starts with the tools folder's `acp-agents/bin` and the pinned node's bin; a path is absolute
as the sandbox sees it (`${UHP_TOOLS}/…` for the tools folder). Arguments and environment
values may use the placeholders below, filled in for each turn. The turn token reaches the
agent only in the variable `token_env` names, never on its command line (any local user can
read a command line); a value of a credential-like variable is a secret: sealed, and given
back only as a `uhp-secret:` reference.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness_bases.base import BaseConfigError, SecretSealer

MAX_ARGS = 64
MAX_ARG = 4096
MAX_ENV = 64
MAX_VALUE = 8192
MAX_PATHS = 32
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
PROGRAM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")
# Names the server sets itself; `UHP_` is the server's own prefix.
RESERVED_ENV = frozenset({"PATH", "HOME"})
# As for MCP headers (uhp_server/harnesses/mcp.py): a value under such a name is a secret.
SENSITIVE_NAME = re.compile(r"(?i).*(key|token|secret|auth|passw|credential|cookie|session).*")
PLACEHOLDERS = ("UHP_MODEL", "UHP_GATEWAY_URL", "UHP_TOOLS", "UHP_HOME", "UHP_WORKSPACE")
_PLACEHOLDER = re.compile(r"\$\{(UHP_[A-Z_]*)\}")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_KEYS = {"command", "env", "model_access", "conversation_paths"}
_ACCESS_KEYS = {"wire", "base_url_env", "token_env", "model_env"}


@dataclass(frozen=True)
class ModelAccess:
    """How the agent reaches a model: the API it speaks (a registered wire) and the variables
    that carry the gateway's base URL, the turn token and (optionally) the model."""

    wire: str
    base_url_env: str
    token_env: str
    model_env: str | None = None

    def variables(self) -> tuple[str, ...]:
        return tuple(v for v in (self.base_url_env, self.token_env, self.model_env) if v)


@dataclass(frozen=True)
class AgentSpec:
    """One harness's agent, as stored (secrets as references) or resolved for a turn."""

    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    model_access: ModelAccess
    conversation_paths: tuple[str, ...] | None = None  # None: the whole agent home

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any]) -> AgentSpec:
        access = stored["model_access"]
        paths = stored.get("conversation_paths")
        return cls(
            command=tuple(stored["command"]),
            env=tuple((str(k), str(v)) for k, v in (stored.get("env") or {}).items()),
            model_access=ModelAccess(
                wire=access["wire"],
                base_url_env=access["base_url_env"],
                token_env=access["token_env"],
                model_env=access.get("model_env"),
            ),
            conversation_paths=tuple(paths) if paths is not None else None,
        )


def parse(raw: Any, seal: SecretSealer, wires: Mapping[str, str]) -> dict[str, Any]:
    """The stored form of `raw`; BaseConfigError naming the field that is wrong."""
    if not isinstance(raw, dict):
        raise BaseConfigError("", "Must be an object: `command`, `env`, `model_access`.")
    _no_unknown(raw, _KEYS, "")
    access = _model_access(raw.get("model_access"), wires)
    stored: dict[str, Any] = {
        "command": _command(raw.get("command")),
        "env": _env(raw.get("env"), access, seal),
        "model_access": access,
    }
    if raw.get("conversation_paths") is not None:
        stored["conversation_paths"] = _paths(raw["conversation_paths"])
    return stored


def _no_unknown(raw: dict[str, Any], known: set[str], where: str) -> None:
    for key in raw:
        if key not in known:
            path = f"{where}.{key}" if where else str(key)
            raise BaseConfigError(path, f"Unknown field; known: {', '.join(sorted(known))}.")


def _text(value: Any, param: str, limit: int) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise BaseConfigError(param, f"Must be a string of at most {limit} characters.")
    if _CONTROL.search(value):
        raise BaseConfigError(param, "Must not contain control characters.")
    for name in _PLACEHOLDER.findall(value):
        if name not in PLACEHOLDERS:
            known = ", ".join(f"${{{p}}}" for p in PLACEHOLDERS)
            raise BaseConfigError(param, f"Unknown placeholder ${{{name}}}; known: {known}.")
    return value


def _command(raw: Any) -> list[str]:
    if not isinstance(raw, list) or not raw or len(raw) > MAX_ARGS:
        raise BaseConfigError(
            "command",
            f"Required: the agent's command line as an array of 1 to {MAX_ARGS} strings "
            '(e.g. ["claude-code-acp"]).',
        )
    argv = [_text(arg, f"command[{i}]", MAX_ARG) for i, arg in enumerate(raw)]
    program = argv[0]
    absolute = program.startswith("/") or program.startswith("${UHP_TOOLS}/")
    if absolute:
        if "/../" in f"{program}/" or "/./" in f"{program}/" or "//" in program:
            raise BaseConfigError("command[0]", "A program path must not contain . or .. parts.")
    elif not PROGRAM_NAME.fullmatch(program):
        raise BaseConfigError(
            "command[0]",
            "The program must be a bare name found on the sandbox's PATH (the tools folder's "
            "acp-agents/bin first) or an absolute path inside the sandbox "
            "(${UHP_TOOLS}/… for the tools folder).",
        )
    return argv


def _env_name(name: Any, param: str) -> str:
    if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
        raise BaseConfigError(
            param, "An environment variable's name must match [A-Za-z_][A-Za-z0-9_]*."
        )
    if name in RESERVED_ENV or name.startswith("UHP_"):
        raise BaseConfigError(
            param, f"{name} is set by the server (PATH, HOME and UHP_* are reserved)."
        )
    return name


def _model_access(raw: Any, wires: Mapping[str, str]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise BaseConfigError(
            "model_access",
            "Required: an object naming the agent's `wire` and the variables that carry the "
            "gateway's base URL (`base_url_env`) and the turn token (`token_env`).",
        )
    _no_unknown(raw, _ACCESS_KEYS, "model_access")
    wire = raw.get("wire")
    if wire not in wires:
        raise BaseConfigError(
            "model_access.wire",
            f"Unknown wire {wire!r}; one of: {', '.join(wires)}.",
        )
    access: dict[str, Any] = {"wire": wire}
    for key in ("base_url_env", "token_env", "model_env"):
        value = raw.get(key)
        if value is None and key == "model_env":
            continue
        if value is None:
            raise BaseConfigError(
                f"model_access.{key}", "Required: an environment variable's name."
            )
        access[key] = _env_name(value, f"model_access.{key}")
    names = [access[k] for k in ("base_url_env", "token_env", "model_env") if k in access]
    if len(set(names)) != len(names):
        raise BaseConfigError("model_access", "Each variable must be a different one.")
    return access


def _env(raw: Any, access: dict[str, Any], seal: SecretSealer) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or len(raw) > MAX_ENV:
        raise BaseConfigError("env", f"Must be an object of at most {MAX_ENV} variables.")
    taken = {access[k] for k in ("base_url_env", "token_env", "model_env") if k in access}
    env: dict[str, str] = {}
    for name, value in raw.items():
        param = f"env.{name}"
        _env_name(name, param)
        if name in taken:
            raise BaseConfigError(param, f"{name} is set by the server: model_access names it.")
        value = _text(value, param, MAX_VALUE)
        secret = SENSITIVE_NAME.fullmatch(name) or value.startswith("uhp-secret:")
        env[name] = seal(value, param) if secret else value
    return env


def _paths(raw: Any) -> list[str]:
    if not isinstance(raw, list) or len(raw) > MAX_PATHS:
        raise BaseConfigError(
            "conversation_paths", f"Must be an array of at most {MAX_PATHS} paths."
        )
    paths: list[str] = []
    for index, path in enumerate(raw):
        param = f"conversation_paths[{index}]"
        text = _text(path, param, 240)
        parts = text.split("/")
        if not text or text.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise BaseConfigError(param, "Must be a path relative to the agent's home.")
        paths.append(text)
    return paths
