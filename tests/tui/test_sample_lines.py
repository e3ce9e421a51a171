"""The sample screen's text lines and the conversation's, as plain functions (no app)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from miles_tui.core.dump import Conversation
from miles_tui.core.dump import Message as ChatMessage
from miles_tui.tui.views.conversation_lines import header, message_lines
from miles_tui.tui.views.sample_lines import Part, chip_lines, context, cursor_line, cursor_rows
from miles_tui.tui.views.sample_tracks import SampleTracks
from miles_tui.tui.views.token_window import TokenWindow

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # bench/ is not a package: the 32k-token sample is the benchmark's
from bench.sample_cursor import synthetic_step  # noqa: E402


def pairs(parts: list[Part]) -> list[tuple[str, str]]:
    return [(part, "") if isinstance(part, str) else part for part in parts]


def test_chips_wrap_between_chips_never_inside_one() -> None:
    chips = [("step 5 · sample 3", "bold"), ("group 1 2/4", ""), ("completed", ""), ("reward 1.000", "")]
    one_line = chip_lines(chips, 200).plain
    assert one_line == "step 5 · sample 3 │ group 1 2/4 │ completed │ reward 1.000"
    lines = chip_lines(chips, 34).plain.split("\n")
    assert lines == ["step 5 · sample 3 │ group 1 2/4", "completed │ reward 1.000"]
    assert all(len(line) <= 34 for line in lines)


def test_context_centres_the_cursor_token_within_the_width() -> None:
    texts = ["<p>", "a", "\n", "b", "c", "d", "e", "f"]
    trained = np.array([True, False, True, True, True, True, True])
    parts = context(texts, 1, 4, trained, 9)
    pieces = pairs(parts)
    text = "".join(t for t, _ in pieces)
    assert text == "…\\nbcdef"  # the newline token shown escaped, never as a line break
    styles = {t: s for t, s in pieces if t}
    assert styles["c"] == "reverse bold"  # the cursor token
    assert styles["\\n"] == "$text-warning"  # loss-masked
    whole = "".join(t for t, _ in pairs(context(texts, 1, 0, trained, 80)))
    assert whole == "<p>a\\nbcdef"  # everything fits: no ellipsis


def test_the_cursor_line_has_exactly_the_rows_it_announces() -> None:
    step = synthetic_step(response_length=3_000, prompt_length=50)
    sample = SampleTracks.load(step, 0, None)
    tokens = TokenWindow(50, 3_000, sample.outliers).for_sample(50, 3_000, sample.outliers)
    for width in (80, 120, 160):
        line = cursor_line(sample, tokens.moved_to(3), None, width)
        assert len(line.plain.split("\n")) == cursor_rows(sample, None, width), width
    masked = int(np.flatnonzero(sample.view.trained() == 0)[0])
    assert "mask 0 (loss-masked)" in cursor_line(sample, tokens.moved_to(masked), None, 160).plain
    outlier = tokens.outlier_step(1).window
    assert f"outlier #1/{len(sample.outliers)}" in cursor_line(sample, outlier, None, 160).plain
    assert "outlier #" not in cursor_line(sample, outlier.moved_by(1), None, 160).plain


def test_a_message_reads_reasoning_content_and_tool_calls_never_as_markup() -> None:
    call = {"function": {"name": "count", "arguments": '{"n": [1]}'}}
    message = ChatMessage("Tool Result", "[b]5[/b]\x1b[2J", "think\u202e", (call,), "count")
    lines = message_lines(message)
    assert lines.body.plain == 'reasoning: think\\u202e\n[b]5[/b]\\x1b[2J\n→ count({"n": [1]})'
    assert lines.title.plain == "Tool Result · count"
    assert lines.role_class == "-tool-result"
    assert message_lines(ChatMessage("user", "hi", None, (), None)).body.plain == "hi"


def test_the_header_counts_the_messages() -> None:
    messages = (ChatMessage("user", "q", None, (), None), ChatMessage("assistant", "a", None, (), None))
    conversation = Conversation(3, 1, "truncated\x07", 0.5, "q", messages)
    assert header(conversation).plain == "recorded conversation · status truncated\\x07 · reward 0.5 · 2 messages"


def test_an_unreadable_sample_says_its_loss_mask_is_unknown_not_absent() -> None:
    """A fresh-clone trial: an unreadable sample's cursor line said 'no loss mask (trained)'."""
    import dataclasses

    from miles_tui.core.dump import FieldState

    step = synthetic_step(response_length=300, prompt_length=50)
    sample = SampleTracks.load(step, 0, None)
    unread = dataclasses.replace(
        sample.view, loss_mask=None, states=dict.fromkeys(sample.view.states, FieldState.UNREADABLE)
    )
    tokens = TokenWindow(50, 300, sample.outliers).for_sample(50, 300, sample.outliers)
    line = cursor_line(dataclasses.replace(sample, view=unread), tokens.moved_to(3), None, 160).plain
    assert "loss mask unreadable" in line and "no loss mask" not in line
    absent = dataclasses.replace(sample.view, loss_mask=None)
    assert "no loss mask (trained)" in cursor_line(dataclasses.replace(sample, view=absent), tokens, None, 160).plain
