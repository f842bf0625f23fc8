"""The docker sandbox backend (UHP_SANDBOX=docker): see sandbox.py."""

from uhp_server.sandbox.docker.sandbox import DockerSandbox

__all__ = ["DockerSandbox"]
