"""miles' lane-selection grammar: each selector as miles resolves it, the golden run's lane catalog, and
properties: any text parses or gives one clear LaneGrammarError, in bounded time; selectors are a union."""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.analysis.lane_grammar import (
    MAX_LENGTH,
    SELECTOR_KINDS,
    LaneFacts,
    LaneGrammarError,
    engine_lanes,
    lane_facts,
    parse_lanes,
    resolve_lanes,
)
from miles_tui.core.analysis.slowest_phase import train_actors
from miles_tui.core.telemetry.phase_bands import phase_spans
from miles_tui.core.telemetry.stream_records import decode_phase
from tests.conftest import GOLDEN

LANES = [(f"10.0.0.{n}", g) for n in (9, 10, 11) for g in range(4)]
TRAIN = [(f"10.0.0.{n}", 4 * i + g, [g]) for i, n in enumerate((9, 10)) for g in range(4)]
ENGINES = {"http://10.0.0.11:30000": [("10.0.0.11", 0), ("10.0.0.11", 1)], "http://10.0.0.11:30001": []}
FACTS = lane_facts(LANES, TRAIN, ENGINES)


def picked(text: str, facts: tuple[LaneFacts, ...] = FACTS) -> set[tuple[str, int]]:
    return {facts[i].lane for i in resolve_lanes(parse_lanes(text), facts)}


def test_global_numbers_follow_miles_sort_not_the_natural_one() -> None:
    by_number = sorted(FACTS, key=lambda f: f.index)
    # miles sorts (node, gpu) as strings: 10.0.0.10 < 10.0.0.11 < 10.0.0.9
    assert [f.lane for f in by_number[:5]] == [("10.0.0.10", g) for g in range(4)] + [("10.0.0.11", 0)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("rank:5", {("10.0.0.10", 1)}),
        ("rank:0-2", {("10.0.0.9", 0), ("10.0.0.9", 1), ("10.0.0.9", 2)}),
        ("g:0", {("10.0.0.10", 0)}),
        ("g:7-8", {("10.0.0.11", 3), ("10.0.0.9", 0)}),
        ("node:10.0.0.11", {("10.0.0.11", g) for g in range(4)}),
        ("node:10.0.0.1", set()),  # exact host, not a prefix
        ("gpu:10.0.0.9:3", {("10.0.0.9", 3)}),
        ("engine:30000", {("10.0.0.11", 0), ("10.0.0.11", 1)}),
        ("engine:30001", set()),
        ("role:rollout", {("10.0.0.11", 0), ("10.0.0.11", 1)}),
        ("role:train", {lane for lane in LANES if lane[0] != "10.0.0.11"}),
        ("every:4", {("10.0.0.10", 0), ("10.0.0.11", 0), ("10.0.0.9", 0)}),
        (" rank:0 ,, gpu:10.0.0.11:3 ", {("10.0.0.9", 0), ("10.0.0.11", 3)}),
        (",,", set()),  # miles: no selector at all selects nothing
        ("", set(LANES)),
        ("  all ", set(LANES)),
        ("rank:99", set()),
    ],
)
def test_each_selector_selects_what_miles_does(text: str, expected: set[tuple[str, int]]) -> None:
    assert picked(text) == expected


def test_a_host_with_colons_keeps_them() -> None:
    facts = lane_facts([("fe80::1", 0), ("fe80::1", 2)])
    assert picked("gpu:fe80::1:2", facts) == {("fe80::1", 2)}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("rank:x", ("'rank:x'", "column 1", "not a number")),
        ("rank:0, host:a", ("unknown lane selector 'host'", "column 9", "rank:, g:, node:")),
        ("rank:", ("'rank:'", "has no value", "rank:<value>")),
        ("all, rank:1", ("unknown lane selector 'all'",)),
        ("gpu:3", ("expected gpu:<node>:<index>",)),
        ("every:0", ("stride must be positive",)),
        ("role:eval", ("role must be train or rollout",)),
        ("rank:7-0", ("runs backwards",)),
        ("g:3-", ("needs its end",)),
        ("rank:-3", ("not a number",)),
        ("rank:1_0", ("not a number",)),
        ("g:²", ("not a number",)),
        ("rank:1234567890", ("at most 9",)),
        ("x" * (MAX_LENGTH + 1), ("too long",)),
        (",".join(["g:1"] * 300), ("too many",)),
    ],
)
def test_a_bad_expression_says_what_and_where(text: str, words: tuple[str, ...]) -> None:
    with pytest.raises(LaneGrammarError) as caught:
        parse_lanes(text)
    message = str(caught.value)
    assert "\n" not in message and len(message) < 200
    for word in words:
        assert word in message


def test_the_golden_run_resolves_as_its_lane_catalog() -> None:
    """live_streams' lane_catalog.json is miles' own lane index: ranks and roles from the phases agree."""
    dashboard = GOLDEN / "live_streams" / "dashboard"
    catalog = json.loads((dashboard / "lane_catalog.json").read_text())["lanes"]
    records = [decode_phase(json.loads(line)) for path in sorted((dashboard / "phases").iterdir())
               for line in path.read_text().splitlines() if line.strip()]  # fmt: skip
    spans = phase_spans(records)
    lanes = [(key.rpartition(":")[0], int(key.rpartition(":")[2])) for key in catalog]
    facts = lane_facts(lanes, train_actors(spans))
    for fact in facts:
        entry = catalog[f"{fact.lane[0]}:{fact.lane[1]}"]
        assert sorted(fact.ranks) == entry["ranks"] and sorted(fact.roles) == entry["roles"]
    assert picked("rank:1", facts) == {("10.0.0.7", 1)}
    assert picked("role:train", facts) == set(lanes)


def test_topology_engines_become_lanes_and_bad_shapes_are_left_out() -> None:
    record: dict[str, Any] = {"ts": 1.0, "engines": [
        {"addr": "http://a:1", "gpus": [["n1", 0], ["n1", 1]]},
        {"addr": "http://b:1", "gpus": [["n2", "0"], "x", ["n2", 1, 2]]},
        {"gpus": [["n3", 0]]},
        "junk",
    ]}  # fmt: skip
    assert engine_lanes(record) == {"http://a:1": [("n1", 0), ("n1", 1)], "http://b:1": []}
    assert engine_lanes({"engines": "x"}) == {} and engine_lanes(None) == {}


def _reference(text: str, facts: tuple[LaneFacts, ...]) -> set[tuple[Any, Any]] | None:
    """miles' resolve_lanes transcribed (store.py), over the same facts."""
    if text.strip() in ("", "all"):
        return None
    selected: set[tuple[Any, Any]] = set()
    for raw in text.split(","):
        token = raw.strip()
        if not token:
            continue
        kind, _, value = token.partition(":")
        if kind in ("rank", "g"):
            lo, _, hi = value.partition("-")
            numbers = set(range(int(lo), int(hi if hi else lo) + 1))
            if kind == "rank":
                selected |= {f.lane for f in facts if numbers & set(f.ranks)}
            else:
                selected |= {f.lane for f in facts if f.index in numbers}
        elif kind == "node":
            selected |= {f.lane for f in facts if f.lane[0] == value}
        elif kind == "gpu":
            node, _, gpu = value.rpartition(":")
            selected.add((node, int(gpu)))
        elif kind == "engine":
            selected |= {f.lane for f in facts if any(value in a for a in f.engines)}
        elif kind == "every":
            selected |= {f.lane for f in facts if f.index % int(value) == 0}
        elif kind == "role":
            selected |= {f.lane for f in facts if value in f.roles}
    return selected


def _valid_selector() -> st.SearchStrategy[str]:
    number = st.integers(0, 20)
    ranges = st.tuples(number, number).map(lambda p: f"{min(p)}-{max(p)}") | number.map(str)
    hosts = st.sampled_from(["10.0.0.9", "10.0.0.10", "10.0.0.11", "10.0.0.1"])
    return st.one_of(
        ranges.map(lambda r: f"rank:{r}"),
        ranges.map(lambda r: f"g:{r}"),
        hosts.map(lambda h: f"node:{h}"),
        st.tuples(hosts, st.integers(0, 5)).map(lambda p: f"gpu:{p[0]}:{p[1]}"),
        st.sampled_from(["30000", "30001", "10.0.0", "zz"]).map(lambda e: f"engine:{e}"),
        st.sampled_from(["train", "rollout"]).map(lambda r: f"role:{r}"),
        st.integers(1, 13).map(lambda n: f"every:{n}"),
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(_valid_selector(), max_size=6), st.sampled_from([",", ", ", " , ", ",,"]))
def test_valid_expressions_select_what_miles_selects(selectors: list[str], comma: str) -> None:
    text = comma.join(selectors)
    expected = _reference(text, FACTS)
    got = picked(text)
    # miles adds a gpu: lane even when no lane has it; a view lists only lanes it has
    assert got == (set(LANES) if expected is None else expected & set(LANES))


@settings(max_examples=200, deadline=None)
@given(st.lists(_valid_selector(), min_size=1, max_size=4), st.lists(_valid_selector(), min_size=1, max_size=4))
def test_an_expression_is_the_union_of_its_selectors(left: list[str], right: list[str]) -> None:
    assert picked(",".join(left + right)) == picked(",".join(left)) | picked(",".join(right))


ALPHABET = st.sampled_from(list("rankgodepuivylt:,-0123456789 .\t\x00é²") + list(SELECTOR_KINDS))


@settings(max_examples=500, deadline=None)
@given(st.lists(ALPHABET, max_size=60).map("".join) | st.text(max_size=80))
def test_any_text_parses_or_says_why(text: str) -> None:
    try:
        expression = parse_lanes(text)
    except LaneGrammarError as err:
        message = str(err)
        assert message and "\n" not in message and len(message) < 300
        assert "lane" in message
        return
    resolve_lanes(expression, FACTS)


def test_hostile_input_costs_bounded_time() -> None:
    many = lane_facts([(f"n{i // 8}", i % 8) for i in range(4096)])
    worst = ",".join(["rank:0-999999999"] * 128 + ["g:0-999999999"] * 127)
    assert len(worst) <= MAX_LENGTH
    started = time.perf_counter()
    assert len(resolve_lanes(parse_lanes(worst), many)) == 4096
    for text in ("," * MAX_LENGTH, " " * MAX_LENGTH, ":" * MAX_LENGTH, "x" * 10**6):
        with contextlib.suppress(LaneGrammarError):
            parse_lanes(text)
    assert time.perf_counter() - started < 5.0
