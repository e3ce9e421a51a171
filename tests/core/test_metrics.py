"""`export --metrics` and the columnar metric store: the golden truth's series, the step-key rules
of cli.md, and raw values surviving the columns."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.telemetry import MetricStore, export_metrics
from miles_tui.core.telemetry.metrics.metric_batch import decode_metric_record

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _record(ts: float, step_key: str, step: int, **metrics: Any) -> dict[str, Any]:
    return {"ts": ts, "step_key": step_key, "step": step, "metrics": metrics}


def test_export_matches_the_golden_metric_series() -> None:
    truth = json.loads((GOLDEN / "live_streams.truth.json").read_text())["dashboard"]
    lines = (GOLDEN / "live_streams" / "dashboard" / "metrics.jsonl").read_text().splitlines()
    store = MetricStore.from_records(json.loads(line) for line in lines)
    series = truth["metric_series"]
    for exported in (export_metrics(store, list(series)), export_metrics(store)):
        for key, expected in series.items():
            got = exported["metrics"][key]
            assert got["x_key"] == expected["x_key"]  # without --x: the step key used most often
            assert got["step"] == expected["x"]
            assert got["value"] == pytest.approx(expected["y"], abs=1e-5)
            assert got["ts"] == pytest.approx(expected["ts"], abs=1e-5)
    assert list(export_metrics(store)["metrics"]) == truth["metric_keys"]
    assert list(store.step_keys()) == truth["step_keys"]
    x = export_metrics(store, ["train/loss"], x_key="rollout/step")["metrics"]["train/loss"]
    assert x == {"x_key": "rollout/step", "step": [], "value": [], "ts": []}


def test_only_records_of_the_step_key_count_and_the_most_used_one_is_the_default() -> None:
    store = MetricStore.from_records(
        [
            _record(1.0, "train/step", 0, loss=0.5, shared=1.0),
            _record(2.0, "rollout/step", 0, shared=2.0, reward=0.1),
            _record(3.0, "train/step", 1, loss=0.4),
            _record(4.0, "rollout/step", 1, shared=3.0),
            _record(5.0, "eval/step", 1, shared=4.0),
        ]
    )
    out = export_metrics(store)["metrics"]
    assert list(out) == ["loss", "reward", "shared"]
    assert out["loss"] == {"x_key": "train/step", "step": [0, 1], "value": [0.5, 0.4], "ts": [1.0, 3.0]}
    assert out["shared"] == {"x_key": "rollout/step", "step": [0, 1], "value": [2.0, 3.0], "ts": [2.0, 4.0]}
    forced = export_metrics(store, ["shared", "nope"], x_key="eval/step")["metrics"]
    assert forced["shared"] == {"x_key": "eval/step", "step": [1], "value": [4.0], "ts": [5.0]}
    assert forced["nope"] == {"x_key": "eval/step", "step": [], "value": [], "ts": []}
    assert export_metrics(store, ["nope"])["metrics"]["nope"] == {"x_key": None, "step": [], "value": [], "ts": []}
    assert store.step_key_counts("shared") == {"train/step": 1, "rollout/step": 2, "eval/step": 1}


def test_ties_go_to_the_alphabetically_first_step_key() -> None:
    store = MetricStore.from_records([_record(1, "z/step", 0, m=1.0), _record(2, "a/step", 0, m=2.0)])
    assert store.default_x_key("m") == "a/step"
    assert export_metrics(store, ["m"])["metrics"]["m"]["value"] == [2.0]


def test_series_are_numpy_arrays_from_a_record_on() -> None:
    store = MetricStore.from_records(
        [_record(float(i), "s", i, v=i / 2 if i != 3 else None) for i in range(6)] + [_record(9.0, "t", 0, v=1.0)]
    )
    series = store.series("v")
    assert series is not None and series.x_key == "s"
    assert series.record.tolist() == [0, 1, 2, 3, 4, 5]
    assert np.isnan(series.value[3]) and series.value[4] == 2.0  # not a number: NaN for plotting
    later = store.series("v", start=4)
    assert later is not None and later.step.tolist() == [4.0, 5.0] and later.ts.tolist() == [4.0, 5.0]
    assert store.series("v", x_key="nope") is None and store.series("nope") is None
    assert store.point_counts() == {"v": 7} and store.time_range() == (0.0, 9.0)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ([1], "expected a JSON object"),
        ({"step_key": "s", "step": 0, "metrics": {}}, "'ts'"),
        ({"ts": "x", "step_key": "s", "step": 0, "metrics": {}}, "not a number"),
        ({"ts": True, "step_key": "s", "step": 0, "metrics": {}}, "not a number"),
        ({"ts": 1, "step_key": 3, "step": 0, "metrics": {}}, "step_key"),
        ({"ts": 1, "step_key": "s", "step": 0, "metrics": []}, "metrics"),
    ],
)
def test_invalid_records_are_refused(value: Any, error: str) -> None:
    with pytest.raises((ValueError, KeyError), match=error):
        decode_metric_record(value)


_raw = (
    st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.none()
    | st.booleans()
    | st.text(max_size=5)
    | st.lists(st.integers(), max_size=2)
)


@settings(max_examples=80, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["a/step", "b/step"]),
            st.integers(min_value=0, max_value=10) | st.floats(allow_nan=False, width=32) | st.none(),
            st.dictionaries(st.sampled_from(["k1", "k2", "k3"]), _raw, max_size=3),
        ),
        max_size=15,
    )
)
def test_raw_values_survive_the_columns(rows: list[tuple[str, Any, dict[str, Any]]]) -> None:
    records = [_record(float(i), key, step, **metrics) for i, (key, step, metrics) in enumerate(rows)]
    store = MetricStore.from_records(records)
    assert len(store) == len(records)
    for i, original in enumerate(records):
        rebuilt = store.record(i)
        got = {"ts": rebuilt.ts, "step_key": rebuilt.step_key, "step": rebuilt.step, "metrics": dict(rebuilt.metrics)}
        assert json.dumps(got, sort_keys=True) == json.dumps(original, sort_keys=True)  # 1 and 1.0 differ here
    for name, column in export_metrics(store)["metrics"].items():
        x = column["x_key"]
        expected = [r["metrics"][name] for r in records if r["step_key"] == x and name in r["metrics"]]
        assert json.dumps(column["value"]) == json.dumps(expected)
        assert all(type(a) is type(b) for a, b in zip(column["value"], expected, strict=True))


def test_mixed_int_and_float_column_keeps_each_type() -> None:
    store = MetricStore.from_records([_record(0, "s", i, v=v) for i, v in enumerate([1, 2, 2.5, 3, math.inf, 2**60])])
    values = export_metrics(store)["metrics"]["v"]["value"]
    assert values == [1, 2, 2.5, 3, math.inf, 2**60]
    assert [type(v) for v in values] == [int, int, float, int, float, int]
