"""The Chat Completions front door: every harness as a model, at <server>/openai/v1."""

from uhp_server.doors.door import Door, SubApp
from uhp_server.doors.openai_chat.app import MOUNT_PATH, make_chat_app

# A sub-application rather than a router: it answers everything under its path in OpenAI's
# error shape, unknown paths and methods included, without touching how /v1 answers.
door = Door(
    name="openai-chat",
    speaks="OpenAI's Chat Completions, every harness a model",
    sub_apps=(SubApp(MOUNT_PATH, make_chat_app),),
)

__all__ = ["MOUNT_PATH", "door", "make_chat_app"]
