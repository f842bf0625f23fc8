"""What a door's routes are given: the engine (their one way in), the settings, and the places
for long-lived streams (http/streams.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from uhp_server.engine import Engine
from uhp_server.http.streams import SCOPE_KEY, StreamLimits
from uhp_server.settings import Settings


def get_engine(request: Request) -> Engine:
    return request.app.state.engine


def get_settings(request: Request) -> Settings:
    return request.app.state.engine.settings


def get_streams(request: Request) -> StreamLimits:
    return request.scope[SCOPE_KEY]


EngineDep = Annotated[Engine, Depends(get_engine)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
StreamsDep = Annotated[StreamLimits, Depends(get_streams)]
