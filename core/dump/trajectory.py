"""The conversation sidecar ``trajectory/{rid}.jsonl`` (``eval_{rid}.jsonl`` for eval steps).

Contract: one JSON object per line (sample_index, group_index, status, reward,
prompt, messages). Reads only complete lines: a half-written last line is left
for later, a malformed complete line is counted and skipped. No file means the
run recorded no conversations (an empty result, not an error).
:func:`tool_call` reads a tool call in either shape a run records (OpenAI's
``{"function": {"name", "arguments"}}`` or a flat ``{"name", "arguments"}``);
:func:`conversation_document` is one conversation as plain JSON values, in the
order and with the parts the sample screen's conversation view shows.
A line whose
fields do not have the spec's types (:func:`miles_tui.core.dump.record_schema.conversation_problems`)
is malformed like one that does not parse.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from miles_tui.core.dump.record_schema import conversation_problems


@dataclass(frozen=True)
class Message:
    """One chat message."""

    role: str
    """system, user, assistant, tool ..."""
    content: str
    """The text (non-string content is rendered as JSON; none recorded, e.g. beside tool calls, is empty)."""
    reasoning_content: str | None
    """The model's reasoning, when recorded."""
    tool_calls: tuple[Mapping[str, Any], ...]
    """Tool calls the message made."""
    name: str | None
    """Tool name for tool messages."""


@dataclass(frozen=True)
class Conversation:
    """One sample's recorded conversation."""

    sample_index: int
    """The sample."""
    group_index: int | None
    """Its group."""
    status: str | None
    """Its status."""
    reward: Any
    """Its reward as recorded."""
    prompt: Any
    """Its prompt as recorded."""
    messages: tuple[Message, ...]
    """The messages, in order."""


@dataclass(frozen=True)
class Sidecar:
    """A step's conversations."""

    path: Path
    """The sidecar file."""
    conversations: Mapping[int, Conversation]
    """By sample index."""
    bad_lines: tuple[int, ...]
    """Byte offsets of complete lines that did not parse."""


@dataclass(frozen=True)
class ToolCall:
    """A tool call as a person reads it: ``name(arguments)``."""

    name: str | None
    """The function called (None: not recorded)."""
    arguments: Any
    """Its arguments as recorded (usually a JSON string)."""


def tool_call(call: Mapping[str, Any]) -> ToolCall:
    """The name and arguments of a recorded tool call (OpenAI style nests them under ``function``)."""
    inner = call.get("function")
    function = inner if isinstance(inner, Mapping) else call
    name = function.get("name")
    return ToolCall(None if name is None else str(name), function.get("arguments"))


def conversation_document(conversation: Conversation) -> dict[str, Any]:
    """One conversation as JSON-ready values: its header figures and each message with its tool calls
    (``name``/``arguments`` read as the conversation view reads them, ``call`` the call as recorded)."""
    messages = []
    for message in conversation.messages:
        calls = []
        for raw in message.tool_calls:
            call = tool_call(raw)
            calls.append({"name": call.name, "arguments": call.arguments, "call": dict(raw)})
        messages.append(
            {
                "role": message.role,
                "name": message.name,
                "content": message.content,
                "reasoning_content": message.reasoning_content,
                "tool_calls": calls,
            }
        )
    return {
        "sample_index": conversation.sample_index,
        "group_index": conversation.group_index,
        "status": conversation.status,
        "reward": conversation.reward,
        "prompt": conversation.prompt,
        "messages": messages,
    }


def sidecar_path(run_dir: Path, rollout_id: int, evaluation: bool) -> Path:
    """Where a step's sidecar lives."""
    return run_dir / "trajectory" / f"{'eval_' if evaluation else ''}{rollout_id}.jsonl"


def _message(raw: Mapping[str, Any]) -> Message:
    content = raw.get("content")
    reasoning = raw.get("reasoning_content")
    calls = raw.get("tool_calls")
    return Message(
        role=str(raw.get("role", "?")),
        content=content if isinstance(content, str) else "" if content is None else json.dumps(content),
        reasoning_content=None if reasoning is None else str(reasoning),
        tool_calls=tuple(c for c in calls if isinstance(c, Mapping)) if isinstance(calls, list) else (),
        name=None if raw.get("name") is None else str(raw.get("name")),
    )


def parse_sidecar(data: bytes, path: Path) -> Sidecar:
    """Parse sidecar bytes (complete lines only)."""
    conversations: dict[int, Conversation] = {}
    bad: list[int] = []
    offset = 0
    end = data.rfind(b"\n") + 1
    for line in data[:end].splitlines(keepends=True):
        here = offset
        offset += len(line)
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            bad.append(here)
            continue
        if conversation_problems(record):
            bad.append(here)
            continue
        messages = record.get("messages") or []
        group = record.get("group_index")
        index = int(record["sample_index"])
        conversations[index] = Conversation(
            sample_index=index,
            group_index=None if group is None else int(group),
            status=record.get("status"),
            reward=record.get("reward"),
            prompt=record.get("prompt"),
            messages=tuple(_message(m) for m in messages if isinstance(m, Mapping)),
        )
    return Sidecar(path, conversations, tuple(bad))


def read_sidecar(run_dir: Path, rollout_id: int, evaluation: bool) -> Sidecar | None:
    """The step's conversations, or None when the run recorded none for it."""
    path = sidecar_path(run_dir, rollout_id, evaluation)
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return None
    return parse_sidecar(data, path)
