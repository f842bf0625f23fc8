"""The Chat Completions request as this door reads it, and which of its fields it honours.

The agent's model is the harness's, so sampling settings (temperature and friends) cannot
reach it: they are accepted, and named in the `UHP-Ignored-Fields` response header the way
UHP names ignored fields in `metadata.ignored_fields`.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import quote

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    field_validator,
)

from uhp_server.errors import ApiError
from uhp_server.http.strict_json import null_means_default

# Fields this door acts on. `metadata` is kept on the response; everything else a request
# carries (tools, tool_choice, temperature, max_tokens, stop, seed, user, store, ...) is
# accepted and reported as ignored.
HONOURED_FIELDS = frozenset({"model", "messages", "stream", "stream_options", "metadata", "n"})
IGNORED_FIELDS_HEADER = "UHP-Ignored-Fields"
# RFC 9110's token characters besides letters and digits: a field name made only of these is
# sent as it is, any other character percent-encoded (a header value is Latin-1 at most, and a
# CR or LF in one would end it).
_TOKEN_PUNCTUATION = "!#$&'*+-.^_`|~"


# Clients refuse long headers (Node's limit is 16 KiB for all of them; httpx's 100 KiB), and a
# response it cannot read would have its turn run again by a retrying SDK.
MAX_HEADER_LIST = 2048


def header_list(names: list[str]) -> str:
    """Field names as one header value, each readable back with `urllib.parse.unquote`, at
    most MAX_HEADER_LIST characters: past it the rest is counted (`+3 more`, which no encoded
    name can be: its space would be `%20`)."""
    encoded = [quote(name, safe=_TOKEN_PUNCTUATION) for name in names]
    shown: list[str] = []
    for n, name in enumerate(encoded):
        if len(", ".join([*shown, name, f"+{len(encoded)} more"])) > MAX_HEADER_LIST:
            return ", ".join([*shown, f"+{len(encoded) - n} more"])
        shown.append(name)
    return ", ".join(shown)


ROLES = ("system", "developer", "user", "assistant", "tool", "function")


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: StrictBool = False

    _nulls = field_validator("include_usage", mode="before")(null_means_default)


class ChatCompletionBody(BaseModel):
    """POST /openai/v1/chat/completions."""

    model_config = ConfigDict(extra="allow")

    model: StrictStr
    messages: list[dict[str, Any]] = Field(min_length=1)
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    metadata: dict[str, StrictStr] | None = None
    n: StrictInt = Field(default=1, ge=1, le=1)  # one agent turn gives one answer
    # Typed so a malformed value is a clear 400, although their values are not used.
    max_tokens: StrictInt | None = Field(default=None, ge=1)
    max_completion_tokens: StrictInt | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None

    _nulls = field_validator("stream", "n", mode="before")(null_means_default)

    @field_validator("messages")
    @classmethod
    def _messages_shape(cls, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for message in messages:
            if message.get("role") not in ROLES:
                raise ValueError(f"each message needs a role, one of {', '.join(ROLES)}")
            content = message.get("content")
            if content is not None and not isinstance(content, str | list):
                raise ValueError("a message's content must be a string or a list of parts")
        return messages

    def ignored_fields(self) -> list[str]:
        sent = self.model_dump(exclude_unset=True)
        return sorted(name for name in sent if name not in HONOURED_FIELDS)

    @property
    def include_usage(self) -> bool:
        return bool(self.stream and self.stream_options and self.stream_options.include_usage)


Role = Literal["system", "user", "assistant", "tool"]


def message_text(message: dict[str, Any], index: int) -> str:
    """A message's text: a string, or its text parts joined. Other parts are refused, since
    silently dropping an image would answer a question the user did not ask."""
    content = message.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        # An assistant's refusal is what it said (OpenAI sends it back in the history).
        field = {"text": "text", "input_text": "text", "refusal": "refusal"}.get(kind or "")
        if field and (kind != "refusal" or message.get("role") == "assistant"):
            text = part.get(field)
            if isinstance(text, str):
                texts.append(text)
                continue
        raise ApiError(
            400,
            "unsupported_content",
            "Only text content parts are supported by this endpoint.",
            param=f"messages.{index}.content",
        )
    return "\n".join(texts)
