"""The image parts a request carries, in any of the three wires, described for IMAGES.

Responses: ``{"type": "input_image", "image_url": "data:…"}`` (or ``file_id``); Chat:
``{"type": "image_url", "image_url": {"url": "data:…"}}``; Anthropic: ``{"type": "image",
"source": {"type": "base64", "media_type": …, "data": …}}`` (or a ``url`` source). Each is
described as ``<media type> <byte count>B sha256:<first 12 hex>`` so a test can check that
the bytes arrived intact, whatever translated them on the way.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from urllib.parse import unquote_to_bytes


def find_images(body: object) -> list[str]:
    """Descriptions of every image part in ``body``, in document order."""
    found: list[str] = []
    _walk(body, found)
    return found


def describe(media_type: str, data: bytes) -> str:
    return f"{media_type} {len(data)}B sha256:{hashlib.sha256(data).hexdigest()[:12]}"


def _walk(value: object, found: list[str]) -> None:
    if isinstance(value, list):
        for item in value:
            _walk(item, found)
        return
    if not isinstance(value, dict):
        return
    described = _image(value)
    if described:
        found.append(described)
        return
    for item in value.values():
        _walk(item, found)


def _image(part: dict) -> str | None:
    kind = part.get("type")
    if kind == "input_image":
        url = part.get("image_url")
        return _url(url) if isinstance(url, str) else f"file_id {part.get('file_id')}"
    if kind == "image_url" and isinstance(part.get("image_url"), dict):
        return _url(str(part["image_url"].get("url", "")))
    source = part.get("source")
    if kind == "image" and isinstance(source, dict):
        if source.get("type") == "base64":
            return _base64(str(source.get("media_type")), str(source.get("data", "")))
        return f"url {source.get('url')}"
    return None


def _url(url: str) -> str:
    if not url.startswith("data:") or "," not in url:
        return f"url {url}"
    header, payload = url[5:].split(",", 1)
    params = header.split(";")
    if "base64" in params[1:]:
        return _base64(params[0], payload)
    return describe(params[0], unquote_to_bytes(payload))


def _base64(media_type: str, payload: str) -> str:
    try:
        return describe(media_type, base64.b64decode(payload, validate=True))
    except (binascii.Error, ValueError):
        return f"{media_type} undecodable base64"
