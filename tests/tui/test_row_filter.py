"""The `/` filter: whatever is typed either parses or says why, and a parsed filter never raises on a row."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.dump import SampleRow
from miles_tui.tui.formatting import version_span
from miles_tui.tui.views.row_filter import FilterError, parse_filter
from tests.tui.test_monkey import TYPED

BASE = SampleRow(
    sample_index=7,
    group_index=1,
    status="completed",
    remove_sample=False,
    response_length=10,
    total_length=20,
    reward=0.5,
    weight_version="4",
    weight_version_min=4,
    mixed_version=False,
    staleness=1,
    turns=1,
    tool_calls=None,
    non_generation_time=None,
    spec_accept_rate=None,
    prefix_cache_hit_rate=None,
    raw_reward=0.5,
    normalized_reward=0.1,
    truncated=False,
    dumped_rank=0,
    mean_entropy=1.0,
    max_entropy=2.0,
    ref_entropy_mean=None,
    mean_abs_lp_diff=0.01,
    max_abs_lp_diff=0.1,
    mean_imp_ratio=1.0,
    adv_mean=0.0,
    adv_std=None,
    return_mean=0.0,
    alignment_failed=False,
)

_NUMBER = st.one_of(st.none(), st.integers(-(10**6), 10**6), st.floats(allow_nan=True, allow_infinity=True))
ROWS = st.builds(
    lambda version, status, reward, stale, rank, failed: replace(
        BASE,
        weight_version=version,
        status=status,
        reward=reward,
        staleness=stale,
        dumped_rank=rank,
        alignment_failed=failed,
        mean_abs_lp_diff=None if failed else 0.01,
    ),
    st.one_of(st.none(), st.sampled_from(["4", "12", "+3", " 3 ", "-1", "v3", "default", ""]), st.text(max_size=6)),
    st.one_of(st.none(), st.sampled_from(["completed", "truncated", "aborted"]), st.text(max_size=6)),
    _NUMBER,
    st.one_of(st.none(), st.integers(-3, 100)),
    st.one_of(st.none(), st.integers(0, 64)),
    st.booleans(),
)


@settings(max_examples=400, deadline=None)
@given(text=TYPED, rows=st.lists(ROWS, min_size=1, max_size=4))
def test_a_filter_parses_or_says_why_and_never_raises_on_a_row(text: str, rows: list[SampleRow]) -> None:
    try:
        row_filter = parse_filter(text, {1})
    except FilterError as err:
        assert str(err)
        return
    if row_filter is not None:
        for row in rows:
            assert isinstance(row_filter(row), bool)


@pytest.mark.parametrize(
    ("text", "version", "matches"),
    [
        ("version~v4", "4", True),  # the table shows v4
        ("version=v4", "4", True),
        ("version=4", "4", True),
        ("version~v1", "12", True),  # shown v12
        ("version>8", "12", True),
        ("version>8", "4", False),
        ("version>8", "+12", False),  # not a numeric version: shown as dumped, never compared as a number
        ("version=+12", "+12", True),
        ("version~v", "default", False),
    ],
)
def test_version_terms_match_what_the_table_shows(text: str, version: str, matches: bool) -> None:
    row = replace(BASE, weight_version=version)
    row_filter = parse_filter(text)
    assert row_filter is not None and row_filter(row) is matches, version_span(row)


@pytest.mark.parametrize("text", ["status>3", "reward>abc", "version>abc", "reward>none", "truncated=maybe"])
def test_terms_that_cannot_hold_fail_when_parsed(text: str) -> None:
    with pytest.raises(FilterError):
        parse_filter(text)


def test_a_non_numeric_version_is_shown_as_dumped() -> None:
    assert version_span(replace(BASE, weight_version="+3")) == "+3"
    assert version_span(replace(BASE, weight_version="3")) == "v3"


@pytest.mark.parametrize(
    ("spaced", "plain"),
    [("reward > 0.5", "reward>0.5"), ("stale >= 1 not-truncated", "stale>=1 not-truncated"), ("reward==1", "reward=1")],
)
def test_spaces_around_an_operator_and_a_double_equals_read_as_written_without(spaced: str, plain: str) -> None:
    """A new user typed `reward > 0.5` and `reward==1` and was told 'unknown word' / 'not a number'."""
    rows = [replace(BASE, sample_index=i, reward=float(i % 2), staleness=i % 3) for i in range(6)]
    a, b = parse_filter(spaced), parse_filter(plain)
    assert a is not None and b is not None
    assert [a(r) for r in rows] == [b(r) for r in rows] and any(b(r) for r in rows) and not all(b(r) for r in rows)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("reward >", "'reward>' needs a value after >"),
        ("reward", "'reward' is a column: compare it, e.g. reward>0.5"),
        ("rewrd>1", "unknown column 'rewrd' (did you mean reward"),
        ("zzzz>1", "unknown column 'zzzz' (? lists the columns)"),
    ],
)
def test_a_filter_that_does_not_parse_says_what_to_type(text: str, said: str) -> None:
    with pytest.raises(FilterError) as raised:
        parse_filter(text)
    assert said in str(raised.value)


def test_every_one_word_header_of_the_table_is_a_name_the_filter_takes() -> None:
    """``/resp>50`` said "unknown column 'resp'" while ``stale>=2`` worked: a user types what the header says."""
    import re

    from miles_tui.tui.views.row_filter import ALIASES
    from miles_tui.tui.views.step_rows import SAMPLE_COLUMNS

    for column in SAMPLE_COLUMNS:
        word = column.label.lower()
        if re.fullmatch(r"[a-z_]+", word):
            assert ALIASES.get(word, word) == column.key, (column.label, column.key)
            assert parse_filter(f"{word}=1") is not None
