"""OpenAI's error shape for every answer under /openai/v1.

Chat clients parse `{"error": {"message", "type", "param", "code"}}` and nothing else, so the
door renders the server's own errors (ApiError) in that shape, with OpenAI's `type` names.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from uhp_server.errors import (
    VENDOR,
    ApiError,
    allowed_methods,
    new_correlation_id,
    validation_message,
)
from uhp_server.http.unexpected import serve_answering_failures

log = logging.getLogger("uhp_server.openai_chat")

# OpenAI answers every client mistake, a bad key included, as invalid_request_error.
_TYPE_BY_STATUS = {403: "permission_error", 429: "rate_limit_error"}
# The server's credential codes, in the names OpenAI clients recognise.
_CODE_ALIASES = {
    "missing_credential": "invalid_api_key",
    "invalid_credential": "invalid_api_key",
    "invalid_input": "invalid_request",  # the server's strict JSON parser names it so
}


def openai_error_body(status: int, code: str | None, message: str, param: str | None) -> dict:
    kind = _TYPE_BY_STATUS.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


# A failed turn is the harness's fault (502), except when it refused the caller's input.
_CALLER_INPUT_STATUS = {"input_too_large": 413, "invalid_input": 400}


# The openai SDK repeats a 409 or a 5xx twice by default, unless told not to: a turn that ran
# (its commands, its files) must not run again behind the caller's back.
NO_RETRY = {"x-should-retry": "false"}


def turn_failure(final: dict[str, Any]) -> ApiError:
    """The error a failed or cancelled task answers with."""
    if final.get("status") == "cancelled":
        return ApiError(
            409, "cancelled", "The task was cancelled before it finished.", headers=NO_RETRY
        )
    error = final.get("error") or {}
    code = error.get("code") or "harness_error"
    message = error.get("message") or "The task failed."
    return ApiError(_CALLER_INPUT_STATUS.get(code, 502), code, message, headers=NO_RETRY)


def openai_error(request: Request, err: ApiError) -> JSONResponse:
    correlation_id = new_correlation_id()
    log.info(
        "request_error",
        extra={
            "correlation_id": correlation_id,
            "status": err.status,
            "code": err.code,
            "path": request.url.path,
            "internal": err.log_detail,
        },
    )
    code = _CODE_ALIASES.get(err.code, err.code)
    body = openai_error_body(err.status, code, err.message, err.param)
    headers = {**(err.headers or {}), "X-Request-Id": correlation_id}
    return JSONResponse(body, status_code=err.status, headers=headers)


async def _on_api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return openai_error(request, exc)


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    first: dict[str, Any] = errors[0] if errors else {}
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    param = None if first.get("type") == "json_invalid" else ".".join(loc) or None
    err = ApiError(400, "invalid_request", validation_message(first), param=param)
    return openai_error(request, err)


async def _on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404:
        err = ApiError(404, "not_found", f"Unknown path: {request.url.path}.")
    elif exc.status_code == 405:
        allow = {"Allow": ", ".join(allowed_methods(request))}
        err = ApiError(
            405, "method_not_allowed", "This route does not accept that method.", headers=allow
        )
    else:
        err = ApiError(exc.status_code, "invalid_request", "The request could not be served.")
    return openai_error(request, err)


class _InternalErrors:
    """An unexpected failure answered in OpenAI's shape (uhp_server/http/unexpected.py), inside
    the sub-application: Starlette's own answer would be plain text, which chat clients
    cannot read, and the server's outermost middleware would find it already sent."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await serve_answering_failures(self.app, scope, receive, send, _failed)


def _failed(correlation_id: str) -> tuple[dict[str, Any], list[tuple[bytes, bytes]]]:
    message = "The server failed to handle this request."
    body = openai_error_body(500, VENDOR + "internal_error", message, None)
    return body, [(b"x-request-id", correlation_id.encode())]


def install_openai_errors(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _on_api_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_middleware(_InternalErrors)
