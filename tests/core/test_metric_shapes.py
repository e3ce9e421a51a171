"""Learned record shapes: lines of a shape seen before are read straight into numbers, and what comes out is
still exactly what json.loads gives for each line, whatever the line."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.telemetry.metrics import metric_batch, metric_shapes
from miles_tui.core.telemetry.metrics.metric_batch import decode_block
from miles_tui.core.telemetry.metrics.metric_shapes import MAX_WIDTH, Shapes
from tests.core.metric_lines import as_text, line, reference


@pytest.fixture
def shapes(monkeypatch: pytest.MonkeyPatch) -> Shapes:
    """A fresh registry for decode_block (the process's own keeps what other tests taught it)."""
    fresh = Shapes()
    monkeypatch.setattr(metric_batch, "SHAPES", fresh)
    return fresh


def _decoded(block: bytes) -> tuple[list[str], list[int]]:
    return as_text(*decode_block(block, 0))


TEACHER = line(0.5, "train/step", 0, loss=0.25, n=3, lr=1e-6)
"""A line of the shape the lines below are checked against (the first decode learns it)."""

LEARNED_SHAPE_LINES = [
    line(1.5, "train/step", 1, loss=0.48677725304935715, n=4, lr=1e-6),
    line(2, "train/step", 2, loss=1, n=2**53 + 1, lr=-0.0),  # an int beyond 2**53 stays exact
    line(3.0, "train/step", 3.0, loss=1.0, n=0),  # 1.0 stays a float, 0 an int; lr missing
    line(4.0, "train/step", -0.0, n=2**70),
    b'{"ts":5.0,"step_key":"train/step","step":4,"metrics":{"loss":1' + b"0" * 400 + b"}}",  # beyond a float64
    b'{"ts":6.0,"step_key":"train/step","step":5,"metrics":{"loss":1e400}}',  # json.loads: inf
    b'{"ts":7.0,"step_key":"train/step","step":6,"metrics":{"loss":1,"loss":2.5}}',  # duplicate: the last wins
    b'{"ts":8.0,"step_key":"train/step","step":7,"metrics":{"loss":1},"metrics":{"n":2}}',
    b'{"ts":9.0,"step":8,"metrics":{"loss":1}}',  # no step key: malformed
    b'{"ts":10.0,"step_key":"train/step","step":9,"metrics":{"loss":true}}',
    b'{"ts":11.0,"step_key":"train/step","step":10,"metrics":{"loss":null,"n":1}}',
    b'{"ts":12.0,"step_key":"train/step","step":11,"metrics":{"lo\\u0073s":0.5}}',  # an escaped key
    b'{"ts":13.0,"step_key":"train/step","step":12,"metrics":{"loss":0.5,"other":1}}',  # a new name: learned
    b'{"ts":14.0,"step_key":"train/step","step":13,"metrics":{"other":2}}',
    b'{"ts":15.0,"step_key":"\\u0000miles-tui: no shape","step":14,"metrics":{}}',  # the sentinel's tag
    b'{"ts":' + b"9" * 400 + b',"step_key":"train/step","step":15,"metrics":{"n":1}}',  # ts beyond a float64
    b'{"ts":16.0,"step_key":"train/step","step":' + b"9" * 30 + b',"metrics":{"n":1}}',  # a big int step
    b'{"ts":17.0,"step_key":"train/step","step":16,"metrics":{"n":1}} ',
    b'{"ts":18.0,"step_key":"train/step","step":17,"metrics":{"n":1},"extra":{"deep":[1,2]}}',
    b'[{"ts":19.0,"step_key":"train/step","step":18,"metrics":{"n":1}}]',
    b'{"ts":20.0,"step_key":"train/step","step":19,"metrics":{"n":1}},{"ts":21.0}',
    b'{"ts":22.0,"step_key":"train/step","step":"20","metrics":{"n":1}}',
    b'{"ts":23.0,"step_key":"train/step","step":21,"metrics":{"n":-1e-320}}',  # subnormal
]


def test_lines_of_a_learned_shape_decode_as_json_loads_decodes_them(shapes: Shapes) -> None:
    decode_block(TEACHER, 0)
    assert shapes.builds == 1
    assert type(shapes.decode(LEARNED_SHAPE_LINES[0])).step_key == "train/step"  # the fast way reads them
    block = b"\n".join(LEARNED_SHAPE_LINES)
    assert _decoded(block) == reference(block)
    assert _decoded(block) == reference(block)  # again, with "other" learned on the way


def test_a_name_msgspec_cannot_match_is_not_learned_and_its_lines_still_decode(shapes: Shapes) -> None:
    lines = [line(float(i), "s", i, **{'q"': i, "a\\b": 0.5, "c\x01": 1}) for i in range(3)]
    lines += [line(3.0, 'x"y', 3, a=1), line(4.0, 'x"y', 4, a=2)]
    block = b"\n".join(lines)
    assert _decoded(block) == reference(block)
    assert shapes.builds == 0
    with pytest.raises(msgspec.DecodeError):
        shapes.decode(lines[1])


def test_learning_is_bounded(shapes: Shapes, monkeypatch: pytest.MonkeyPatch) -> None:
    shapes.learn("wide", [f"k{i}" for i in range(MAX_WIDTH + 1)])
    assert shapes.builds == 0
    monkeypatch.setattr(metric_shapes, "MAX_BUILDS", 3)
    lines = [line(float(i), "s", i, **{f"new{i}": i}) for i in range(10)]  # every line a new name
    block = b"\n".join(lines)
    assert _decoded(block) == reference(block)
    assert shapes.builds == 3


_number = (
    st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0, -0.0, 1.0, 2**53, 2**53 + 1, -(2**53) - 1, 5e-324, 1.7976931348623157e308])
)
_odd = st.none() | st.booleans() | st.just("text") | st.just(float("nan")) | st.just(float("inf"))


@settings(max_examples=80, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["rollout/step", "train/step", "eval/step"]),
            st.integers(min_value=0, max_value=2**60) | st.floats(allow_nan=False, allow_infinity=False),
            st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e", "f"]), _number | _odd, max_size=6),
        ),
        max_size=40,
    )
)
def test_any_records_decode_as_json_loads_decodes_them_once_their_shapes_are_learned(
    rows: list[tuple[str, Any, dict[str, Any]]],
) -> None:
    fresh = Shapes()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(metric_batch, "SHAPES", fresh)
        block = b"\n".join(line(float(i), key, step, **metrics) for i, (key, step, metrics) in enumerate(rows))
        first = _decoded(block)
        assert first == reference(block)
        assert _decoded(block) == first  # the second time, every shape seen is learned
