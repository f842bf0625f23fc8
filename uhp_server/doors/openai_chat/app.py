"""The door as a sub-application mounted at /openai/v1: its own error shape, even for
unknown paths and methods, without touching how /v1 answers."""

from __future__ import annotations

from fastapi import FastAPI

from uhp_server.doors.openai_chat.errors import install_openai_errors
from uhp_server.doors.openai_chat.routes import router
from uhp_server.engine import Engine

MOUNT_PATH = "/openai/v1"


def make_chat_app(engine: Engine) -> FastAPI:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None, redirect_slashes=False)
    app.state.engine = engine  # auth and routes reach the engine from their own app
    install_openai_errors(app)
    app.include_router(router)
    return app
