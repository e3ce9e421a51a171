"""A message's content cut into plain, <think> and <tool_call> spans (core.dump.message_spans)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.dump.message_spans import Span, SpanKind, content_spans, rebuilt

PIECES = st.sampled_from(["<think>", "</think>", "<tool_call>", "</tool_call>", "a", "b c", "\n", "<", ">", "think"])


def test_think_and_tool_call_spans_in_order() -> None:
    content = 'Sure.<think>check x\n</think>Calling.<tool_call>{"name": "f"}</tool_call>done'
    assert content_spans(content) == [
        Span(SpanKind.TEXT, "Sure."),
        Span(SpanKind.THINK, "check x\n"),
        Span(SpanKind.TEXT, "Calling."),
        Span(SpanKind.TOOL_CALL, '{"name": "f"}'),
        Span(SpanKind.TEXT, "done"),
    ]


def test_an_unclosed_tag_runs_to_the_end_and_a_stray_close_is_text() -> None:
    assert content_spans("</think>a<think>still thinking") == [
        Span(SpanKind.TEXT, "</think>a"),
        Span(SpanKind.THINK, "still thinking", closed=False),
    ]


def test_no_nesting_a_tool_call_inside_think_is_reasoning() -> None:
    assert content_spans("<think>x<tool_call>y</tool_call>z</think>") == [
        Span(SpanKind.THINK, "x<tool_call>y</tool_call>z")
    ]


@settings(max_examples=400)
@given(st.lists(PIECES, max_size=40).map("".join))
def test_the_spans_give_the_content_back(content: str) -> None:
    spans = content_spans(content)
    assert rebuilt(spans) == content
    assert all(s.text for s in spans if s.kind is SpanKind.TEXT)


def test_many_spans_with_a_tag_never_found_are_cut() -> None:
    # each tag's search resumes where it stopped: restarting it at every span would be ~10^11 steps here
    content = "<think></think>" * 200_000 + "<tool_call"
    spans = content_spans(content)
    assert len(spans) == 200_001 and spans[-1] == Span(SpanKind.TEXT, "<tool_call")
