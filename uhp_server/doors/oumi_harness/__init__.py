"""The Oumi harness protocol (version 1) as a front door: every harness an Oumi "bring your
own harness" endpoint at `<server>/oumi/harnesses/<harness_id>`."""

from uhp_server.doors.door import Door
from uhp_server.doors.oumi_harness.routes import router

door = Door(name="oumi-harness", speaks="the Oumi harness protocol, version 1", routers=(router,))

__all__ = ["door", "router"]
