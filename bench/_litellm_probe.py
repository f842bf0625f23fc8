"""LiteLLM's Responses and Anthropic Messages bridges over a Chat Completions provider, for
bench/translation_compare.py. Runs in a SCRATCH venv with litellm installed, never the
project's: `python bench/_litellm_probe.py PROVIDER_URL KEY FIXTURES_DIR LONG_PROMPT [ROUNDS]`.
Prints one JSON object: the events each bridge produced for each captured request, and the
time between consecutive events of a long streamed answer (with the raw Chat stream's, read
with httpx in the same process, as the baseline)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # else it fetches it online

import httpx
import litellm
from litellm.anthropic_interface import messages as anthropic_messages

PROVIDER = "custom_openai"  # an OpenAI-compatible Chat Completions server
# Without it LiteLLM refuses every Claude Code request (`thinking` is not a Chat parameter).
litellm.drop_params = True


async def responses_events(url: str, key: str, body: dict) -> list[dict]:
    args = {k: v for k, v in body.items() if k != "model"}
    stream = await litellm.aresponses(
        model=f"{PROVIDER}/{body['model']}", api_base=url, api_key=key, **args
    )
    return [event.model_dump(mode="json", exclude_none=False) async for event in stream]


async def anthropic_sse(url: str, key: str, body: dict) -> str:
    args = {k: v for k, v in body.items() if k != "model"}
    stream = await anthropic_messages.acreate(
        model=f"{PROVIDER}/{body['model']}", api_base=url, api_key=key, **args
    )
    out = []
    async for piece in stream:
        out.append(piece.decode() if isinstance(piece, bytes) else json.dumps(piece))
    return "".join(out)


async def gaps(items) -> list[float]:
    """Seconds between consecutive items of an async iterator (the first is not counted)."""
    times = []
    async for _ in items:
        times.append(time.perf_counter())
    return [b - a for a, b in itertools.pairwise(times)]


async def timed(make) -> dict:
    """The gaps between a stream's items and its whole time, request included."""
    started = time.perf_counter()
    between = await gaps(await make())
    return {"gaps": between, "total": time.perf_counter() - started}


async def raw_chunks(url: str, key: str, model: str, prompt: str):
    body = {"model": model, "stream": True, "messages": [{"role": "user", "content": prompt}]}
    headers = {"authorization": f"Bearer {key}"}
    async with (
        httpx.AsyncClient(timeout=60) as client,
        client.stream("POST", f"{url}/chat/completions", json=body, headers=headers) as resp,
    ):
        async for line in resp.aiter_lines():
            if line.startswith("data:"):
                yield line


async def main() -> None:
    url, key, fixtures, long_prompt = sys.argv[1:5]
    result: dict = {
        "responses": {},
        "anthropic": {},
        "errors": {},
        "gaps": {},
        "sent": {},
        "repeated": {},
    }
    scripted = url.removesuffix("/v1") + "/_scripted"
    for capture in sorted(Path(fixtures).glob("*.json")):
        if not capture.stem.startswith(("codex_", "claude_")):
            continue  # a wire LiteLLM is not compared on (bench/translation_compare.py)
        for n, body in enumerate(json.loads(capture.read_text())):
            case = f"{capture.stem}.{n}"
            httpx.post(f"{scripted}/reset")
            try:
                if capture.stem.startswith("codex"):
                    result["responses"][case] = await responses_events(url, key, body)
                else:
                    result["anthropic"][case] = await anthropic_sse(url, key, body)
            except Exception as exc:  # a refusal is a fidelity result, not a crash
                result["errors"][case] = f"{type(exc).__name__}: {str(exc)[:300]}"
            sent = httpx.get(f"{scripted}/requests").json()
            result["sent"][case] = [r["body"] for r in sent]

    async def raw():
        return raw_chunks(url, key, "gpt-test", long_prompt)

    async def responses():
        return await litellm.aresponses(
            model=f"{PROVIDER}/gpt-test", api_base=url, api_key=key, input=long_prompt, stream=True
        )

    async def anthropic():
        return await anthropic_messages.acreate(
            model=f"{PROVIDER}/claude-test",
            api_base=url,
            api_key=key,
            max_tokens=100000,
            stream=True,
            messages=[{"role": "user", "content": long_prompt}],
        )

    # A model may well send the same piece many times in a row (a rule of "=", indentation).
    repeated = "SAY " + "=" * 800
    for name, run in (
        (
            "responses",
            lambda: responses_events(
                url, key, {"model": "gpt-test", "input": repeated, "stream": True}
            ),
        ),
        (
            "anthropic",
            lambda: anthropic_sse(
                url,
                key,
                {
                    "model": "claude-test",
                    "max_tokens": 1000,
                    "stream": True,
                    "messages": [{"role": "user", "content": repeated}],
                },
            ),
        ),
    ):
        try:
            await run()
            result["repeated"][name] = "ok"
        except Exception as exc:
            result["repeated"][name] = f"{type(exc).__name__}: {str(exc)[:160]}"

    rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 3
    for name, make in (("raw", raw), ("responses", responses), ("anthropic", anthropic)):
        await timed(make)  # warm-up
        result["gaps"][name] = [await timed(make) for _ in range(rounds)]
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
