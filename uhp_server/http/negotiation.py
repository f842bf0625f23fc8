"""Content negotiation on `Accept` (RFC 9110 §12.5.1), for a route that answers a browser and
a program at the same address: the shared view is a page for one and JSON for the other.

A client says what it wants with media ranges and their weights; for each type offered, the
most specific range that matches it gives its weight. The offered type weighted highest
wins, a tie going to the one the server offers first, so a client that states no preference
(no header, `*/*`) gets what the route gave before it could answer anything else.
"""

from __future__ import annotations

import math


def preferred(accept: str | None, offered: tuple[str, ...]) -> str:
    """The one of `offered` (media types, the route's own preference first) to answer with."""
    weights = [weight(accept, media_type) for media_type in offered]
    return offered[weights.index(max(weights))]


def weight(accept: str | None, media_type: str) -> float:
    """How much the client wants `media_type`, from 0 (not at all) to 1."""
    if accept is None or not accept.strip():
        return 1.0  # no preference stated: anything will do
    kind = media_type.split("/", 1)[0]
    ranges = {media_type: 2, f"{kind}/*": 1, "*/*": 0}  # how specific each match is
    best: tuple[int, float] | None = None
    for part in accept.split(","):
        media_range, *parameters = (piece.strip() for piece in part.split(";"))
        specificity = ranges.get(media_range.lower())
        if specificity is not None and (best is None or specificity > best[0]):
            best = (specificity, _quality(parameters))
    return best[1] if best is not None else 0.0


def _quality(parameters: list[str]) -> float:
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "q":
            try:
                quality = float(value)
            except ValueError:
                quality = math.nan
            # A weight that is no number is not something to answer with.
            return min(max(quality, 0.0), 1.0) if math.isfinite(quality) else 0.0
    return 1.0
