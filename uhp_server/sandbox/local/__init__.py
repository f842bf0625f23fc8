"""The local sandbox (UHP_SANDBOX=local): bubblewrap on the server's own machine; see
sandbox.py. Its hardening (hardening.py), a turn's process (process.py) and a turn's socket
folder (sockets.py) are its own; what it shares with the docker sandbox is one folder up.

Also exported: what the document-preview converter (another bubblewrap user) and the tests'
gateway relay reuse."""

from uhp_server.sandbox.local.sandbox import GATEWAY_PORT, SYSTEM_DIRS, LocalSandbox, system_binds

__all__ = ["GATEWAY_PORT", "SYSTEM_DIRS", "LocalSandbox", "system_binds"]
