"""Find a secret in every form it can take in a body, and redact it.

A provider that echoes the caller's key in an error rarely echoes it byte for byte: JSON
encoders escape characters (`\\u0073`, `\\/`), a URL carries it percent-encoded, a debug dump
carries it in base64 or hex. Whoever reads the body later (the agent CLI, which decodes the
JSON; the event log; a person) gets the key back either way, so each form is redacted here:

- raw, and each character in any of its JSON escapes (`\\uXXXX` with either case of hex, `\\/`,
  `\\"`), behind up to eight backslashes (a JSON string inside a JSON string, four deep) or
  their percent-encoding (`%5C`), any subset of the characters at once;
- percent-encoded, any subset of the characters (either case of hex; `+` for a space);
- base64, standard and URL-safe, at each of the three alignments a secret inside a larger
  blob can take (only the characters that depend on the secret alone are looked for);
- hex of its bytes, either case.

One regular expression per set of secrets, compiled once (`scrubber()` caches it). Every
alternative starts with a literal byte, which lets the regex engine skip, in C, each position
no form of any secret can start at; bench/gateway.py measures the cost. A stream is scrubbed
with `StreamScrubber`, which holds back the bytes that could be the start of a secret the
next chunk completes.
"""

from __future__ import annotations

import base64
import functools
import re
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

REDACTED = b"[redacted]"
# Shorter values are not looked for: they would redact ordinary words (and a credential that
# short guards nothing anyway).
MIN_SECRET_LENGTH = 8
# Backslashes before an escape: each JSON string around another doubles them (1, 2, 4, 8).
_ESCAPE_DEPTH = 8

# One way to write a piece of a secret: a regex that starts with a literal byte, and the most
# bytes it can match.
Form = tuple[bytes, int]


def _lit(data: bytes) -> bytes:
    return re.escape(data)


def _hex_digit(digit: str) -> list[bytes]:
    """The regexes of one hex digit, either case."""
    return sorted({digit.lower().encode(), digit.upper().encode()})


def _hex_class(digits: str) -> bytes:
    """Hex digits matched in either case: '7f' -> b'7[Ff]'."""
    return b"".join(
        d.encode() if d.isdigit() else b"[" + b"".join(_hex_digit(d)) + b"]" for d in digits
    )


_ESCAPE = rb"(?:\\|%5[Cc])"  # one backslash, or its percent-encoding


def _escaped(tail: bytes, tail_width: int) -> list[Form]:
    """`tail` behind one to _ESCAPE_DEPTH backslashes (each perhaps percent-encoded)."""
    more = _ESCAPE + b"{0,%d}" % (_ESCAPE_DEPTH - 1)
    width = 3 * _ESCAPE_DEPTH + tail_width
    return [(rb"\\" + more + tail, width), (b"%5[Cc]" + more + tail, width)]


def _char_forms(char: str) -> list[Form]:
    """Every way one character of a secret is written: raw, JSON-escaped, percent-encoded."""
    raw = char.encode()
    forms: list[Form] = [(_lit(raw), len(raw))]
    if ord(char) < 0x10000:
        forms += _escaped(b"u" + _hex_class(f"{ord(char):04x}"), 5)
    if char in '/"\\':
        forms += _escaped(_lit(raw), 1)
    forms.append((b"".join(b"%" + _hex_class(f"{b:02x}") for b in raw), 3 * len(raw)))
    if char == " ":
        forms.append((rb"\+", 1))
    return forms


def _group(forms: list[Form]) -> Form:
    return b"(?:" + b"|".join(regex for regex, _ in forms) + b")", max(w for _, w in forms)


def _sequence(units: list[list[Form]]) -> list[Form]:
    """Alternatives matching the units one after the other, each starting with a literal byte
    (the first unit's forms, spelled out one per alternative)."""
    rest = [_group(unit) for unit in units[1:]]
    tail = b"".join(regex for regex, _ in rest)
    tail_width = sum(width for _, width in rest)
    return [(regex + tail, width + tail_width) for regex, width in units[0]]


def _base64_cores(data: bytes) -> set[str]:
    """The base64 characters that depend on `data` alone, wherever it starts in a blob: at
    each of the three alignments, standard and URL-safe."""
    cores = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode()
        first = -(-8 * offset // 6)  # the first character holding none of the padding's bits
        last = 8 * (offset + len(data)) // 6  # past the last one holding only data bits
        core = encoded[first:last]
        cores |= {core, core.replace("+", "-").replace("/", "_")}
    return cores


def _base64_units(core: str) -> list[list[Form]]:
    """Each base64 character literally, `/` also JSON-escaped as `\\/`."""
    return [[(_lit(c.encode()), 1), *(_escaped(b"/", 1) if c == "/" else [])] for c in core]


def _hex_units(data: bytes) -> list[list[Form]]:
    return [[(d, 1) for d in _hex_digit(digit)] for digit in data.hex()]


def _forms(secret: str) -> list[Form]:
    """The alternatives matching `secret` in each of its forms."""
    data = secret.encode()
    forms = _sequence([_char_forms(c) for c in secret])
    for core in sorted(_base64_cores(data)):
        forms += _sequence(_base64_units(core))
    forms += _sequence(_hex_units(data))
    return forms


@dataclass(frozen=True)
class Scrubber:
    """Redacts a set of secrets, in every form, from bytes or text."""

    pattern: re.Pattern[bytes] | None
    longest: int  # the most bytes one match can span
    newline_free: bool  # no match ever spans a line break

    def scrub(self, data: bytes) -> bytes:
        if self.pattern is None or not data:
            return data
        return self.pattern.sub(REDACTED, data)

    def scrub_text(self, text: str) -> str:
        if self.pattern is None or not text:
            return text
        return self.scrub(text.encode("utf-8", "surrogatepass")).decode("utf-8", "surrogatepass")

    def scrub_json(self, value: Any) -> Any:
        """A JSON-like value (dicts, lists, strings) with every string scrubbed, keys too."""
        if self.pattern is None:
            return value
        if isinstance(value, str):
            return self.scrub_text(value)
        if isinstance(value, dict):
            return {self.scrub_json(k): self.scrub_json(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.scrub_json(v) for v in value]
        return value

    def __bool__(self) -> bool:
        return self.pattern is not None


NOTHING = Scrubber(None, 0, True)


def scrubber(secrets: Iterable[str | None]) -> Scrubber:
    """The scrubber of these secrets (the empty, short and repeated ones are left out)."""
    kept = frozenset(s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH)
    return _compiled(kept) if kept else NOTHING


@functools.lru_cache(maxsize=256)
def _compiled(secrets: frozenset[str]) -> Scrubber:
    # The longest secrets first: one that holds a shorter one is redacted whole.
    forms = [form for s in sorted(secrets, key=lambda s: (-len(s), s)) for form in _forms(s)]
    pattern = re.compile(b"|".join(regex for regex, _ in forms))
    newline_free = not any("\n" in s or "\r" in s for s in secrets)
    return Scrubber(pattern, max(width for _, width in forms), newline_free)


class StreamScrubber:
    """Scrubs a body that arrives in chunks: a secret may be cut between two of them, so the
    bytes that could begin one are held back until the next chunk (or the end) says.

    No form of a secret spans a line break, so what precedes the last one is never held: a
    server-sent event stream, cut at event boundaries, passes without delay."""

    def __init__(self, scrubber: Scrubber) -> None:
        self._scrubber = scrubber
        self._held = b""

    def feed(self, chunk: bytes) -> bytes:
        if not self._scrubber:
            return chunk
        data = self._scrubber.scrub(self._held + chunk)
        keep = max(0, len(data) - (self._scrubber.longest - 1))
        if self._scrubber.newline_free:
            keep = max(keep, data.rfind(b"\n") + 1)
        self._held = data[keep:]
        return data[:keep]

    def finish(self) -> bytes:
        held, self._held = self._held, b""
        return held


class SecretsInUse:
    """The secrets this process holds now, for what cannot be handed them one by one: the
    log (ops/logs.py scrubs each line). The operator's provider keys stay for the process's
    life; a turn's model connection comes and goes with its gateway grant (tokens.py)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: Counter[str] = Counter()
        self._scrubber = NOTHING

    def add(self, secrets: Iterable[str | None]) -> None:
        with self._lock:
            self._held.update(s for s in secrets if s)
            self._scrubber = scrubber(self._held)

    def remove(self, secrets: Iterable[str | None]) -> None:
        with self._lock:
            self._held.subtract(s for s in secrets if s)
            self._held = +self._held  # (drops what is no longer held)
            self._scrubber = scrubber(self._held)

    @property
    def scrubber(self) -> Scrubber:
        return self._scrubber


IN_USE = SecretsInUse()
