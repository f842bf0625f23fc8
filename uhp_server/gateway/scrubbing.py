"""Find a secret in every form it can take in a body, and redact it.

A provider that echoes the caller's key in an error rarely echoes it byte for byte: JSON
encoders escape characters (`\\u0073`, `\\/`), a URL carries it percent-encoded, a debug dump
carries it in base64 or hex. Whoever reads the body later (the agent CLI, which decodes the
JSON; the event log; a person) gets the key back either way, so each form is redacted here:

- raw, and each character in any of its JSON escapes (`\\uXXXX` with either case of hex, `\\/`,
  `\\"`), behind up to eight backslashes (a JSON string inside a JSON string, four deep) or
  their percent-encoding (`%5C`), any subset of the characters at once;
- percent-encoded, any subset of the characters (either case of hex; `+` for a space), each
  perhaps percent-encoded twice (`%252F`);
- each character as an HTML character reference, any subset of them: decimal (`&#47;`), hex
  in either case (`&#x2F;`), up to four leading zeros, or, for a few punctuation characters,
  its name (`&sol;`);
- base64, standard and URL-safe, at each of the three alignments a secret inside a larger
  blob can take (only the characters that depend on the secret alone are looked for);
- hex of its bytes, either case.

One regular expression per set of secrets, compiled once (`scrubber()` caches it; the
operator's keys are one set, a turn's own secrets others). Every alternative starts with a
literal byte, which lets the regex engine skip, in C, each position no form of any secret can
start at; bench/scrubbing.py measures the cost. A stream is scrubbed with `StreamScrubber`,
which holds back the bytes that could be the start of a secret the next chunk completes.
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


@dataclass(frozen=True)
class Form:
    """One way to write a piece of a secret: `lead` (a character, a percent sign, a run of
    backslashes: it starts with a literal byte) then `body`; at most `width` bytes. Forms
    that share a lead are matched as one alternative, the lead once for all of them (and the
    regex engine skips, in C, every position no lead starts at). `escaped`: for a backslash
    escape, what follows the backslashes."""

    lead: bytes
    body: bytes
    width: int
    escaped: bytes | None = None

    @property
    def regex(self) -> bytes:
        return self.lead + self.body


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
_MORE = _ESCAPE + b"{0,%d}" % (_ESCAPE_DEPTH - 1)  # after the first of them


def _escaped(tail: bytes, tail_width: int) -> list[Form]:
    """`tail` behind one to _ESCAPE_DEPTH backslashes (each perhaps percent-encoded)."""
    width = 3 * _ESCAPE_DEPTH + tail_width
    return [
        Form(rb"\\" + _MORE, tail, width, escaped=tail),  # the run of backslashes, once
        Form(b"%", b"5[Cc]" + _MORE + tail, width, escaped=tail),
    ]


def _char_forms(char: str) -> list[Form]:
    """Every way one character of a secret is written: raw, JSON-escaped, percent-encoded."""
    raw = char.encode()
    forms: list[Form] = [Form(_lit(raw), b"", len(raw))]
    if ord(char) < 0x10000:
        forms += _escaped(b"u" + _hex_class(f"{ord(char):04x}"), 5)
    if char in '/"\\':
        forms += _escaped(_lit(raw), 1)
    # Percent-encoded, or percent-encoded twice (`%2F` written `%252F`).
    percent = b"".join(b"%(?:25)?" + _hex_class(f"{b:02x}") for b in raw)
    forms.append(Form(b"%", percent[1:], 5 * len(raw)))
    if char == " ":
        forms.append(Form(rb"\+", b"", 1))
    forms.append(_html_reference(char))
    return forms


# The named HTML references of characters a key may hold (HTML5's names; the others have
# none, or only names no encoder writes for them).
_HTML_NAMES = {
    "/": "sol",
    "&": "amp",
    "<": "lt",
    ">": "gt",
    '"': "quot",
    "'": "apos",
    "+": "plus",
    "=": "equals",
    "_": "lowbar",
    ".": "period",
    ":": "colon",
}
_HTML_ZEROS = 4  # leading zeros allowed in a numeric reference: `&#x002F;`


def _html_reference(char: str) -> Form:
    """`char` as an HTML character reference: decimal (`&#47;`), hex in either case
    (`&#x2F;`, `&#X2f;`), a few leading zeros, or its name (`&sol;`)."""
    zeros = b"0{0,%d}" % _HTML_ZEROS
    decimal = str(ord(char)).encode()
    hexadecimal = _hex_class(f"{ord(char):x}")
    refs = [b"#" + zeros + decimal, b"#[Xx]" + zeros + hexadecimal]
    if name := _HTML_NAMES.get(char):
        refs.append(name.encode())
    width = 3 + _HTML_ZEROS + max(len(decimal), len(name or "")) + 1
    return Form(b"&", _alternatives(refs) + b";", width)


def _alternatives(regexes: list[bytes]) -> bytes:
    unique = list(dict.fromkeys(regexes))
    return unique[0] if len(unique) == 1 else b"(?:" + b"|".join(unique) + b")"


def _group(forms: list[Form]) -> bytes:
    """A unit after the first, as one group: its backslash escapes as one alternative, since
    only the first unit needs a literal first byte."""
    escapes = [_ESCAPE + b"{1,%d}" % _ESCAPE_DEPTH + f.escaped for f in forms if f.escaped]
    return _alternatives([f.regex for f in forms if f.escaped is None] + escapes)


def _sequence(units: list[list[Form]]) -> list[Form]:
    """Alternatives matching the units one after the other: one per lead of the first unit,
    the others after it, each as a group."""
    tail = b"".join(_group(unit) for unit in units[1:])
    tail_width = sum(max(form.width for form in unit) for unit in units[1:])
    by_lead: dict[bytes, list[Form]] = {}
    for form in units[0]:
        by_lead.setdefault(form.lead, []).append(form)
    return [
        Form(
            lead,
            _alternatives([f.body for f in forms]) + tail,
            max(f.width for f in forms) + tail_width,
        )
        for lead, forms in by_lead.items()
    ]


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
    return [
        [Form(_lit(c.encode()), b"", 1), *(_escaped(b"/", 1) if c == "/" else [])] for c in core
    ]


def _hex_units(data: bytes) -> list[list[Form]]:
    return [[Form(d, b"", 1) for d in _hex_digit(digit)] for digit in data.hex()]


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
    """Redacts sets of secrets, in every form, from bytes or text: one expression per set."""

    patterns: tuple[re.Pattern[bytes], ...]
    longest: int  # the most bytes one match can span
    newline_free: bool  # no match ever spans a line break

    def scrub(self, data: bytes) -> bytes:
        for pattern in self.patterns:
            data = pattern.sub(REDACTED, data)
        return data

    def scrub_text(self, text: str) -> str:
        if not self.patterns or not text:
            return text
        return self.scrub(text.encode("utf-8", "surrogatepass")).decode("utf-8", "surrogatepass")

    def scrub_json(self, value: Any) -> Any:
        """A JSON-like value (dicts, lists, strings) with every string scrubbed, keys too."""
        if not self.patterns:
            return value
        if isinstance(value, str):
            return self.scrub_text(value)
        if isinstance(value, dict):
            return {self.scrub_json(k): self.scrub_json(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.scrub_json(v) for v in value]
        return value

    def __bool__(self) -> bool:
        return bool(self.patterns)


NOTHING = Scrubber((), 0, True)


def scrubber(*sets: Iterable[str | None]) -> Scrubber:
    """The scrubber of these sets of secrets (the empty, short and repeated ones left out).
    Each set is compiled once and cached: give what stays for the process's life (the
    operator's keys) apart from what changes with each turn, so only the latter is compiled
    again (about 20 ms a secret; `prepare` does it off the event loop)."""
    parts = [_compiled(kept) for kept in map(_kept, sets) if kept]
    return Scrubber(
        tuple(p for part in parts for p in part.patterns),
        max((part.longest for part in parts), default=0),
        all(part.newline_free for part in parts),
    )


def prepare(*sets: Iterable[str | None]) -> None:
    """Compile these sets now (in a worker thread, say), so that scrubber() finds them."""
    for kept in map(_kept, sets):
        if kept:
            _compiled(kept)


def _kept(secrets: Iterable[str | None]) -> frozenset[str]:
    return frozenset(s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH)


@functools.lru_cache(maxsize=1024)
def _compiled(secrets: frozenset[str]) -> Scrubber:
    # The longest secrets first: one that holds a shorter one is redacted whole.
    forms = [form for s in sorted(secrets, key=lambda s: (-len(s), s)) for form in _forms(s)]
    by_lead: dict[bytes, list[bytes]] = {}
    for form in forms:
        by_lead.setdefault(form.lead, []).append(form.body)
    pattern = re.compile(
        b"|".join(lead + _alternatives(bodies) for lead, bodies in by_lead.items())
    )
    newline_free = not any("\n" in s or "\r" in s for s in secrets)
    return Scrubber((pattern,), max(form.width for form in forms), newline_free)


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
    life; a turn's model connection comes and goes with its gateway grant (tokens.py). Kept
    in the sets they are given in, which the gateway compiles the same way (one compile)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: Counter[frozenset[str]] = Counter()
        self._scrubber = NOTHING

    def add(self, secrets: Iterable[str | None]) -> None:
        if kept := _kept(secrets):
            with self._lock:
                self._held[kept] += 1
                self._scrubber = scrubber(*self._held)

    def remove(self, secrets: Iterable[str | None]) -> None:
        if kept := _kept(secrets):
            with self._lock:
                self._held[kept] -= 1
                self._held = +self._held  # (drops what is no longer held)
                self._scrubber = scrubber(*self._held)

    @property
    def scrubber(self) -> Scrubber:
        return self._scrubber


IN_USE = SecretsInUse()
