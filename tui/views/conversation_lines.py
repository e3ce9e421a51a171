"""The conversation of one sample as text: its header and each message, from core's trajectory values.

Pure formatters (a :class:`~miles_tui.core.dump.trajectory.Conversation` or
:class:`~miles_tui.core.dump.trajectory.Message` in, Content out), so the
conversation widget only mounts them. Every string from the run (content,
reasoning, tool calls, roles, names, status) goes through
:func:`~miles_tui.core.base.inert_text.inert` and is never read as markup. A message's
inline ``<think>`` and ``<tool_call>`` spans (cut by core's
:func:`~miles_tui.core.dump.message_spans.content_spans`) are styled apart from
its text; a folded message is one line saying what it holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.content import Content

from miles_tui.core.base.inert_text import inert
from miles_tui.core.dump import Conversation, tool_call
from miles_tui.core.dump import Message as ChatMessage
from miles_tui.core.dump.message_spans import SpanKind, content_spans
from miles_tui.tui.formatting import MISSING, count_text

NO_CONVERSATION = "this run recorded no conversation for this sample"

FOLDABLE_ROLES = frozenset({"system", "tool"})
"""Roles whose messages ``z`` folds to one line (long prompts and tool outputs a reader skips)."""

SPAN_STYLES = {SpanKind.THINK: ("think", "italic $text-muted"), SpanKind.TOOL_CALL: ("tool call", "$text-accent")}
"""How an inline tagged span is labelled and styled."""


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


def message_lines(message: ChatMessage, *, folded: bool = False, number: int | None = None) -> MessageLines:
    """A message's title, body and role class (``folded``: the body is one line saying what it holds; ``number``:
    its place in the conversation from 0, as miles' dashboard numbers them, shown muted after the role)."""
    role_class = "-" + "".join(c if c.isalnum() else "-" for c in message.role.lower())
    title = Content(inert(message.role + (f" · {message.name}" if message.name else "")))  # not markup
    if number is not None:
        title = Content.assemble(title, (f" #{number}", "$text-muted"))
    if folded:
        return MessageLines(title, Content.styled(_folded_text(message), "$text-muted"), role_class)
    parts: list[str | tuple[str, str]] = []
    if message.reasoning_content:
        reasoning = inert(message.reasoning_content, multiline=True)
        parts += [("reasoning: ", "italic $text-muted"), (reasoning + "\n", "italic $text-muted")]
    parts += _content_parts(message.content)
    for raw in message.tool_calls:
        call = tool_call(raw)
        arguments = "" if call.arguments is None else call.arguments
        parts.append((inert(f"\n→ {call.name or '?'}({arguments})", multiline=True), "$text-accent"))
    return MessageLines(title, Content.assemble(*parts), role_class)


def _content_parts(content: str) -> list[str | tuple[str, str]]:
    """The content's plain text as it is, each ``<think>``/``<tool_call>`` span labelled and styled."""
    parts: list[str | tuple[str, str]] = []
    for span in content_spans(content):
        text = inert(span.text, multiline=True)
        if span.kind is SpanKind.TEXT:
            parts.append(text)
            continue
        label, style = SPAN_STYLES[span.kind]
        end = "" if span.closed else " (not closed)"
        parts += [(f"[{label}] ", f"bold {style}"), (text, style), (f" [/{label}]{end}", f"bold {style}")]
    return parts


def _folded_text(message: ChatMessage) -> str:
    """``▸ 12 lines, 3,456 characters, 1 tool call (z: unfold)``."""
    text = message.content + (message.reasoning_content or "")
    lines = text.count("\n") + (not text.endswith("\n")) if text else 0  # "a\n" is one line, as an editor counts
    count = len(message.tool_calls)
    calls = f", {count} tool call{'s' if count != 1 else ''}" if count else ""
    line_word = "line" if lines == 1 else "lines"
    characters = f"{count_text(len(text))} character{'s' if len(text) != 1 else ''}"
    return f"▸ {count_text(lines)} {line_word}, {characters}{calls} (z: unfold)"
