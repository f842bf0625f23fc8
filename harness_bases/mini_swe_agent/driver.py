"""Runs one turn of mini-swe-agent through its Python API and reports it as JSON lines.

This file is copied next to mini-swe-agent's virtual environment at install time and run with
that environment's Python inside the sandbox; it imports nothing from UHP Server. The agent
loop is mini-swe-agent's own `DefaultAgent` (its step, its bash tool, its observation
template); what this driver adds is what a server needs from it and its own CLI (`mini`)
does not give:

1. Events as they happen. The model call is streamed, and every text and reasoning delta,
   each bash command and its output, the usage and the outcome go to stdout as one JSON
   object a line (`emit`). The model is mini-swe-agent's `Model` protocol implemented over
   the OpenAI SDK (`GatewayModel`), making the request its `LitellmModel` makes.
2. A conversation that continues. The messages are kept in `<sessions>/<id>.json` after
   every step; a turn naming an earlier id continues it, with this turn's system prompt.
3. A chat answer ends the turn. mini-swe-agent counts a reply without a bash call as a
   format error; here it is the agent's answer, as for every other agent. Its own way to
   finish (`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`) still works.
4. A clean stop. `{"type": "interrupt"}` on stdin stops the model call or the command that
   runs (its whole process group) and ends the turn with `interrupted`.
5. Secrets. The turn's credentials (every `UHP_*` variable) never reach a command.

stdin: the prompt as the first JSON line (`{"prompt": …}`), then control lines. The turn's
settings are in the JSON file named by `UHP_MINI_TURN` (written by the base's config.py).
`--version` prints the mini-swe-agent version once its agent and model import.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

SECRET_PREFIX = "UHP_"
TURN_ENV = "UHP_MINI_TURN"
# What the model reads of a command: its output as it is, then why it failed, if it did.
# What the model is told of a malformed bash call (mini-swe-agent's own words, shorter).
FORMAT_ERROR = (
    'Tool call error: {{ error }}\nCall the `bash` tool with {"command": "..."}, or reply '
    "without a tool call when the task is done."
)
OBSERVATION = (
    "{{ output.output }}"
    "{% if output.returncode != 0 %}\n[exit code {{ output.returncode }}]{% endif %}"
    "{% if output.exception_info %}\n[{{ output.exception_info }}]{% endif %}"
)
MAX_FORMAT_ERRORS = 3  # mini-swe-agent's own default: malformed calls in a row end the turn
_out_lock = threading.Lock()


def emit(event_type: str, **fields: Any) -> None:
    """One event on stdout, flushed at once."""
    line = json.dumps({"type": event_type, **fields}, ensure_ascii=False)
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Control:
    """What arrives on stdin after the prompt: an interrupt."""

    def __init__(self) -> None:
        self.interrupted = threading.Event()

    def listen(self, stream: Any) -> None:
        for line in stream:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("type") == "interrupt":
                self.interrupted.set()


def _command_env() -> dict[str, str]:
    """The environment a command runs with: the driver's own, without the turn's secrets."""
    return {k: v for k, v in os.environ.items() if not k.startswith(SECRET_PREFIX)}


def build(turn: dict[str, Any], control: Control) -> tuple[Any, Any, Any]:
    """mini-swe-agent's agent, model and environment, extended as the module docstring says."""
    import openai
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.exceptions import InterruptAgentFlow, Submitted
    from minisweagent.models.utils.actions_toolcall import (
        BASH_TOOL,
        format_toolcall_observation_messages,
        parse_toolcall_actions,
    )
    from minisweagent.models.utils.retry import retry

    class Interrupted(InterruptAgentFlow):
        """The client asked the turn to stop."""

    def stop_message() -> Interrupted:
        extra = {"exit_status": "Interrupted", "submission": ""}
        return Interrupted({"role": "exit", "content": "Interrupted", "extra": extra})

    class GatewayModel:
        """mini-swe-agent's Model protocol over the gateway's Chat Completions, streamed.

        The same request its LitellmModel makes (the bash tool, the messages without their
        `extra`), through the OpenAI SDK, which imports in a sixth of litellm's time: a
        turn's start is dominated by imports."""

        # A refused request is refused again: only rate limits, 5xx and lost connections
        # are retried (mini-swe-agent's own retry: at most 3 attempts).
        abort_exceptions: list[type[BaseException]] = [
            openai.BadRequestError,
            openai.AuthenticationError,
            openai.PermissionDeniedError,
            openai.NotFoundError,
            openai.ConflictError,
            openai.UnprocessableEntityError,
            Interrupted,
        ]

        def __init__(self) -> None:
            self.config = SimpleNamespace(model_name=turn["model"])
            self.client = openai.OpenAI(
                base_url=turn["api_base"],
                api_key=os.environ.get(turn["token_env"], "") or "none",
                max_retries=0,
            )
            self.usage = [0, 0, 0]  # input, output, cached: the whole turn's
            self.responses = 0

        def _request(self, messages: list[dict]) -> dict[str, Any]:
            request: dict[str, Any] = {
                "model": turn["model"],
                "messages": [{k: v for k, v in m.items() if k != "extra"} for m in messages],
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            if turn.get("bash", True):
                request["tools"] = [BASH_TOOL]
            if turn.get("max_output_tokens"):
                request["max_tokens"] = int(turn["max_output_tokens"])
            return request

        def query(self, messages: list[dict], **kwargs: Any) -> dict:
            request = self._request(messages)
            for attempt in retry(logger=_quiet(), abort_exceptions=self.abort_exceptions):
                with attempt:
                    if control.interrupted.is_set():
                        raise stop_message()
                    stream = self.client.chat.completions.create(**request)
            self.responses += 1
            message = self._read(stream, f"r{self.responses}")
            tool_calls = [
                SimpleNamespace(id=c["id"], function=SimpleNamespace(**c["function"]))
                for c in message.get("tool_calls") or []
            ]
            actions = (
                parse_toolcall_actions(tool_calls, format_error_template=FORMAT_ERROR)
                if tool_calls
                else []
            )
            message["extra"] = {"actions": actions, "cost": 0.0, "timestamp": time.time()}
            return message

        def _read(self, stream: Any, item: str) -> dict:
            """Stream one response to stdout; returns the assistant message it makes."""
            text, reasoning, thought = "", "", False
            calls: dict[int, dict[str, Any]] = {}
            try:
                for chunk in stream:
                    if control.interrupted.is_set():
                        raise stop_message()
                    _count(chunk, self.usage)
                    if not chunk.choices:
                        continue
                    delta = chunk.choices[0].delta
                    piece = getattr(delta, "reasoning_content", None)
                    if piece and not thought:
                        reasoning += piece
                        emit("reasoning_delta", item=f"{item}-think", delta=piece)
                    if delta.content:
                        if reasoning and not thought:  # the thinking ends where the text begins
                            thought = True
                            emit("reasoning_done", item=f"{item}-think", text=reasoning)
                        text += delta.content
                        emit("text_delta", item=item, delta=delta.content)
                    for call in delta.tool_calls or []:
                        _merge_call(calls, call)
            finally:
                stream.close()
            if reasoning and not thought:
                emit("reasoning_done", item=f"{item}-think", text=reasoning)
            if text:
                emit("text_done", item=item, text=text)
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                message["tool_calls"] = [calls[i] for i in sorted(calls)]
            return message

        def format_message(self, **kwargs: Any) -> dict:
            return dict(kwargs)

        def format_observation_messages(
            self, message: dict, outputs: list[dict], template_vars: dict | None = None
        ) -> list[dict]:
            return format_toolcall_observation_messages(
                actions=message.get("extra", {}).get("actions", []),
                outputs=outputs,
                observation_template=OBSERVATION,
                template_vars=template_vars,
            )

        def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
            return {"model_name": turn["model"]}

        def serialize(self) -> dict:
            return {"info": {"config": {"model": {"model_name": turn["model"]}}}}

    class Shell(LocalEnvironment):
        """LocalEnvironment without the turn's secrets, its commands reported and stoppable."""

        def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict:
            call = action.get("tool_call_id") or f"c{uuid.uuid4().hex[:12]}"
            command = action.get("command", "")
            emit("tool_start", call=call, name="bash", arguments=json.dumps({"command": command}))
            output = self._run(command, cwd or self.config.cwd or os.getcwd(), timeout)
            ok = output["returncode"] == 0 and not output.get("exception_info")
            emit("tool_end", call=call, output=output["output"], ok=ok)
            if control.interrupted.is_set():
                raise stop_message()
            self._check_finished(output)
            return output

        def _run(self, command: str, cwd: str, timeout: int | None) -> dict:
            limit = timeout or self.config.timeout
            proc = subprocess.Popen(
                command,
                shell=True,
                cwd=cwd,
                env=_command_env() | self.config.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                encoding="utf-8",
                errors="replace",
                start_new_session=True,
            )
            chunks: list[str] = []
            stdout = proc.stdout
            assert stdout is not None  # stdout=PIPE
            reader = threading.Thread(target=lambda: chunks.append(stdout.read()))
            reader.start()
            deadline = time.monotonic() + limit
            why = ""
            while proc.poll() is None:
                if control.interrupted.is_set():
                    why = "the command was stopped: the turn was interrupted"
                elif time.monotonic() > deadline:
                    why = f"the command timed out after {limit} seconds"
                if why:
                    _kill_group(proc)
                    break
                time.sleep(0.05)
            proc.wait()
            reader.join()
            return {
                "output": "".join(chunks),
                "returncode": proc.returncode if not why else -1,
                "exception_info": why,
            }

    class Agent(DefaultAgent):
        """DefaultAgent over a kept conversation: a reply without a command ends the turn."""

        def execute_actions(self, message: dict) -> list[dict]:
            if not message.get("extra", {}).get("actions"):
                answer = message.get("content") or ""
                extra = {"exit_status": "Answered", "submission": answer}
                raise Submitted({"role": "exit", "content": answer, "extra": extra})
            return super().execute_actions(message)

        def query(self, messages: Any = None) -> dict:
            if control.interrupted.is_set():
                raise stop_message()
            return super().query()

    return Agent, GatewayModel, Shell


def _quiet() -> Any:
    import logging

    logger = logging.getLogger("uhp_mini")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


def _chain(first: list[Any], rest: Any) -> Any:
    yield from first
    yield from rest


def _count(chunk: Any, usage: list[int]) -> None:
    found = getattr(chunk, "usage", None)
    if not found:
        return
    usage[0] += int(getattr(found, "prompt_tokens", 0) or 0)
    usage[1] += int(getattr(found, "completion_tokens", 0) or 0)
    details = getattr(found, "prompt_tokens_details", None)
    usage[2] += int(getattr(details, "cached_tokens", 0) or 0) if details else 0


def _merge_call(calls: dict[int, dict[str, Any]], delta: Any) -> None:
    index = int(getattr(delta, "index", 0) or 0)
    call = calls.setdefault(
        index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
    )
    if getattr(delta, "id", None):
        call["id"] = delta.id
    function = getattr(delta, "function", None)
    if function is not None:
        call["function"]["name"] += getattr(function, "name", None) or ""
        call["function"]["arguments"] += getattr(function, "arguments", None) or ""


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()


def _session_file(turn: dict[str, Any], session_id: str) -> Path:
    return Path(turn["sessions_dir"]) / f"{session_id}.json"


def _history(turn: dict[str, Any]) -> tuple[str, list[dict]]:
    """The session's id and its earlier messages (none for a new or lost conversation)."""
    wanted = turn.get("session_id")
    if wanted:
        path = _session_file(turn, wanted)
        try:
            return wanted, json.loads(path.read_text("utf-8"))["messages"]
        except (OSError, ValueError, KeyError, TypeError):
            emit("resume_failed")
    return uuid.uuid4().hex, []


def _user_message(prompt: str, images: list[dict[str, str]]) -> dict[str, Any]:
    if not images:
        return {"role": "user", "content": prompt}
    import base64

    parts: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
    for image in images:
        data = base64.b64encode(Path(image["path"]).read_bytes()).decode("ascii")
        url = f"data:{image['media_type']};base64,{data}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return {"role": "user", "content": parts}


def _provider_error(exc: Exception) -> str:
    """The provider's own words from a failed call: its error body's message when it has
    one (the SDK's own text starts "Error code: 400 - {…}")."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        found = body.get("error", body)
        message = found.get("message") if isinstance(found, dict) else found
        if isinstance(message, str) and message.strip():
            return message.strip()
    return str(getattr(exc, "message", "") or exc).strip()


def run_turn(turn: dict[str, Any], prompt: str, control: Control) -> None:
    from minisweagent.exceptions import InterruptAgentFlow

    agent_class, model_class, shell_class = build(turn, control)
    model = model_class()
    env = shell_class(
        cwd=turn["cwd"], env=turn.get("command_env") or {}, timeout=turn["command_timeout"]
    )
    agent = agent_class(
        model,
        env,
        system_template="{{ uhp_system }}",
        instance_template="{{ task }}",
        step_limit=0,
        cost_limit=0,
    )
    agent.extra_template_vars = {"uhp_system": turn["system_prompt"]}
    session_id, history = _history(turn)
    emit("session", id=session_id)
    system = {"role": "system", "content": turn["system_prompt"]}
    agent.messages = [system, *[m for m in history if m.get("role") != "system"]]
    agent.add_messages(_user_message(prompt, turn.get("images") or []))
    path = _session_file(turn, session_id)
    status, error, source = "completed", "", ""
    format_errors = 0
    while True:
        try:
            agent.step()
            format_errors = 0
        except InterruptAgentFlow as flow:
            exits = [m for m in flow.messages if m.get("role") == "exit"]
            agent.add_messages(*[m for m in flow.messages if m.get("role") != "exit"])
            if exits:
                if exits[0].get("extra", {}).get("exit_status") == "Interrupted":
                    status = "interrupted"
                break
            format_errors += 1  # a malformed bash call: mini-swe-agent told the model why
            if format_errors >= MAX_FORMAT_ERRORS:
                status, error, source = "failed", "the model kept calling its tool wrongly", "agent"
                break
        except Exception as exc:
            status, error = "failed", _provider_error(exc)
            source = "provider" if _from_model(exc) else "agent"
            break
        finally:
            _save(path, agent.messages)
    _save(path, agent.messages)
    usage = model.usage
    if any(usage):
        emit("usage", input=usage[0], output=usage[1], cached=usage[2])
    emit("end", status=status, error=error, source=source)


def _from_model(exc: Exception) -> bool:
    module = type(exc).__module__ or ""
    return module.startswith(("openai", "httpx"))


def _save(path: Path, messages: list[dict]) -> None:
    """The conversation as the next turn reads it (written whole, then moved into place)."""
    kept = [{k: v for k, v in m.items() if k != "extra"} for m in messages]
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({"messages": kept}, ensure_ascii=False), "utf-8")
    os.replace(temporary, path)


def main() -> int:
    if sys.argv[1:] == ["--version"]:
        from minisweagent import __version__
        from minisweagent.agents.default import DefaultAgent  # noqa: F401
        from minisweagent.environments.local import LocalEnvironment  # noqa: F401
        from openai import OpenAI  # noqa: F401

        print(__version__)
        return 0
    turn = json.loads(Path(os.environ[TURN_ENV]).read_text("utf-8"))
    first = sys.stdin.readline()
    try:
        prompt = str(json.loads(first)["prompt"])
    except (ValueError, KeyError, TypeError):
        emit("end", status="failed", error="no prompt was given", source="agent")
        return 0
    control = Control()
    threading.Thread(target=control.listen, args=(sys.stdin,), daemon=True).start()
    try:
        run_turn(turn, prompt, control)
    except Exception as exc:  # the driver's own failure: reported, never a traceback only
        emit("end", status="failed", error=f"{type(exc).__name__}: {exc}", source="agent")
    sys.stdout.flush()
    os._exit(0)  # the stdin thread and the interpreter's teardown would only slow the exit


if __name__ == "__main__":
    sys.exit(main())
