"""A harness as an AgentOS agent: `GET /health` and `POST /invoke`, on when
UHP_AGENTOS_PRINCIPAL names the principal invocations act as."""

from uhp_server.doors.agentos.routes import router
from uhp_server.doors.door import Door

# Served whatever the setting: unset, both routes answer the ordinary 404 (routes.py).
door = Door(name="agentos", speaks="the AgentOS agent contract", routers=(router,))

__all__ = ["door"]
