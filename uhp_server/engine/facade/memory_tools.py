"""The memory tools an agent holds during a turn (Memories §9.1): `memory_list`, `memory_get`,
`memory_recall`, `memory_graph`, `memory_run_query`, and where it may write somewhere,
`memory_remember`, `memory_revise`, `memory_forget`. Served to the CLI by the gateway's MCP
server `uhp-memory` (gateway/memory_server.py) with the turn's token.

Every call goes through the Memories facade as the agent's member (never the person who
started the task): the facade checks every step against what was granted to the agent, and
stamps what it writes with it. What comes back from a memory is fenced as untrusted data,
each record with its `written_by` (§13). Erase is a person's act and never a tool (§5.2); no
provider here offers free queries or a type's operations, so `memory_query` and
`memory_operate` are not offered.

`memory_recall`, `memory_graph` and `memory_run_query` are offered where the Memories facade
answers them (its `recall`, `graph` and `run_query`, built beside this part).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from uhp_server.engine.facade.agent_memories import TurnMemory
from uhp_server.engine.facade.memories import Memories
from uhp_server.errors import ApiError
from uhp_server.memories.access import WRITE
from uhp_server.memories.agent import fenced_json, record_json
from uhp_server.memories.content import nul_at
from uhp_server.memories.records import Memory, MemoryRecord

MAX_LIST = 50

_MEMORY_ID = {
    "type": "string",
    "description": "A memory's id (hmem_…). Left out: your default memory.",
}
_RECORD_ID = {"type": "string", "description": "A record's id (hrec_…)."}
# A plain type each property: some CLIs drop a tool whose schema they cannot map (anyOf).
_CONTENT = {
    "type": "string",
    "description": "What the record says, as text.",
}
_REFERENCES = {
    "type": "array",
    "items": {"type": "object"},
    "description": 'Other records this one points at: [{"record_id", "memory_id", "rel"}], '
    "rel one of derived_from, part_of, about, subject, object.",
}
READ_TOOLS: list[dict[str, Any]] = [
    {
        "name": "memory_list",
        "description": "Without memory_id: the memories you were granted, where you start. "
        "With one: that memory, its children, and its records (a page; pass `cursor` for "
        "the next).",
        "inputSchema": {
            "type": "object",
            "properties": {
                "memory_id": {"type": "string", "description": "A memory's id (hmem_…)."},
                "type": {"type": "string", "description": "Only records of this type."},
                "cursor": {"type": "string", "description": "From the last answer's `next`."},
            },
        },
    },
    {
        "name": "memory_get",
        "description": "One record of a memory; with history=true every version of it.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "memory_id": _MEMORY_ID,
                "record_id": _RECORD_ID,
                "history": {"type": "boolean"},
            },
            "required": ["record_id"],
        },
    },
    {
        "name": "memory_recall",
        "description": "Search a memory and every memory below it you may read: `query` by "
        "meaning, `text` by words. Each result names the memory it is in: look there next.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "memory_id": _MEMORY_ID,
                "query": {"type": "string"},
                "text": {"type": "string"},
                "types": {"type": "array", "items": {"type": "string"}},
                "depth": {"type": "integer", "minimum": 0},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50},
            },
        },
    },
    {
        "name": "memory_graph",
        "description": "Records as nodes and their references as edges, around one record "
        "(`around`) or for a whole memory and what is below it.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "memory_id": _MEMORY_ID,
                "around": _RECORD_ID,
                "hops": {"type": "integer", "minimum": 0, "maximum": 3},
                "types": {"type": "array", "items": {"type": "string"}},
                "limit": {"type": "integer", "minimum": 1},
            },
        },
    },
]
READ_TOOLS.append(
    {
        "name": "memory_run_query",
        "description": "Run one of a memory's named queries (memory_list with its memory_id "
        "lists them, each with the params it takes).",
        "inputSchema": {
            "type": "object",
            "properties": {
                "memory_id": _MEMORY_ID,
                "name": {"type": "string", "description": "The query's name."},
                "params": {"type": "object", "description": "As the query's params say."},
            },
            "required": ["name"],
        },
    }
)
WRITE_TOOLS: list[dict[str, Any]] = [
    {
        "name": "memory_remember",
        "description": "Keep something worth remembering beyond this session, as you state "
        "it: a fact, a note, a procedure, an entity.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "memory_id": _MEMORY_ID,
                "type": {
                    "type": "string",
                    "description": "fact (the default), note, procedure, link or entity.",
                },
                "title": {"type": "string", "description": "One line naming it."},
                "content": _CONTENT,
                "attributes": {"type": "object"},
                "references": _REFERENCES,
            },
        },
    },
    {
        "name": "memory_revise",
        "description": "Correct a record: a new version; what you leave out is kept.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "memory_id": _MEMORY_ID,
                "record_id": _RECORD_ID,
                "title": {"type": "string"},
                "content": _CONTENT,
                "attributes": {"type": "object"},
                "references": _REFERENCES,
            },
            "required": ["record_id"],
        },
    },
    {
        "name": "memory_forget",
        "description": "Close a record that is no longer true; its history is kept.",
        "inputSchema": {
            "type": "object",
            "properties": {"memory_id": _MEMORY_ID, "record_id": _RECORD_ID},
            "required": ["record_id"],
        },
    },
]
_STATED = ("type", "title", "content", "attributes", "references", "valid_from", "valid_to")


@dataclass(frozen=True)
class ToolAnswer:
    text: str
    error: bool = False


class MemoryTools:
    def __init__(self, memories: Memories) -> None:
        self.memories = memories

    async def offered(self, turn: TurnMemory) -> list[dict[str, Any]]:
        """The tools this agent is offered now: the write tools only where it holds `write`
        somewhere (§9.1); recall and the graph where this server answers them."""
        given = await self.memories.listing(turn.caller, granted=True)
        tools = [t for t in READ_TOOLS if self._answers(t["name"])]
        if any(WRITE in memory.privileges for memory in given):
            tools.extend(WRITE_TOOLS)
        return tools

    def _answers(self, name: str) -> bool:
        # Recall and the graph are the facade's once their parts of the chapter are built.
        facade_method = {
            "memory_recall": "recall",
            "memory_graph": "graph",
            "memory_run_query": "run_query",
        }.get(name)
        return facade_method is None or hasattr(self.memories, facade_method)

    def _facade(self, method: str) -> Any:
        """A facade method built beside this part (recall, the graph, named queries), looked
        up by name so this module reads the same before and after it lands."""
        return getattr(self.memories, method)

    async def call(self, turn: TurnMemory, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        """One tool call, checked as the agent. A refusal is the tool's answer (an error the
        agent reads), never the turn's failure."""
        offered = {tool["name"] for tool in await self.offered(turn)}
        if name not in offered:
            return ToolAnswer(f"No tool named {name!r} is offered to you.", error=True)
        if (where := nul_at(arguments)) is not None:  # no memory keeps one
            return ToolAnswer(f"invalid arguments: `{where}` holds a NUL character.", error=True)
        try:
            return ToolAnswer(await getattr(self, "_" + name)(turn, arguments))
        except ApiError as refused:
            return ToolAnswer(f"{refused.code}: {refused.message}", error=True)
        except (TypeError, ValueError) as bad:
            return ToolAnswer(f"invalid arguments: {bad}", error=True)

    # -- the tools --------------------------------------------------------------------------
    async def _memory_list(self, turn: TurnMemory, args: dict[str, Any]) -> str:
        caller = turn.caller
        memory_id = _optional_text(args, "memory_id")
        if memory_id is None:
            given = await self.memories.listing(caller, granted=True)
            return fenced_json(
                {"memories": [_memory(m, turn.default_memory_id) for m in given if m.privileges]}
            )
        memory = await self.memories.get(caller, memory_id)
        children = await self.memories.listing(caller, parent=memory_id)
        page = await self.memories.records(
            caller,
            memory_id,
            type=_optional_text(args, "type"),
            limit=MAX_LIST,
            cursor=_optional_text(args, "cursor"),
        )
        listed: dict[str, Any] = {
            "memory": _memory(memory, turn.default_memory_id),
            "children": [_memory(kid, turn.default_memory_id) for kid in children],
            "records": [record_json(record) for record in page.data],
            "next": page.next,
        }
        if self._answers("memory_run_query") and hasattr(self.memories, "queries"):
            queries = await self._facade("queries")(caller, memory_id)
            listed["queries"] = [
                {k: getattr(q, k) for k in ("name", "description", "params", "requires")}
                for q in queries
            ]
        return fenced_json(listed)

    async def _memory_get(self, turn: TurnMemory, args: dict[str, Any]) -> str:
        memory_id = _memory_of(turn, args)
        record_id = _text(args, "record_id")
        if args.get("history") is True:
            versions = await self.memories.history(turn.caller, memory_id, record_id)
            return fenced_json({"history": [record_json(v) for v in versions]})
        record = await self.memories.record(turn.caller, memory_id, record_id)
        return fenced_json(record_json(record))

    async def _memory_recall(self, turn: TurnMemory, args: dict[str, Any]) -> str:
        memory_id = _memory_of(turn, args)
        asked = ("query", "text", "types", "depth", "limit")
        body: dict[str, Any] = {k: args[k] for k in asked if k in args}
        answer = await self._facade("recall")(turn.caller, memory_id, body)
        return fenced_json(_plain(answer))

    async def _memory_graph(self, turn: TurnMemory, args: dict[str, Any]) -> str:
        memory_id = _memory_of(turn, args)
        body: dict[str, Any] = {
            k: args[k] for k in ("around", "hops", "types", "limit") if k in args
        }
        graph = await self._facade("graph")(turn.caller, memory_id, body)
        return fenced_json(_plain(graph))

    async def _memory_run_query(self, turn: TurnMemory, args: dict[str, Any]) -> str:
        memory_id = _memory_of(turn, args)
        body = {"params": args["params"]} if "params" in args else {}
        run_query = self._facade("run_query")
        answer = await run_query(turn.caller, memory_id, _text(args, "name"), body)
        return fenced_json(_plain(answer))

    async def _memory_remember(self, turn: TurnMemory, args: dict[str, Any]) -> str:
        memory_id = _memory_of(turn, args)
        body = {k: args[k] for k in _STATED if k in args}  # never a writer: it is stamped
        record = await self.memories.remember(turn.caller, memory_id, body)
        return fenced_json({"remembered": record_json(record)})

    async def _memory_revise(self, turn: TurnMemory, args: dict[str, Any]) -> str:
        memory_id = _memory_of(turn, args)
        body = {k: args[k] for k in _STATED if k in args and k != "type"}
        record_id = _text(args, "record_id")
        record = await self.memories.revise(turn.caller, memory_id, record_id, body)
        return fenced_json({"revised": record_json(record)})

    async def _memory_forget(self, turn: TurnMemory, args: dict[str, Any]) -> str:
        memory_id = _memory_of(turn, args)
        record = await self.memories.forget(turn.caller, memory_id, _text(args, "record_id"))
        return fenced_json({"forgotten": record_json(record)})


def _memory(memory: Memory, default: str | None) -> dict[str, Any]:
    return {
        "id": memory.id,
        "name": memory.name,
        "description": memory.description,
        "parent_id": memory.parent_id,
        "privileges": memory.privileges,
        "default": memory.id == default,
        "records": memory.records,
        "children": memory.children,
    }


def _memory_of(turn: TurnMemory, args: dict[str, Any]) -> str:
    memory_id = _optional_text(args, "memory_id") or turn.default_memory_id
    if memory_id is None:
        raise ValueError("name a memory_id: you have no default memory")
    return memory_id


def _text(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value:
        raise ValueError(f"`{name}` is required, as text")
    return value


def _optional_text(args: dict[str, Any], name: str) -> str | None:
    return _text(args, name) if args.get(name) is not None else None


def _plain(answer: Any) -> Any:
    """A facade answer (dataclasses, records among them) as JSON the agent reads."""
    if isinstance(answer, MemoryRecord):
        return record_json(answer)
    if is_dataclass(answer) and not isinstance(answer, type):
        return {f.name: _plain(getattr(answer, f.name)) for f in fields(answer)}
    if isinstance(answer, list | tuple):
        return [_plain(item) for item in answer]
    if isinstance(answer, dict):
        return {str(k): _plain(v) for k, v in answer.items()}
    return json.loads(json.dumps(answer, default=str))
