"""The conversation of one sample as text: its header and each message, from core's trajectory values.

Pure formatters (a :class:`~miles_tui.core.dump.trajectory.Conversation` or
:class:`~miles_tui.core.dump.trajectory.Message` in, Content out), so the
conversation widget only mounts them. Every string from the run (content,
reasoning, tool calls, roles, names, status) goes through
:func:`~miles_tui.core.base.inert_text.inert` and is never read as markup.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.content import Content

from miles_tui.core.base.inert_text import inert
from miles_tui.core.dump import Conversation, tool_call
from miles_tui.core.dump import Message as ChatMessage
from miles_tui.tui.formatting import MISSING

NO_CONVERSATION = "this run recorded no conversation for this sample"


@dataclass(frozen=True)
class MessageLines:
    """One message as the conversation view draws it."""

    title: Content
    """The border title: role, and the tool's name when it has one."""
    body: Content
    """Reasoning (muted), content, then each tool call on its own line."""
    role_class: str
    """A CSS class for the role: ``-`` and the role with every non-alphanumeric character a dash."""


def header(conversation: Conversation) -> Content:
    """``recorded conversation · status S · reward R · N messages``."""
    return Content.assemble(
        ("recorded conversation", "bold"),
        f" · status {inert(conversation.status or MISSING)} · reward {inert(repr(conversation.reward))}"
        f" · {len(conversation.messages)} messages",
    )


def message_lines(message: ChatMessage) -> MessageLines:
    """A message's title, body and role class."""
    parts: list[str | tuple[str, str]] = []
    if message.reasoning_content:
        reasoning = inert(message.reasoning_content, multiline=True)
        parts += [("reasoning: ", "italic $text-muted"), (reasoning + "\n", "italic $text-muted")]
    parts.append(inert(message.content, multiline=True))
    for raw in message.tool_calls:
        call = tool_call(raw)
        arguments = "" if call.arguments is None else call.arguments
        parts.append((inert(f"\n→ {call.name or '?'}({arguments})", multiline=True), "$text-accent"))
    role_class = "-" + "".join(c if c.isalnum() else "-" for c in message.role.lower())
    title = Content(inert(message.role + (f" · {message.name}" if message.name else "")))  # not markup
    return MessageLines(title, Content.assemble(*parts), role_class)
