"""The coloured token text as plain functions: pages of tokens, each token's look, the legend (no app)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.analysis import MASKED, NO_VALUE, TOP, HeatStatistic, TokenHeat
from miles_tui.core.dump import FieldState
from miles_tui.tui.views.token_text_lines import (
    TokenSource,
    lay_out,
    legend,
    page_cells,
    page_for,
    shown_rows,
    token_look,
)


def texts_source(texts: list[str]) -> TokenSource:
    return TokenSource(tuple(range(len(texts))), texts)


def heat_of(levels: list[int], spread: bool = True, state: FieldState = FieldState.OK) -> TokenHeat:
    low, high = (0.0, 1.0) if spread else (0.5, 0.5)
    cuts = tuple(np.linspace(0.1, 0.9, 9))
    array = np.array(levels, dtype=np.int8)
    return TokenHeat(HeatStatistic.ENTROPY, state, np.zeros(len(levels)), array, cuts, len(levels), low, high)


def test_tokens_wrap_between_tokens_and_a_newline_token_ends_its_line() -> None:
    source = texts_source(["Hello", ",", " world", ".\n", "Next", " line", " is", " long"])
    page = lay_out(source, 0, 11, 5)
    assert [[label for _, label in line] for line in page.lines] == [
        ["Hello", ","],
        [" world", ".\\n"],
        ["Next", " line"],
        [" is", " long"],
    ]
    assert (page.first, page.stop) == (0, 8) and shown_rows(page, source) == 4


def test_a_token_wider_than_a_line_is_cut_and_control_characters_are_shown_inert() -> None:
    source = texts_source(["x" * 30, "\x1b[2J", "\u202e"])
    page = lay_out(source, 0, 14, 3)
    assert page.lines[0] == ((0, "x" * 13 + "…"),)
    assert [label for _, label in page.lines[1]] == ["\\x1b[2J", "\\u202e"]


def test_without_a_tokenizer_ids_are_shown_with_a_space_between() -> None:
    source = TokenSource((5, 17, 302, 4), None)
    page = lay_out(source, 0, 7, 3)
    assert [[label for _, label in line] for line in page.lines] == [["5", "17"], ["302", "4"]]
    cells = page_cells(page, source, 0, heat_of([0, 1, 2, 3]), cursor=-1)
    assert [text for text, _ in cells[0]] == ["5", " ", "17"]


def test_the_page_stays_while_the_cursor_is_on_it_and_turns_keeping_its_last_line() -> None:
    source = texts_source([f"w{i:03d}" for i in range(200)])  # 4 cells each: 5 tokens per 20-cell line
    first = page_for(source, 0, 20, 3, None)
    assert (first.first, first.stop) == (0, 15)
    assert page_for(source, 14, 20, 3, first) is first
    turned = page_for(source, 15, 20, 3, first)
    assert (turned.first, turned.stop) == (10, 25)  # the last line (10-14) stays on top
    jump = page_for(source, 150, 20, 6, None)
    assert jump.holds(150) and jump.first == 140  # two lines above: a third of the way down
    assert page_for(source, 3, 20, 6, jump).holds(3)  # backward jumps too


@pytest.mark.parametrize("rows", [1, 2, 3])
def test_a_jump_to_the_end_hides_nothing_when_the_whole_sequence_fits(rows: int) -> None:
    """After End, a 2-row strip showed only the last of 29 tokens, although all of them fit (a third of
    2 rows is no row of context)."""
    source = texts_source([f"tok{i}" for i in range(29)])
    page = page_for(source, 28, 200, rows, None)
    assert (page.first, page.stop) == (0, 29)
    narrow = page_for(source, 28, 60, 1, page_for(source, 10, 60, 1, None))
    assert narrow.holds(28) and narrow.first < 28, "one row: no token before the cursor shown"


def test_looks_say_prompt_decile_top_masked_no_value_and_cursor() -> None:
    source = texts_source(["p0", "p1", "a", "b", "c", "d", "e"])
    heat = heat_of([0, TOP, MASKED, NO_VALUE, 5])
    page = lay_out(source, 0, 40, 2)
    looks = [look for _, look in page_cells(page, source, 2, heat, cursor=6)[0]]
    assert looks == ["prompt", "prompt", "decile-0", "decile-9", "masked", "no-value", "cursor"]
    on_top = [look for _, look in page_cells(page, source, 2, heat, cursor=3)[0]]
    assert on_top[3] == "cursor-top"
    assert token_look(4, spread=False) == "flat" and token_look(MASKED, spread=False) == "masked"
    assert token_look(NO_VALUE, spread=False) == "no-value"


def test_the_legend_says_what_each_look_means_and_why_there_are_no_values() -> None:
    cuts = tuple(float(c) for c in np.arange(1, 10))
    ok = TokenHeat(HeatStatistic.LP_DIFF, FieldState.OK, np.zeros(3), np.zeros(3, np.int8), cuts, 812, 0.0012, 3.5)
    text = legend(ok, "", 200).plain
    assert text.startswith("|lpΔ| 0.0012 ██████████ 3.5000 · deciles of 812 trained tokens")
    assert "underlined: top 10% >9.0000" in text and "struck: no value (dim: masked)" in text
    assert "italic: prompt" in text
    assert all(len(line) <= 60 for line in legend(ok, "", 60).plain.split("\n"))
    unreadable = heat_of([NO_VALUE], state=FieldState.UNREADABLE)
    note = "UNREADABLE: dumped, but its slices could not be placed"
    assert (
        "entropy UNREADABLE for this sample (dumped, but its slices could not be placed)"
        in legend(unreadable, note, 200).plain
    )
    assert "entropy not dumped for this sample" in legend(heat_of([0], state=FieldState.NOT_DUMPED), "", 200).plain
    assert "0.5000 at every trained token: no top decile" in legend(heat_of([0, 0], spread=False), "", 200).plain


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 30), min_size=1, max_size=400),
    breaks=st.sets(st.integers(0, 399)),
    width=st.integers(2, 120),
    rows=st.integers(1, 8),
    moves=st.lists(st.integers(0, 399), min_size=1, max_size=20),
)
def test_the_page_always_holds_the_cursor_and_fits_its_width(
    lengths: list[int], breaks: set[int], width: int, rows: int, moves: list[int]
) -> None:
    texts = ["x" * n + ("\n" if i in breaks else "") for i, n in enumerate(lengths)]
    source = texts_source(texts)
    page = None
    for move in moves:
        position = move % len(texts)
        page = page_for(source, position, width, rows, page)
        assert page.holds(position)
        assert len(page.lines) <= rows
        assert all(sum(len(label) for _, label in line) <= width for line in page.lines)
        shown = [p for line in page.lines for p, _ in line]
        assert shown == list(range(page.first, page.stop))  # every token in order, none skipped
