"""The GitHub Copilot CLI base: `copilot --output-format json` (JSON events on stdout) with
its BYOK provider pointed at the gateway, through a launcher that feeds it the prompt and
turns an interrupt into SIGINT."""

from harness_bases.copilot.base import CopilotBase

__all__ = ["CopilotBase"]
