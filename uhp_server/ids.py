"""Random, prefixed identifiers: an id says what it points at and cannot be guessed."""

from __future__ import annotations

import secrets
import time

PREFIXES = {
    "harness": "chrn_",
    "response": "resp_",
    "session": "hsess",
    "file": "file_",
    "container": "cntr_",
    "message": "msg_",
    "function_call": "fc_",
    "function_call_output": "fco_",
    "reasoning": "rs_",
    "principal": "prin_",
    "api_key": "key_",
    "environment": "henv_",
    "memory": "hmem_",
    "memory_grant": "hgnt_",
    "memory_record": "hrec_",
    "memory_snapshot": "hsnp_",
}


def new_id(kind: str) -> str:
    """A new id of `kind`: its prefix and 128 random bits in hex."""
    return PREFIXES[kind] + secrets.token_hex(16)


def new_time_ordered_id(kind: str) -> str:
    """A new id of `kind` that sorts after those made in earlier milliseconds: the prefix, the
    time in milliseconds (48 bits) and 80 random bits, in hex. Lists ordered by a
    creation time of one-second resolution order by it within the second (newest first)."""
    millis = time.time_ns() // 1_000_000
    return PREFIXES[kind] + f"{millis:012x}" + secrets.token_hex(10)
