"""The one error envelope (Errors §1) and the exception handlers that produce it.

Every non-2xx answer goes through `error_response`. Messages are written for users: no
paths, hostnames, stack traces or secrets. Each error carries a correlation id in
`detail.correlation_id` that matches the structured log line holding what was withheld.
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from uhp_server.http.route_table import served_routes

log = logging.getLogger("uhp_server.errors")

VENDOR = "uhpserver_"  # prefix of codes this server defines beyond the spec (Errors §1)

_TYPE_BY_STATUS = {
    400: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    408: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    429: "rate_limit_error",
}


def error_type_for(status: int) -> str:
    return _TYPE_BY_STATUS.get(status, "server_error")


class ApiError(Exception):
    """A request failure a client can see. Raise it anywhere in a route."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        param: str | None = None,
        detail: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        log_detail: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.param = param
        self.detail = detail
        self.headers = headers
        self.log_detail = log_detail


def new_correlation_id() -> str:
    return "corr_" + secrets.token_hex(8)


def error_body(
    status: int,
    code: str,
    message: str,
    *,
    param: str | None = None,
    detail: dict[str, Any] | None = None,
    correlation_id: str | None = None,
) -> dict[str, Any]:
    """The envelope. Also used for the `error` of a failed response (type harness_error)."""
    merged = dict(detail or {})
    if correlation_id:
        merged["correlation_id"] = correlation_id
    return {
        "error": {
            "type": error_type_for(status),
            "code": code,
            "message": message,
            "param": param,
            "detail": merged or None,
        }
    }


class AuthFailureSummary:
    """Refused credentials are counted and logged once a minute, not per request: anyone can
    send them, and a flood must not become a flood of log lines."""

    interval = 60.0

    def __init__(self) -> None:
        self.count = 0
        self.last = float("-inf")

    def record(self, code: str) -> None:
        self.count += 1
        now = time.monotonic()
        if now - self.last < self.interval:
            return
        log.info(
            "auth_failures",
            extra={"count": self.count, "last_code": code, "next_report_in_seconds": 60},
        )
        self.count = 0
        self.last = now


auth_failures = AuthFailureSummary()


def error_response(request: Request | None, err: ApiError) -> JSONResponse:
    correlation_id = new_correlation_id()
    if err.status == 401:
        auth_failures.record(err.code)
    else:
        log.info(
            "request_error",
            extra={
                "correlation_id": correlation_id,
                "status": err.status,
                "code": err.code,
                "path": request.url.path if request else None,
                "internal": err.log_detail,
            },
        )
    body = error_body(
        err.status,
        err.code,
        err.message,
        param=err.param,
        detail=err.detail,
        correlation_id=correlation_id,
    )
    return JSONResponse(body, status_code=err.status, headers=err.headers)


def _dotted(loc: tuple[Any, ...]) -> str | None:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or None


def validation_message(first: dict[str, Any]) -> str:
    kind = first.get("type", "")
    param = _dotted(tuple(first.get("loc", ())))
    if kind == "json_invalid":
        return "The request body is not valid JSON."
    if param is None:
        if kind == "missing":
            return "The request needs a JSON body."
        return "The request body must be a JSON object."
    if kind == "missing":
        return f"The field '{param}' is required." if param else "A required field is missing."
    if param:
        return f"The field '{param}' is invalid: {first.get('msg', 'wrong type')}."
    return "The request body is invalid."


async def _on_api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(request, exc)


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    first = errors[0] if errors else {}
    param = _dotted(tuple(first.get("loc", ())))
    if first.get("type") == "json_invalid":
        param = None
    return error_response(
        request,
        ApiError(400, "invalid_input", validation_message(first), param=param),
    )


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this path. Starlette's 405 names only the first
    route whose path matched, although routes for other methods may share the path. HEAD
    is served wherever GET is (http/head_requests.py)."""
    methods: set[str] = set()
    for route in served_routes(request.app):
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


async def _on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 404:
        err = ApiError(404, VENDOR + "route_not_found", "No such route.")
    elif exc.status_code == 405:
        headers["Allow"] = ", ".join(allowed_methods(request))
        err = ApiError(
            405, VENDOR + "method_not_allowed", "This route does not accept that method."
        )
    elif exc.status_code == 400:
        err = ApiError(400, "invalid_input", "The request could not be parsed.")
    else:
        err = ApiError(exc.status_code, VENDOR + "http_error", "The request could not be served.")
    err.headers = headers or None
    return error_response(request, err)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _on_api_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    # Anything unexpected is answered by VersionMiddleware, inside the version header.
