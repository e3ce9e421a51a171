"""The sample screen's token cursor and window, as plain values (no app)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.tui.views.token_window import TokenWindow

NO_OUTLIERS = np.zeros(0, dtype=np.int64)


def window(prompt: int, response: int, outliers: list[int] | None = None) -> TokenWindow:
    ranked = NO_OUTLIERS if outliers is None else np.array(outliers, dtype=np.int64)
    return TokenWindow(prompt, response, NO_OUTLIERS).for_sample(prompt, response, ranked)


def test_sizes_leave_out_windows_as_long_as_the_sequence() -> None:
    assert window(10, 5_000).sizes() == [256, 1024, 4096, None]
    assert window(10, 290).sizes() == [256, None]
    assert window(0, 256).sizes() == [None]  # 256 of 256 is all of it
    assert window(3, 0).sizes() == [None]


def test_first_placement_starts_at_zero_and_the_cursor_on_the_first_response_token() -> None:
    tokens = window(1_000, 4_000)
    assert tokens.cursor == 0 and tokens.position == 1_000
    assert tokens.window == (1_000 - 64, 1_000 - 64 + 256)  # a quarter of the window before the cursor
    assert window(10, 4_000).window == (0, 256)  # clamped to the sequence


def test_the_window_stays_while_the_cursor_moves_inside_it() -> None:
    tokens = window(0, 4_000)
    assert tokens.window == (0, 256)
    inside = tokens.moved_to(100).moved_to(255)
    assert inside.window == (0, 256) and inside.cursor == 255


def test_leaving_forward_puts_the_cursor_three_quarters_in_and_backward_a_quarter_in() -> None:
    tokens = window(0, 4_000)
    forward = tokens.moved_to(256)
    assert forward.window == (64, 320)  # 256 - 3/4 of 256
    far = forward.moved_to(2_000)
    assert far.window == (2_000 - 192, 2_000 - 192 + 256)  # forward: three quarters in, wherever it lands
    back = far.moved_to(1_000)
    assert back.window == (1_000 - 64, 1_000 - 64 + 256)
    assert back.moved_to(10).window == (0, 256)  # clamped at the start
    end = tokens.at_end(True)
    assert end.cursor == 3_999 and end.window == (4_000 - 256, 4_000)  # clamped at the end


def test_moves_clamp_to_the_response() -> None:
    tokens = window(7, 20)
    assert tokens.moved_by(-5).cursor == 0
    assert tokens.moved_by(500).cursor == 19
    assert tokens.at_end(True).at_end(False).cursor == 0
    empty = window(7, 0).moved_by(3)
    assert empty.cursor == 0 and empty.position == 7 and empty.window == (0, 7)


def test_cycling_goes_through_every_size_and_back() -> None:
    tokens = window(1_024, 32_768).moved_to(20_000)
    seen = []
    for _ in range(5):
        tokens = tokens.cycled()
        start, stop = tokens.window
        seen.append(stop - start)
        assert start <= tokens.position < stop
    assert seen == [1024, 4096, 33_792, 256, 1024]


def test_another_sample_keeps_the_size_where_it_can() -> None:
    tokens = window(0, 5_000).cycled().cycled()  # 4096
    assert tokens.size == 4096
    assert tokens.for_sample(0, 5_000, NO_OUTLIERS).size == 4096
    shorter = tokens.for_sample(10, 1_000, NO_OUTLIERS)  # offers 256 and all: the last one it has
    assert shorter.size is None and shorter.window == (0, 1_010) and shorter.cursor == 0


def test_outliers_walk_in_rank_order_and_say_when_they_run_out() -> None:
    tokens = window(5, 100, [40, 7, 93])
    first = tokens.outlier_step(1)
    assert first.note is None and first.window.cursor == 40 and first.window.on_outlier() == 0
    second = first.window.outlier_step(1).window
    assert second.cursor == 7 and second.on_outlier() == 1
    third = second.outlier_step(1).window
    past = third.outlier_step(1)
    assert past.note == "no more outliers" and past.window is third
    back = third.outlier_step(-1).window.outlier_step(-1).window
    assert back.cursor == 40
    assert back.outlier_step(-1).note == "already at the largest |lpΔ|"
    assert back.moved_by(1).on_outlier() is None  # moved off the outlier: no longer "#1"
    assert "no outliers" in (window(5, 100).outlier_step(1).note or "")


def test_a_new_sample_forgets_the_outlier_rank() -> None:
    tokens = window(5, 100, [40]).outlier_step(1).window
    assert tokens.outlier_rank == 0
    assert tokens.for_sample(5, 100, np.array([40])).outlier_rank == -1


@settings(max_examples=300, deadline=None)
@given(
    prompt=st.integers(0, 5_000),
    response=st.integers(1, 40_000),
    moves=st.lists(
        st.one_of(
            st.tuples(st.just("by"), st.integers(-50_000, 50_000)),
            st.tuples(st.just("to"), st.integers(-10, 50_000)),
            st.tuples(st.just("cycle"), st.just(0)),
            st.tuples(st.just("end"), st.integers(0, 1)),
        ),
        max_size=30,
    ),
)
def test_the_window_always_holds_the_cursor_and_has_the_chosen_size(
    prompt: int, response: int, moves: list[tuple[str, int]]
) -> None:
    tokens = window(prompt, response)
    for kind, amount in moves:
        if kind == "by":
            tokens = tokens.moved_by(amount)
        elif kind == "to":
            tokens = tokens.moved_to(amount)
        elif kind == "cycle":
            tokens = tokens.cycled()
        else:
            tokens = tokens.at_end(bool(amount))
        start, stop = tokens.window
        assert 0 <= tokens.cursor < response
        assert 0 <= start <= tokens.position < stop <= prompt + response
        assert stop - start == (tokens.size or prompt + response)
