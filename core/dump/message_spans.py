"""A message's content cut into the spans a reader tells apart: plain text, ``<think>`` reasoning, ``<tool_call>``.

Contract: :func:`content_spans` splits a message's raw content at the tags
models write inline (``<think>…</think>``, ``<tool_call>…</tool_call>``) into
:class:`Span` values, in order, whose texts joined with their tags give the
content back exactly. A span's text is what lies between its tags (the tags are
not part of it); a tag opened and never closed runs to the end of the content
(``closed`` False); a closing tag with no opening one is plain text, as is a tag
inside another span (no nesting: a ``<tool_call>`` inside ``<think>`` is part
of the reasoning). Empty plain spans are dropped. Linear in the content's
length (``str.find`` from a moving start, never a regex). Pure.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final


class SpanKind(enum.Enum):
    TEXT = "text"
    THINK = "think"
    TOOL_CALL = "tool_call"


TAGS: Final = {SpanKind.THINK: ("<think>", "</think>"), SpanKind.TOOL_CALL: ("<tool_call>", "</tool_call>")}
"""Each tagged kind's opening and closing tag, as Qwen-style chat templates write them."""


@dataclass(frozen=True)
class Span:
    kind: SpanKind
    text: str
    """What lies between the tags (for TEXT: the text itself)."""
    closed: bool = True
    """False for a tagged span whose closing tag never came (the content ends inside it)."""


def content_spans(content: str) -> list[Span]:
    """See the module docstring."""
    spans: list[Span] = []
    position = 0
    ahead = {kind: content.find(opening) for kind, (opening, _closing) in TAGS.items()}
    while position < len(content):
        kind, start = _next_open(content, position, ahead)
        if kind is None:
            break
        if start > position:
            spans.append(Span(SpanKind.TEXT, content[position:start]))
        opening, closing = TAGS[kind]
        body = start + len(opening)
        end = content.find(closing, body)
        if end < 0:
            spans.append(Span(kind, content[body:], closed=False))
            return spans
        spans.append(Span(kind, content[body:end]))
        position = end + len(closing)
    if position < len(content):
        spans.append(Span(SpanKind.TEXT, content[position:]))
    return spans


def _next_open(content: str, position: int, ahead: dict[SpanKind, int]) -> tuple[SpanKind | None, int]:
    """The kind and offset of the first opening tag at or after ``position`` (None, -1: none). ``ahead`` holds each
    tag's next offset found so far (-1: none left) and is searched again only once passed: every byte of the
    content is searched at most once per tag."""
    found: tuple[SpanKind | None, int] = (None, -1)
    for kind, (opening, _closing) in TAGS.items():
        at = ahead[kind]
        if 0 <= at < position:
            at = ahead[kind] = content.find(opening, position)
        if at >= 0 and (found[0] is None or at < found[1]):
            found = (kind, at)
    return found


def rebuilt(spans: list[Span]) -> str:
    """The content the spans were cut from (their texts with their tags put back)."""
    parts = []
    for span in spans:
        if span.kind is SpanKind.TEXT:
            parts.append(span.text)
        else:
            opening, closing = TAGS[span.kind]
            parts.append(opening + span.text + (closing if span.closed else ""))
    return "".join(parts)
