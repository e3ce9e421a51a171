"""The conversation sidecar ``trajectory/{rid}.jsonl`` (``eval_{rid}.jsonl`` for eval steps).

Contract: one JSON object per line (sample_index, group_index, status, reward,
prompt, messages). Reads only complete lines, with the tail reader's rules
(:mod:`miles_tui.core.base.tail`): a half-written last line is left for later; a malformed
complete line (bad JSON, too long, nested deeper than ``MAX_JSON_DEPTH``, an
integer no float can hold) is counted and skipped. No file means the run
recorded no conversations (None); a file that cannot be read (a FIFO, a link
loop, over ``TRAJECTORY_MAX_BYTES``) is an empty sidecar whose ``problem`` says why.
A line whose fields do not have the spec's types (``record_schema.conversation_problems``)
is malformed like one that does not parse; so is a ``sample_index`` beyond 64 bits (CPython's int hash is
not randomised: k·(2**61−1) all hash alike, so unbounded keys would make the sidecar's dict quadratic).

Memory is budgeted as the unpickler's is (:func:`line_cost`): before a line is parsed, what parsing and
keeping it will allocate is charged (its bytes, and :data:`CONTAINER_COST` per JSON object or array, counted
outside strings), and a line that costs more than :data:`LINE_FACTOR` × its size + :data:`LINE_SLACK` (a
line of 200,000 empty messages), or that would take the sidecar past :data:`LINE_FACTOR` × the file's size
+ :data:`SIDECAR_SLACK`, is malformed, never parsed. :func:`tool_call` reads a tool call in either shape
a run records (OpenAI's ``{"function": {"name", "arguments"}}`` or a flat ``{"name", "arguments"}``);
:func:`conversation_document` is one conversation as plain JSON values, in the order and with the
parts the sample screen's conversation view shows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from miles_tui.core.base.errors import UnreadableFileError
from miles_tui.core.base.run_files import MAX_JSON_DEPTH, checked_int, os_error_message, stat_regular, too_deep
from miles_tui.core.base.tail import MalformedLineError, TailFile
from miles_tui.core.dump.record_schema import conversation_problems

TRAJECTORY_MAX_BYTES: Final = 1 << 30
"""A step's sidecar holds every sample's conversation; one larger than this is refused, not read."""
CONTAINER_COST: Final = 120
"""Bytes charged per JSON object or array of a line: an empty message costs 72 parsed and 120 kept."""
LINE_FACTOR: Final = 8
"""Bytes of memory a line (and the sidecar) may cost per byte of it, as the unpickler allows."""
LINE_SLACK: Final = 2048
"""Bytes every line may cost beyond its factor (a short line of a few messages)."""
SIDECAR_SLACK: Final = 32 << 20
"""Bytes the whole sidecar may cost beyond its factor."""
_EXCERPT: Final = 160
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
"""A JSON string literal (unrolled: linear time on any line)."""


def line_cost(line: bytes) -> int:
    """What parsing and keeping a sidecar line allocates, at most: its bytes and each container outside strings."""
    bare = _STRING.sub(b"", line)
    return len(line) + CONTAINER_COST * (bare.count(b"{") + bare.count(b"["))


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
    problem: str | None = None
    """Why the file could not be read at all (not a regular file, over the cap), naming it; None when read."""


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


def decode_conversation(record: Any) -> Conversation:
    """One parsed sidecar line -> its Conversation; ValueError/KeyError/TypeError for a malformed one."""
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, got {type(record).__name__}")
    if too_deep(record):
        raise ValueError(f"nested more than {MAX_JSON_DEPTH} levels deep")
    problems = conversation_problems(record)
    if problems:
        raise ValueError("; ".join(problem.describe() for problem in problems))
    index = int(record["sample_index"])
    messages = record.get("messages") or []
    group = record.get("group_index")
    return Conversation(
        sample_index=index,
        group_index=None if group is None else int(group),
        status=None if record.get("status") is None else str(record.get("status")),
        reward=record.get("reward"),
        prompt=record.get("prompt"),
        messages=tuple(_message(m) for m in messages if isinstance(m, Mapping)),
    )


def read_sidecar(run_dir: Path, rollout_id: int, evaluation: bool) -> Sidecar | None:
    """The step's conversations, or None when the run recorded none for it.

    Read line by line through :class:`~miles_tui.core.base.tail.TailFile` (complete lines only,
    each at most ``MAX_LINE_BYTES``); a file that is not a regular file, or
    larger than :data:`TRAJECTORY_MAX_BYTES`, comes back empty with ``problem`` set.
    """
    path = sidecar_path(run_dir, rollout_id, evaluation)
    try:
        size = stat_regular(path).st_size
    except (FileNotFoundError, NotADirectoryError):
        return None
    except UnreadableFileError as err:
        return Sidecar(path, {}, (), str(err))
    except OSError as err:
        return Sidecar(path, {}, (), f"{path}: {os_error_message(path, err)}")
    if size > TRAJECTORY_MAX_BYTES:
        cap = TRAJECTORY_MAX_BYTES >> 20
        return Sidecar(path, {}, (), f"{path}: {size >> 20} MiB, larger than a sidecar can be ({cap} MiB); not read")
    conversations: dict[int, Conversation] = {}

    def keep(batch: Sequence[Conversation]) -> None:
        conversations.update((c.sample_index, c) for c in batch)

    budget = _BudgetedLines(path, LINE_FACTOR * size + SIDECAR_SLACK)
    read = TailFile(path, decode_conversation, decode_block=budget).poll(keep)
    problem = None if read.error is None else str(read.error)
    return Sidecar(path, conversations, tuple(m.offset or 0 for m in read.malformed), problem)


class _BudgetedLines:
    """The sidecar's block decoder: each line charged (:func:`line_cost`) before it is parsed."""

    def __init__(self, path: Path, allowance: int) -> None:
        self.path = path
        self.left = allowance
        """Bytes the lines not yet read may still cost."""

    def __call__(self, block: bytes, base: int) -> tuple[Sequence[Conversation], Sequence[MalformedLineError]]:
        records: list[Conversation] = []
        bad: list[MalformedLineError] = []
        position = base
        for line in block.split(b"\n"):
            start, position = position, position + len(line) + 1
            if not line.strip():
                continue
            cost = line_cost(line)
            if cost > LINE_FACTOR * len(line) + LINE_SLACK:
                reason = f"it would take {cost >> 10} KiB to hold {len(line) >> 10} KiB (too many empty objects)"
            elif cost > self.left:
                reason = "the sidecar's memory allowance is used up (it holds more objects than its size explains)"
            else:
                self.left -= cost
                try:
                    records.append(decode_conversation(json.loads(line.decode("utf-8"), parse_int=checked_int)))
                    continue
                except json.JSONDecodeError as err:
                    reason = f"not valid JSON ({err.msg}, column {err.colno})"
                except UnicodeDecodeError as err:
                    reason = f"not valid UTF-8 (byte {err.start} of the line)"
                except RecursionError:
                    reason = "nested too deeply to parse"
                except (ValueError, KeyError, TypeError, OverflowError) as err:
                    reason = str(err) or type(err).__name__
            bad.append(MalformedLineError(self.path, start, reason, line[:_EXCERPT]))
        return records, bad
