"""Structured logs: one JSON object per line, with whatever `extra=` fields a call passes, and
no secret the process holds in it, in any form (gateway/scrubbing.py)."""

from __future__ import annotations

import json
import logging
import sys
import time

from uhp_server.gateway.scrubbing import IN_USE

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": round(time.time(), 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return IN_USE.scrubber.scrub_text(json.dumps(entry, default=str))


# Every package of the server that logs: a logger outside them reaches Python's last-resort
# handler, which prints the event alone and drops its fields (a warning's hint among them).
PACKAGES = ("uhp_server", "storage", "harness_bases")


def configure_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    for package in PACKAGES:
        root = logging.getLogger(package)
        root.handlers[:] = [handler]
        root.setLevel(level.upper())
        root.propagate = False
