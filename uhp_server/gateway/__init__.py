"""The model gateway: agents reach models only through it, with a per-turn token."""

from uhp_server.gateway.paths import gateway_path
from uhp_server.gateway.providers import Provider
from uhp_server.gateway.proxy import make_gateway_router
from uhp_server.gateway.tokens import TokenRegistry, TurnGrant, UsageTotals
from uhp_server.gateway.upstreams import Upstreams
from uhp_server.gateway.wires import backends

__all__ = [
    "Provider",
    "TokenRegistry",
    "TurnGrant",
    "Upstreams",
    "UsageTotals",
    "backends",
    "gateway_path",
    "make_gateway_router",
]
