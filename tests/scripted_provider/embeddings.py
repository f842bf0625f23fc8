"""`POST /v1/embeddings`, OpenAI's shape: deterministic vectors, near for texts that share words.

A hashed bag of words: each word (lower-cased, a trailing plural `s` dropped, words of one or
two letters and a few stop words left out) adds ±1 to one of `DIMENSIONS` buckets chosen by its
hash, and the vector is scaled to length 1. Two texts' cosine similarity is then about the
share of words they have in common, which is all a test of recall by meaning needs: the only
stand-in for a real embedding model.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

DIMENSIONS = 256
# The embedding models it serves (not listed by /v1/models, which lists the chat models).
EMBEDDING_MODELS = ("embed-test",)
STOP_WORDS = frozenset(
    {"the", "and", "for", "are", "was", "were", "what", "which", "who", "does", "did"}
    | {"has", "have", "had", "this", "that", "with", "from"}
)
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    found = []
    for word in _WORD.findall(text.lower()):
        if len(word) > 3 and word.endswith("s"):
            word = word[:-1]
        if len(word) > 2 and word not in STOP_WORDS:
            found.append(word)
    return found


def vector(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    buckets = [0.0] * dimensions
    for word in words(text):
        digest = hashlib.sha256(word.encode()).digest()
        index = int.from_bytes(digest[:4], "big") % dimensions
        buckets[index] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in buckets))
    if norm == 0:  # no word: a fixed vector of its own, so the answer is still a vector
        buckets[0], norm = 1.0, 1.0
    return [v / norm for v in buckets]


def invalid(body: object) -> str | None:
    """Why the body is not an embeddings request, or None."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    texts = body.get("input")
    if isinstance(texts, str):
        return None
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        return "`input` must be a string or a non-empty list of strings"
    dimensions = body.get("dimensions")
    if dimensions is not None and (not isinstance(dimensions, int) or dimensions < 1):
        return "`dimensions` must be a positive integer"
    return None


def render(body: dict[str, Any]) -> dict[str, Any]:
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    dimensions = body.get("dimensions") or DIMENSIONS
    data = [
        {"object": "embedding", "index": i, "embedding": vector(text, dimensions)}
        for i, text in enumerate(texts)
    ]
    tokens = sum(len(text.split()) for text in texts)
    return {
        "object": "list",
        "data": data,
        "model": body["model"],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
