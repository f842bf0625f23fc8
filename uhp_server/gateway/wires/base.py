"""What a wire format is to the gateway: the one `Wire` object each format's folder exposes.

A *wire* is the model API a CLI speaks (Codex: Responses, Claude Code: Anthropic Messages,
Hermes: Chat Completions, Gemini CLI: the Gemini API). Some wires are also what a provider
serves, its *API* (`Wire.as_api`); the others reach a provider only translated into one
(`Wire.translations`). The gateway's core (gateway/proxy.py, replies.py, usage.py,
confine.py, providers.py) asks these objects and never compares wire names; the objects are
found through the `uhp_server.wires` entry points (registry.py).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


class CallKind(enum.Enum):
    """What a model call asks, as far as translating it goes."""

    ANSWER = "answer"  # the model answers it: a translation carries it to the provider
    COUNT_TOKENS = "count_tokens"  # no Chat counterpart: a translation's estimate answers it
    UNTRANSLATED = "untranslated"  # only a provider of the same API has it (404 otherwise)


@dataclass(frozen=True)
class ModelCall:
    """One endpoint of a wire that reaches the model."""

    path: re.Pattern[str]  # fullmatched against the path below its backend's API root
    kind: CallKind
    # The body names the model: POST only, and the turn's model is set there even when the
    # body names none. False where the model is named in the path (the Gemini API).
    model_in_body: bool
    streams: bool = False  # the path itself asks for a streamed answer (the body does not)


@dataclass(frozen=True)
class ErrorKinds:
    """The error `type` a wire's clients are given for each of the gateway's own refusals
    (gateway/replies.py says why each is what it is)."""

    unauthorized: str
    not_found: str
    credential_refused: str
    bad_gateway: str
    invalid_request: str  # a body it cannot take: not JSON, too large, refused


@dataclass(frozen=True)
class WireHeaders:
    """The headers particular to a wire, besides those every HTTP client sends."""

    token: tuple[str, ...] = ()  # where its SDK sends the key, when not Authorization: Bearer
    forwarded: tuple[str, ...] = ()  # request headers a provider of it reads (passed through)
    relayed: tuple[str, ...] = ()  # answer headers its clients read (patterns, passed back)


class StreamTranslator(Protocol):
    content_type: str

    def feed(self, chunk: bytes) -> bytes:
        """Upstream SSE bytes in (split anywhere), the CLI's SSE bytes out (maybe none)."""
        ...

    def finish(self) -> bytes:
        """At upstream EOF: the closing events (a failure event if the stream was cut)."""
        ...


class Translation(Protocol):
    """One model call of a CLI's wire, carried over a provider's other API.

    The gateway calls `request()` on the CLI's body (then applies generation settings and the
    pinned model), sends it to `upstream_path`, and turns the answer back with `response()`,
    `stream()` or `error()`; `refusal()` shapes the gateway's own errors, `Untranslatable`
    included. A translation may also answer `count_tokens(body)` (an estimate), for the wires
    whose token counting the provider's API has no counterpart of.
    """

    wire: str
    api: str
    upstream_path: str

    def request(self, body: dict, *, model: str) -> dict:
        """The provider's request body; raises Untranslatable."""
        ...

    def response(self, upstream: dict) -> dict:
        """A non-streamed answer, in the wire's shape."""
        ...

    def stream(self) -> StreamTranslator:
        """A fresh translator for one streamed answer."""
        ...

    def error(self, status: int, upstream_body: bytes) -> bytes:
        """The provider's error body rewritten in the wire's error shape."""
        ...

    def refusal(self, status: int, message: str) -> bytes:
        """The gateway's own error in the wire's error shape."""
        ...


@runtime_checkable
class ProviderApi(Protocol):
    """A wire as a provider serves it: how the gateway calls such a provider."""

    @property
    def other_wires_as(self) -> str:
        """The API a call on another wire reaches such a provider as (translated into it, or
        passed through when the caller speaks it already)."""
        ...

    @property
    def version_headers(self) -> Mapping[str, str]:
        """Headers every call carries unless the caller sent its own (an API version)."""
        ...

    @property
    def models_query(self) -> Mapping[str, str]:
        """The query of the gateway's own listing of the provider's models."""
        ...

    def root(self, base_url: str) -> str:
        """The API root endpoint paths are appended to, from a configured base URL."""
        ...

    def auth_headers(self, key: str) -> dict[str, str]:
        """The headers that carry the server's key."""
        ...

    def usage(self, counters: Mapping[str, int]) -> dict[str, int]:
        """One answer's usage counters (flattened, as usage.py reads them) as UHP's:
        input_tokens (cache reads and writes included), output_tokens, cache_read_tokens,
        cache_write_tokens and, where the provider tells it apart, reasoning_tokens."""
        ...


@runtime_checkable
class Wire(Protocol):
    """A model API a CLI speaks: everything the gateway knows that is particular to it.

    Paths are relative to the API root of the wire's backend: the gateway serves backend `b`
    at /gateway/<b>/v1/<path>.
    """

    @property
    def name(self) -> str:
        """The wire's string wherever one is named: base declarations (`wire`), settings
        (UHP_OPENAI_API), a provider's `api`, the providers file."""
        ...

    @property
    def rank(self) -> int:
        """Where it comes in lists of wires (the providers file's errors name them so)."""
        ...

    @property
    def backend(self) -> str:
        """The gateway backend its CLIs are given: the same string as their bases declare."""
        ...

    @property
    def version_in_base_url(self) -> bool:
        """Whether the base URL its CLIs are given ends in the API version
        (/gateway/<backend>/v1, as OpenAI's SDKs expect) or not (/gateway/<backend>: the
        Anthropic SDK appends /v1/… itself). Wires sharing a backend agree."""
        ...

    @property
    def root(self) -> str:
        """Where its paths begin ("" or, e.g., "v1beta/"): a path below a wire's own root is
        that wire's client speaking, so the gateway answers it in that wire's shapes."""
        ...

    @property
    def endpoints(self) -> re.Pattern[str]:
        """Every path its CLIs may reach (fullmatched): the model calls and the models
        routes. Anything else is 404, so a token never reaches files, batches or what the
        account stored with the server's key."""
        ...

    @property
    def model_calls(self) -> tuple[ModelCall, ...]:
        """Its endpoints that reach the model; the others are its models routes."""
        ...

    @property
    def headers(self) -> WireHeaders:
        """Its SDK's own headers: the gateway takes the turn token from any wire's, and passes
        the others on when a call is not translated (the union of every wire's: one list of
        what may pass, whichever wire a call speaks)."""
        ...

    @property
    def error_kinds(self) -> ErrorKinds: ...

    @property
    def translations(self) -> Mapping[str, Callable[[], Translation]]:
        """The provider APIs its calls can be carried over, each to a factory of one call's
        Translation. A provider serving this wire's own API needs none: bytes pass."""
        ...

    @property
    def as_api(self) -> ProviderApi | None:
        """This wire as a provider's API; None when no provider serves it (its calls always
        reach one translated)."""
        ...

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        """An error in the shape its clients parse (`kind` as its error_kinds name it)."""
        ...

    def models_answer(self, path: str, model: str, owner: str) -> dict[str, Any]:
        """The turn's one model as its models route at `path` lists it (`owner`: the
        provider's name)."""
        ...

    def confine(self, body: dict[str, Any]) -> None:
        """Drop from a model call's body what the provider would run or look up itself: its
        hosted tools and the fields that reach stored or background state (confine.py)."""
        ...

    def stand_in(self, text: str, *, item: bool) -> dict[str, Any]:
        """A text part saying `text`, in its shape; `item`: standing in for a whole input
        item rather than a part (the Responses API's `input` list holds items)."""
        ...
