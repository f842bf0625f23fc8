"""The chapter's errors (Environments §8), as every part that refuses for it raises them: the
facade's routes, the harness write that names an environment, a task's intake."""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from typing import Any

from uhp_server.environments.names import Invalid
from uhp_server.environments.source import TooLarge, refusal
from uhp_server.errors import ApiError

NOT_FOUND = "No environment with that id."


def environment_not_found(message: str = NOT_FOUND, param: str | None = None) -> ApiError:
    return ApiError(404, "environment_not_found", message, param=param)


def environment_not_ready(message: str, param: str | None = None) -> ApiError:
    return ApiError(409, "environment_not_ready", message, param=param)


def invalid(message: str, status: int = 422) -> ApiError:
    return ApiError(status, "environment_invalid", message)


def busy(message: str) -> ApiError:
    return ApiError(409, "environment_busy", message)


def storage_failed(exc: OSError) -> ApiError:
    """A file operation's error: the client's path (environment_invalid), or the server's
    storage failing (environment_unavailable), never a 500."""
    said = refusal(exc)
    if said is not None:
        return invalid(str(said))
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return ApiError(503, "environment_unavailable", "The server's storage is full.")
    return ApiError(
        502, "environment_unavailable", f"The server's storage failed: {exc.strerror or exc}."
    )


def too_large(exc: TooLarge) -> ApiError:
    detail: dict[str, Any] = {"max_bytes": exc.max_bytes}
    if exc.max_files is not None:
        detail["max_files"] = exc.max_files
    return ApiError(413, "file_too_large", str(exc), detail=detail)


@contextlib.contextmanager
def source_errors(not_found: str = "No file at that path in the environment.") -> Iterator[None]:
    """The source's refusals as the chapter's errors."""
    try:
        yield
    except Invalid as exc:
        raise invalid(str(exc)) from None
    except TooLarge as exc:
        raise too_large(exc) from None
    except FileNotFoundError:
        raise ApiError(404, "not_found", not_found) from None
    except OSError as exc:
        raise storage_failed(exc) from None
