"""The one way configuration errors are raised: 400 invalid_input with a dotted `param`."""

from __future__ import annotations

from typing import Any, NoReturn

from uhp_server.errors import ApiError


def invalid(param: str, message: str, **detail: Any) -> NoReturn:
    raise ApiError(400, "invalid_input", message, param=param, detail=detail or None)
