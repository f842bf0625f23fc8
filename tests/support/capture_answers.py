"""Record the scripted provider's streamed answers to the captured CLI requests, for replay.

    .venv/bin/python -m tests.support.capture_answers

For every request in tests/fixtures/gateway/<cli>_<turn>.json: the provider's native answer
(`…native.sse`: Responses or Messages, what the CLI got) and its Chat Completions answer to
the gateway's translation of that request (`…chat.sse`), both streamed, byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.conftest import MODELS, PROVIDER_KEY
from tests.scripted_provider import start_provider
from tests.support.translations import translation_between

FIXTURES = Path(__file__).parent.parent / "fixtures" / "gateway"
NATIVE = {"codex": ("responses", "/v1/responses"), "claude": ("anthropic", "/v1/messages")}


def answers(client: httpx.Client, path: str, body: dict) -> bytes:
    headers = {"authorization": f"Bearer {PROVIDER_KEY}", "anthropic-version": "2023-06-01"}
    with client.stream("POST", path, json=body, headers=headers) as resp:
        resp.raise_for_status()
        return resp.read()


def main() -> None:
    provider = start_provider(PROVIDER_KEY, MODELS)
    try:
        with httpx.Client(base_url=provider.url, timeout=30) as client:
            for capture in sorted(FIXTURES.glob("*.json")):
                cli = capture.stem.split("_")[0]
                wire, native_path = NATIVE[cli]
                for n, body in enumerate(json.loads(capture.read_text())):
                    stem = FIXTURES / f"{capture.stem}.{n}"
                    native = answers(client, native_path, body)
                    Path(f"{stem}.native.sse").write_bytes(native)
                    chat_body = translation_between(wire, "chat").request(body, model=body["model"])
                    Path(f"{stem}.chat.sse").write_bytes(
                        answers(client, "/v1/chat/completions", chat_body)
                    )
                    print(stem.name, len(native), "bytes native")
    finally:
        provider.stop()


if __name__ == "__main__":
    main()
