"""Receiving `POST /v1/files`: a multipart body parsed as it streams in, within a size limit.

Starlette's `request.form()` spools a file part of any size to disk before the route sees it,
so the limit is enforced here instead, byte by byte: the part goes straight into the engine's
upload sink (a temporary file in the blob store, hashed and counted as it is written), and the
moment it passes the limit the partial file is deleted and nothing more is written. The rest
of the body is then read and discarded (up to `DRAIN_BYTES`) so the client, still sending,
reliably gets to read the 413 rather than a reset connection.
"""

from __future__ import annotations

import contextlib
import mimetypes
from collections.abc import Callable
from dataclasses import dataclass, field

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

from uhp_server.engine import UploadSink
from uhp_server.errors import ApiError
from uhp_server.files.filenames import safe_filename
from uhp_server.http.bodies import declared_length

FIELD_LIMIT = 1024  # bytes of a non-file form field (`purpose`)
MULTIPART_OVERHEAD = 64 * 1024  # headers and boundaries around the file part
DRAIN_BYTES = 64 * 1024 * 1024  # how much of an oversized body is read (and dropped) at most


@dataclass
class Upload:
    """A received file: its bytes in `sink`, for the engine to keep."""

    sink: UploadSink
    filename: str
    media_type: str
    purpose: str
    fields: dict[str, str] = field(default_factory=dict)  # the form's other fields, each small


def too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        "file_too_large",
        f"The file is larger than this server accepts ({limit} bytes).",
        param="file",
        detail={"max_bytes": limit},
    )


def _invalid(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, "invalid_input", message, param=param)


@dataclass
class _Part:
    name: str = ""
    filename: str | None = None
    media_type: str | None = None
    headers: dict[bytes, bytes] = field(default_factory=dict)
    value: bytearray = field(default_factory=bytearray)


class _Receiver:
    """The parser's callbacks: one file part to a temporary blob, small fields in memory."""

    def __init__(self, new_sink: Callable[[], UploadSink], limit: int) -> None:
        self.new_sink = new_sink
        self.limit = limit
        self.part = _Part()
        self.fields: dict[str, str] = {}
        self.header_name = b""
        self.header_value = b""
        self.sink: UploadSink | None = None
        self.size = 0
        self.file_part: _Part | None = None
        self.overflow = False
        self.error: ApiError | None = None
        # Set only by the closing boundary: without it the body was cut short (a client that
        # gave up, a dropped connection) and the file part may be missing its tail.
        self.complete = False

    def callbacks(self) -> dict[str, object]:
        return {
            "on_part_begin": self.on_part_begin,
            "on_header_field": self.on_header_field,
            "on_header_value": self.on_header_value,
            "on_header_end": self.on_header_end,
            "on_headers_finished": self.on_headers_finished,
            "on_part_data": self.on_part_data,
            "on_part_end": self.on_part_end,
            "on_end": self.on_end,
        }

    def on_part_begin(self) -> None:
        self.part = _Part()

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.header_name += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self.header_value += data[start:end]

    def on_header_end(self) -> None:
        self.part.headers[self.header_name.lower()] = self.header_value
        self.header_name, self.header_value = b"", b""

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self.part.headers.get(b"content-disposition", b""))
        self.part.name = options.get(b"name", b"").decode("utf-8", "replace")
        if b"filename" in options:
            self.part.filename = options[b"filename"].decode("utf-8", "replace")
            media = self.part.headers.get(b"content-type", b"").decode("latin-1").strip()
            self.part.media_type = media.split(";")[0].strip().lower() or None
        if self.part.name == "file" and self.part.filename is not None:
            if self.file_part is not None:
                self._fail(_invalid("Send one file per upload.", "file"))
                return
            self.file_part = self.part
            self.sink = self.new_sink()

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self.error is not None:
            return
        chunk = data[start:end]
        if self.part is not self.file_part:
            if len(self.part.value) + len(chunk) > FIELD_LIMIT:
                self._fail(_invalid("A form field is too long.", self.part.name or None))
            else:
                self.part.value += chunk
            return
        self.size += len(chunk)
        if self.size > self.limit:
            self.overflow = True
            self._fail(too_large(self.limit))
            return
        assert self.sink is not None
        self.sink.write(chunk)

    def on_part_end(self) -> None:
        if self.part is not self.file_part and self.part.name and self.error is None:
            self.fields[self.part.name] = self.part.value.decode("utf-8", "replace")

    def on_end(self) -> None:
        self.complete = True

    def _fail(self, error: ApiError) -> None:
        """Stop keeping anything: the partial file is deleted at once."""
        if self.error is None:
            self.error = error
        self.discard()

    def discard(self) -> None:
        if self.sink is not None:
            self.sink.discard()
            self.sink = None


def _boundary(request: Request) -> bytes:
    kind, params = parse_options_header(request.headers.get("content-type"))
    if kind != b"multipart/form-data" or not params.get(b"boundary"):
        raise _invalid("Upload a file as multipart/form-data with a 'file' part.")
    return params[b"boundary"]


async def _drain(request: Request) -> None:
    """Read what the client is still sending, keeping none of it, up to DRAIN_BYTES."""
    received = 0
    with contextlib.suppress(Exception):
        async for chunk in request.stream():
            received += len(chunk)
            if received > DRAIN_BYTES:
                return


async def receive_upload(
    request: Request, new_sink: Callable[[], UploadSink], limit: int
) -> Upload:
    """The file of a `POST /v1/files` body, its bytes in a sink from `new_sink`."""
    boundary = _boundary(request)
    declared = declared_length(request)
    if declared is not None and declared > limit + MULTIPART_OVERHEAD:
        await _drain(request)  # refused before a single byte is written
        raise too_large(limit)
    receiver = _Receiver(new_sink, limit)
    try:
        parser = MultipartParser(boundary, receiver.callbacks())  # type: ignore[arg-type]
    except FormParserError:  # e.g. a boundary longer than the parser takes (256)
        await _drain(request)
        raise _invalid("The multipart boundary is not usable.", "Content-Type") from None
    received = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if receiver.error is None:
                parser.write(chunk)
            elif not receiver.overflow or received > DRAIN_BYTES:
                break  # past the limit, the rest is read only so the client sees the 413
        if receiver.error is None:
            parser.finalize()
    except Exception as exc:
        receiver.discard()
        raise _invalid("The multipart body could not be parsed.") from exc
    if receiver.error is not None:
        receiver.discard()
        raise receiver.error
    if not receiver.complete:
        # The parser hands over a part's bytes as they come and its finalize() checks nothing,
        # so a body without its closing boundary would otherwise be kept, truncated.
        receiver.discard()
        raise _invalid("The multipart body ended before its closing boundary.", "file")
    return _finish(receiver)


def _finish(receiver: _Receiver) -> Upload:
    part, sink = receiver.file_part, receiver.sink
    if part is None or sink is None:
        receiver.discard()
        raise _invalid("The upload has no 'file' part.", "file")
    filename = safe_filename(part.filename)
    media_type = part.media_type
    if not media_type or media_type == "application/octet-stream" or "/" not in media_type:
        media_type = mimetypes.guess_type(filename)[0] or "application/octet-stream"
    purpose = receiver.fields.get("purpose", "user_data").strip()[:64] or "user_data"
    # A control character (NUL above all, which no database text column holds) is refused.
    if not media_type.isprintable():
        receiver.discard()
        raise _invalid("The file's Content-Type is not valid.", "file")
    if not purpose.isprintable():
        receiver.discard()
        raise _invalid("The purpose is not valid.", "purpose")
    receiver.sink = None  # the engine's now, to keep
    return Upload(sink, filename, media_type, purpose, dict(receiver.fields))
