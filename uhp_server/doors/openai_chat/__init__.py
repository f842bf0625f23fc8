"""The Chat Completions front door: every harness as a model, at <server>/openai/v1."""

from uhp_server.doors.openai_chat.app import MOUNT_PATH, make_chat_app

__all__ = ["MOUNT_PATH", "make_chat_app"]
