"""A harness as a tool: the Oumi tool endpoint over HTTP (`POST /oumi/tools/<harness_id>`)
and over MCP (`POST /mcp`), both answering with the harness result object."""

from uhp_server.doors.door import Door
from uhp_server.doors.oumi_tools import http, mcp

door = Door(
    name="oumi-tools",
    speaks="a harness as an Oumi tool, over HTTP and over MCP",
    routers=(http.router, mcp.router),
)

__all__ = ["door"]
