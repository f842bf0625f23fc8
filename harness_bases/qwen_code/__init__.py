"""The Qwen Code base: `qwen --acp` on the shared ACP driver, on a pinned node."""

from harness_bases.qwen_code.base import QwenCodeBase

__all__ = ["QwenCodeBase"]
