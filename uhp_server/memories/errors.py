"""The chapter's errors (Memories §12), as every part that refuses for it raises them."""

from __future__ import annotations

from uhp_server.errors import ApiError

NOT_FOUND = "No memory with that id."


def memory_not_found(message: str = NOT_FOUND, param: str | None = None) -> ApiError:
    """Also a memory the caller may not see: unknown and forbidden look the same (§13)."""
    return ApiError(404, "memory_not_found", message, param=param)


def memory_forbidden(privilege: str) -> ApiError:
    return ApiError(
        403,
        "memory_forbidden",
        f"This needs the `{privilege}` privilege on the memory, which you do not hold.",
    )


def record_not_found() -> ApiError:
    return ApiError(404, "memory_record_not_found", "No record with that id in this memory.")


def memory_invalid(message: str, param: str | None = None) -> ApiError:
    return ApiError(422, "memory_invalid", message, param=param)


def memory_unsupported(message: str, param: str | None = None) -> ApiError:
    return ApiError(422, "memory_unsupported", message, param=param)


def memories_not_attached() -> ApiError:
    return ApiError(
        404,
        "memories_not_attached",
        "This harness's agent holds no memory: grant its principal (GET "
        "/v1/harnesses/{id}/memories names it) a privilege on one first.",
    )
