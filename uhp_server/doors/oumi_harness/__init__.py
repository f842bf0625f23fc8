"""The Oumi harness protocol (version 1) as a front door: every harness an Oumi "bring your
own harness" endpoint at `<server>/oumi/harnesses/<harness_id>`."""

from uhp_server.doors.oumi_harness.routes import router

__all__ = ["router"]
