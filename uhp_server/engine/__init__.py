"""The engine: what every door calls (`Engine`, engine/engine.py) and the types they pass.

A door imports from here and nowhere else in the engine.
"""

from uhp_server.engine.engine import Engine, not_retained, response_not_found
from uhp_server.engine.facade.environment_records import (
    Environment,
    EnvironmentBuild,
    EnvironmentDeleted,
    EnvironmentVersion,
    NamingHarness,
)
from uhp_server.engine.facade.files import Download
from uhp_server.engine.facade.records import (
    ApiKeyInfo,
    Artifact,
    Harness,
    HarnessSummary,
    Principal,
    Session,
    Share,
    SignIn,
    Turn,
    TurnFile,
    TurnPage,
    UploadedFile,
    UploadSink,
    UsageDay,
)
from uhp_server.engine.facade.sessions import SessionCancelled
from uhp_server.engine.facade.shares import SharedSession
from uhp_server.engine.reading.fold import TERMINAL_TYPES, Folding
from uhp_server.engine.reading.history import user_text
from uhp_server.engine.replicas.cluster import PARK_ENDING_SECONDS, PARK_HEARD_SECONDS
from uhp_server.engine.requests import (
    INPUT_REQUIRED,
    QUEUED,
    ChatMessage,
    EngineTask,
    IncompleteReason,
    Question,
    QuestionHandler,
    QuestionMode,
    QuestionPolicy,
    SessionKey,
    TaskState,
    TaskStatus,
    ToolAnswer,
    ToolCall,
)
from uhp_server.engine.tasks.intake import Accepted
from uhp_server.engine.tasks.steering import Cancelled
from uhp_server.engine.turns.questions import QUESTION_TOOL, pending_questions
from uhp_server.engine.turns.registry import CANCEL_TURN_WAIT

__all__ = [
    "CANCEL_TURN_WAIT",
    "INPUT_REQUIRED",
    "PARK_ENDING_SECONDS",
    "PARK_HEARD_SECONDS",
    "QUESTION_TOOL",
    "QUEUED",
    "TERMINAL_TYPES",
    "Accepted",
    "ApiKeyInfo",
    "Artifact",
    "Cancelled",
    "ChatMessage",
    "Download",
    "Engine",
    "EngineTask",
    "Environment",
    "EnvironmentBuild",
    "EnvironmentDeleted",
    "EnvironmentVersion",
    "Folding",
    "Harness",
    "HarnessSummary",
    "IncompleteReason",
    "NamingHarness",
    "Principal",
    "Question",
    "QuestionHandler",
    "QuestionMode",
    "QuestionPolicy",
    "Session",
    "SessionCancelled",
    "SessionKey",
    "Share",
    "SharedSession",
    "SignIn",
    "TaskState",
    "TaskStatus",
    "ToolAnswer",
    "ToolCall",
    "Turn",
    "TurnFile",
    "TurnPage",
    "UploadSink",
    "UploadedFile",
    "UsageDay",
    "not_retained",
    "pending_questions",
    "response_not_found",
    "user_text",
]
