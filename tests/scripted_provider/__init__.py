"""A deterministic, scripted model provider for tests (no network, no real model).

It speaks OpenAI Responses (``/v1/responses``), OpenAI Chat Completions
(``/v1/chat/completions``) and Anthropic Messages (``/v1/messages``), streamed and not,
well enough for the real agent CLIs; and OpenAI Embeddings (``/v1/embeddings``, model
``embed-test``: hashed bags of words, so texts sharing words are near; embeddings.py).
What it answers is scripted by directive lines in the last user message that has any (a
directive line starts, after optional whitespace, with one of the keywords below). The step
is the number of tool results after that message (a PARALLEL step takes one per call).

- ``SAY <text>``: the final answer; ``{output}`` is the last tool result's output,
  ``{outputs}`` every tool result's output since the directives, joined by `` | ``,
  ``{result}`` the last output as an MCP tool's answer (out of its ``{"result": …}``).
- ``THINK <text>``: a reasoning summary / thinking block before every response's content.
- ``RUN <command>``: one step calling the client's shell tool with ``command``.
- ``TOOL <name> <json>``: one step calling tool ``name`` with those arguments (a tool the
  CLI names with its own prefix for an MCP server, e.g. ``mcp__server__name``, matches too).
- ``PARALLEL RUN <command>`` / ``PARALLEL TOOL <name> <json>``: consecutive PARALLEL lines
  are one step whose reply carries all their calls at once (Responses: one output item each,
  argument deltas interleaved; Chat: a ``tool_calls`` array streamed interleaved by index;
  Anthropic: consecutive ``tool_use`` blocks). The step takes one result per call.
- ``IMAGES``: the final answer reports the request's image parts (``images 1: image/png 68B
  sha256:<12 hex>``); ``{images}`` puts the same report into a SAY.
- ``LOOP``: every response calls the shell tool with ``echo step <n>`` (n = step + 1).
- ``SLOW <seconds>``: spread the final answer's deltas over that many seconds.
- ``SLEEP <seconds>``: wait that long before sending response headers.
- ``TIMEOUT <seconds>``: each RUN asks the shell tool to wait that long for the command, in every
  timeout property its schema offers and Codex's ``yield_time_ms`` (at most 30 s): past Codex's
  default 10 s a command goes on unseen and its output never reaches the model.
- ``FAIL <status> [message]``: answer with that HTTP status and an error body. In the message,
  ``{key}`` is the provider's key as it is, ``{key:escaped}`` with every other character a JSON
  ``\\uXXXX`` escape, ``{key:url}`` percent-encoded, ``{key:base64}`` a base64 ``Bearer <key>``:
  a careless provider echoing the caller's credential.
- ``REMEMBER <word>``: final text defaults to ``noted <word>``.
- ``RECALL``: ``you said <word>`` from an earlier user message's ``REMEMBER``.
- ``PICK <name>``: the final answer is the value the last tool result gives for ``<name>``
  (``<name> is <value>``, ``<name>: <value>``, ``<name> = <value>``).

A user message without directive lines may instead be plain English in one of the forms a
conformance suite sends ("Reply with exactly: ok", "Run this shell command and reply with its
output only: …"): ``plain.py`` turns it into the directives a model would act out.

No directive at all (or a directive-free user message after a finished turn): ``ok``.
With directives but no SAY: ``done``. No shell tool for a RUN step: ``no shell tool``.

Usage::

    provider = start_provider("sk-test", ["gpt-test"])
    provider.url          # http://127.0.0.1:PORT   (OpenAI base URL: provider.base_url)
    provider.requests()   # recorded requests
    provider.require_headers({...})  # with required_headers=: change them (a new run token)
    provider.reset(); provider.stop()

or ``python -m tests.scripted_provider --port 0 --api-key KEY --models a,b``.
"""

from .app import create_app
from .fixture import RunningProvider, start_provider
from .script import Reply, parse_directives, plan

__all__ = [
    "Reply",
    "RunningProvider",
    "create_app",
    "parse_directives",
    "plan",
    "start_provider",
]
