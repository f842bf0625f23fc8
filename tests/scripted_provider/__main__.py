"""``python -m tests.scripted_provider --host H --port P --api-key KEY --models a,b``."""

from __future__ import annotations

import argparse

import uvicorn

from .app import create_app
from .fixture import bind_loopback


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.scripted_provider")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--models", default="gpt-test,gpt-test-mini,claude-test")
    parser.add_argument(
        "--chat-only", action="store_true", help="only POST /v1/chat/completions, no models route"
    )
    args = parser.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    sock = bind_loopback(args.host, args.port)
    host, port = sock.getsockname()[:2]
    print(f"listening http://{host}:{port}", flush=True)
    config = uvicorn.Config(
        create_app(args.api_key, models, chat_only=args.chat_only),
        log_level="warning",
        lifespan="off",
    )
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
