"""metrics.jsonl decoded into columns (msgspec, json.loads for what it refuses): the same records and the same
malformed-line notices as decoding each line with json.loads, worker processes or not."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.base.json_out import clean
from miles_tui.core.base.tail import TailFile
from miles_tui.core.telemetry import DashboardReader, MetricStore, export_metrics, write_metrics
from miles_tui.core.telemetry.metrics import line_templates
from miles_tui.core.telemetry.metrics.metric_batch import (
    MAX_DEPTH,
    MetricRow,
    check_value,
    decode_block,
    decode_metric_record,
)
from miles_tui.core.telemetry.metrics.metric_workers import MetricBlockDecoder


def _line(ts: Any, step_key: str, step: Any, **metrics: Any) -> bytes:
    return json.dumps({"ts": ts, "step_key": step_key, "step": step, "metrics": metrics}).encode()


def _checked(value: Any) -> MetricRow:
    row = decode_metric_record(value)
    for part in (row[0], row[2], row[3]):
        check_value(part)
    return row


def _reference(block: bytes) -> tuple[list[dict[str, Any]], list[int]]:
    """What decoding each line alone with json.loads (the tail's line rule) keeps, and the offsets it skips."""
    records, bad = [], []
    tail: TailFile[Any] = TailFile("x", _checked)
    rows, malformed = tail._decode_block(block, 0)
    for ts, step_key, step, metrics in rows:
        records.append({"ts": ts, "step_key": step_key, "step": step, "metrics": dict(metrics)})
    bad = [m.offset for m in malformed]
    return records, bad


def _rebuilt(store: MetricStore) -> list[dict[str, Any]]:
    out = []
    for i in range(len(store)):
        r = store.record(i)
        out.append({"ts": r.ts, "step_key": r.step_key, "step": r.step, "metrics": dict(r.metrics)})
    return out


def _same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    # json.dumps tells 1 from 1.0 and keeps NaN/Infinity: equal text means equal values with equal JSON types
    assert [json.dumps(r, sort_keys=True) for r in a] == [json.dumps(r, sort_keys=True) for r in b]


WEIRD = [
    _line(1.5, "train/step", 0, loss=0.5, grad=float("nan"), kl=float("-inf")),
    _line(2, "train/step", 1, loss=1, grad=float("inf"), kl=0.0),
    b"",
    b"   ",
    _line(3.0, "rollout/step", 0, reward=None, flag=True, name="run-a", hist=[1, 2.5, None], big=2**70),
    b'{"ts": 4.0, "step_key": "train/step", "step": 2, "metrics": {"loss": 1' + b"9" * 400 + b"}}",
    b'{"ts": 5.0, "step_key": "train/step", "step": 3, "metrics": {"deep": ' + b"[" * 100 + b"]" * 100 + b"}}",
    b'{"ts": 6.0, "step_key": "train/step", "step": 4, "metrics": {"loss": 0.25}',
    b'{"ts": "7", "step_key": "train/step", "step": 5, "metrics": {}}',
    b'{"ts": 8.0, "step_key": "train/step", "step": 6, "metrics": {"loss": 0.5, "late": 7}}',
    b'\xef\xbb\xbf{"ts": 9.0, "step_key": "s", "step": 7, "metrics": {}}',
    b'{"ts": 10.0, "step_key": "s", "step": 8, "metrics": {"bad": "\xff"}}',
    b'{"ts": 11.0, "step_key": "s", "step": 9, "metrics": {"sur": "\\ud800"}}',
    b'{"ts": 1' + b"0" * 400 + b', "step_key": "s", "step": 10, "metrics": {}}',
    b'{"ts": 12.0, "step_key": "s", "step": ' + b"[" * 70 + b"]" * 70 + b', "metrics": {}}',
    _line(13.0, "s", 11, mixed=3, other=2**53, more=-(2**53) - 1),
    _line(14.0, "s", 12, mixed=3.5, nested={"a": [float("nan")]}),
    b'{"ts": 15.0, "step_key": "s", "step": 13, "metrics": {"dup": 1, "dup": 2.5}, "extra": "ignored"}',
    b'{"ts":16e0,"step_key":"s","step":14.0,"metrics":{"x":1E2,"y":-0.0}}\r',
]


def test_the_block_decoder_keeps_what_json_loads_keeps_and_skips_the_same_lines() -> None:
    block = b"\n".join(WEIRD)
    batch, bad = decode_block(block, 0)
    store = MetricStore()
    store.append_batch(batch)
    expected, expected_bad = _reference(block)
    _same(_rebuilt(store), expected)
    assert [b.offset for b in bad] == expected_bad == [block.index(WEIRD[i]) for i in (5, 6, 7, 8, 10, 11, 13, 14)]
    reasons = {b.offset: b.reason for b in bad}
    assert "too big for a float64" in reasons[block.index(WEIRD[5])]  # a 400-digit integer: skipped, named
    assert f"nested deeper than {MAX_DEPTH}" in reasons[block.index(WEIRD[6])]
    assert "too big for a float64" in reasons[block.index(WEIRD[13])]
    assert bad[0].excerpt == WEIRD[5][:160]


def test_ints_floats_and_raw_values_keep_their_json_types_in_the_export() -> None:
    block = b"\n".join(WEIRD)
    store = MetricStore()
    store.append_batch(decode_block(block, 0)[0])
    out = export_metrics(store)["metrics"]
    assert out["loss"]["value"] == [0.5, 1, 0.5] and [type(v) for v in out["loss"]["value"]] == [float, int, float]
    assert out["mixed"]["value"] == [3, 3.5] and type(out["mixed"]["value"][0]) is int
    assert out["other"]["value"] == [2**53] and out["more"]["value"] == [-(2**53) - 1]
    assert out["big"]["value"] == [2**70] and out["flag"]["value"] == [True] and out["reward"]["value"] == [None]
    assert out["hist"]["value"] == [[1, 2.5, None]] and out["late"]["value"] == [7]
    assert math.isnan(out["grad"]["value"][0]) and out["grad"]["value"][1] == math.inf
    assert out["dup"]["value"] == [2.5] and out["x"]["value"] == [100.0] and out["x"]["step"] == [14.0]


def test_a_late_key_and_a_split_between_blocks_change_nothing() -> None:
    lines = [_line(float(i), "train/step", i, loss=i / 10, **({"late": i} if i >= 7 else {})) for i in range(12)]
    lines[5] = b'{"ts": 5.0, "step_key": "train/step", "step": 5, "metrics": {"loss": NaN}}'
    block = b"\n".join(lines)
    whole = MetricStore()
    whole.append_batch(decode_block(block, 0)[0])
    pieces = MetricStore()
    cut = block.index(lines[8]) - 1
    pieces.append_batch(decode_block(block[:cut], 0)[0])
    pieces.append_batch(decode_block(block[cut + 1 :], cut + 1)[0])
    _same(_rebuilt(whole), _rebuilt(pieces))
    _same(_rebuilt(whole), _reference(block)[0])
    assert whole.series("late") is not None and whole.series("late").record.tolist() == [7, 8, 9, 10, 11]  # type: ignore[union-attr]


_value = (
    st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.none()
    | st.booleans()
    | st.text(max_size=4)
    | st.lists(st.integers(min_value=-5, max_value=5), max_size=2)
)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["a/step", "b/step"]),
            st.integers(min_value=0, max_value=9) | st.floats(allow_nan=False, width=32) | st.none(),
            st.dictionaries(st.sampled_from(["k1", "k2", "k3", "k4"]), _value, max_size=4),
        ),
        max_size=30,
    )
)
def test_any_records_decode_as_json_loads_decodes_them(rows: list[tuple[str, Any, dict[str, Any]]]) -> None:
    block = b"\n".join(_line(float(i), key, step, **metrics) for i, (key, step, metrics) in enumerate(rows))
    store = MetricStore()
    batch, bad = decode_block(block, 0)
    store.append_batch(batch)
    expected, expected_bad = _reference(block)
    _same(_rebuilt(store), expected)
    assert [b.offset for b in bad] == expected_bad == []


@pytest.mark.parametrize("scanner", [False, True], ids=["worker processes", "scanner threads"])
def test_workers_decode_exactly_what_the_calling_thread_decodes(
    tmp_path: Path, scanner: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if scanner and not line_templates.AVAILABLE:
        pytest.skip("the compiled line scanner is not built here")
    monkeypatch.setattr(line_templates, "AVAILABLE", scanner)
    lines = [_line(float(i), "t", i, loss=i / 7, n=i, **({"late": 1.5} if i > 600 else {})) for i in range(900)]
    lines[100] = b"not json"
    lines[300] = b'{"ts": 1.0, "step_key": "s", "step": 0, "metrics": {"x": Infinity}}'
    block = b"\n".join(lines)
    here = MetricBlockDecoder(tmp_path / "m.jsonl")
    there = MetricBlockDecoder(tmp_path / "m.jsonl", workers=2, parallel_bytes=1, piece_bytes=4096)
    try:
        a, bad_a = here(block, 10)
        b, bad_b = there.decode_prefix(block + b"\n{partial", len(block), 10)
        assert (there._threads if scanner else there._pool) is not None  # it did start its workers
    finally:
        there.close()
    assert there._pool is None and there._threads is None
    sa, sb = MetricStore(), MetricStore()
    sa.append_batch(a)
    sb.append_batch(b)
    _same(_rebuilt(sa), _rebuilt(sb))
    assert [e.offset for e in bad_a] == [e.offset for e in bad_b] == [10 + block.index(b"not json")]
    assert str(bad_b[0].path) == str(tmp_path / "m.jsonl")


def test_the_reader_with_workers_follows_the_file_as_without(tmp_path: Path) -> None:
    dash = tmp_path / "dashboard"
    dash.mkdir()
    path = dash / "metrics.jsonl"
    path.write_bytes(b"\n".join(WEIRD) + b"\n" + _line(99.0, "s", 0, x=1)[:20])  # an unterminated last line
    plain, workers = DashboardReader(dash), DashboardReader(dash, parse_workers=2)
    workers._metric_stream.decoder.parallel_bytes = 1
    first = plain.poll(), workers.poll()
    assert [p.offset for p in first[0].problems] == [p.offset for p in first[1].problems]  # type: ignore[attr-defined]
    _same(_rebuilt(plain.metrics), _rebuilt(workers.metrics))
    assert len(plain.metrics) == len(_reference(b"\n".join(WEIRD))[0])  # the unterminated line is not counted
    with path.open("ab") as out:
        out.write(_line(99.0, "s", 0, x=1)[20:] + b"\n")
    held = len(plain.metrics)
    assert plain.poll().metric_records == workers.poll().metric_records == range(held, held + 1)
    _same(_rebuilt(plain.metrics), _rebuilt(workers.metrics))


def _streamed(store: MetricStore, keys: list[str] | None = None, x_key: str | None = None) -> str:
    out = io.BytesIO()
    write_metrics(store, keys, x_key, out)
    text = out.getvalue().decode()
    assert text.endswith("}\n")
    return json.dumps(json.loads(text))


def _document(store: MetricStore, keys: list[str] | None = None, x_key: str | None = None) -> str:
    return json.dumps(json.loads(json.dumps(clean(export_metrics(store, keys, x_key)), allow_nan=False)))


def test_the_streamed_export_is_the_export_document() -> None:
    store = MetricStore()
    store.append_batch(decode_block(b"\n".join(WEIRD), 0)[0])
    assert _streamed(store) == _document(store)  # every key: NaN/Infinity as null, ints as ints, raw values
    assert _streamed(store, ["loss", "nope", "loss", "hist"]) == _document(store, ["loss", "nope", "loss", "hist"])
    assert _streamed(store, ["loss", "big"], "s") == _document(store, ["loss", "big"], "s")
    assert json.loads(_streamed(store))["metrics"]["grad"]["value"] == [None, None]
    empty = MetricStore()
    assert _streamed(empty) == _document(empty) == '{"metrics": {}}'


# -- NaN/Infinity literals decoded by msgspec (each literal read as null, then set back) -----------------------

NONFINITE_LINES = [
    b'{"ts":1.5,"step_key":"train/step","step":3,"metrics":{"loss":NaN,"grad":Infinity,"kl":-Infinity,"n":2}}',
    b'{"ts": 2.0, "step_key": "train/step", "step": 4, "metrics": {"loss" : NaN, "grad":  -Infinity}}',
    b'{"ts":3,"step_key":"s","step":5,"metrics":{"NaN":NaN}}',  # the literal in a key too: json.loads decides
    b'{"ts":4,"step_key":"NaN","step":6,"metrics":{"a":1}}',  # only in a string: msgspec refuses, json.loads keeps
    b'{"ts":5,"step_key":"s","step":7,"metrics":{"a":1,"b":NaN,"a":Infinity}}',  # a duplicate key
    b'{"ts":6,"step_key":"s","step":8,"metrics":{"a":NaN,"a":-Infinity}}',
    b'{"ts":7,"step_key":"s","step":[NaN],"metrics":{"a":Infinity}}',  # one in the step
    b'{"ts":8,"step_key":"s","step":9,"metrics":{"a":NaN},"extra":[Infinity]}',  # one in an ignored field
    b'{"ts":9,"step_key":"s","step":10,"metrics":{"a":NaN,"b":null}}',  # a null of its own
    b'{"ts":10,"step_key":"s","step":11,"metrics":{"a":1Infinity}}',  # glued: invalid either way
    b'{"ts":11,"step_key":"s","step":12,"metrics":{"a":Infinity1}}',
    b'{"ts":12,"step_key":"s","step":13,"metrics":{"a":-NaN}}',
    b'{"ts":13,"step_key":"s","step":14,"metrics":{"a\\u0041":NaN,"b":Infinity}}',  # an escape: json.loads
    b'{"ts":14,"step_key":"s","step":15,"metrics":{"\\NaN":1}}',  # invalid escape
    b'{"ts":NaN,"step_key":"s","step":16,"metrics":{"a":1}}',
    b'{"ts":15,"step_key":"x","step":17,"metrics":{"x":NaN,",":Infinity}}',
    b'{"ts":16,"step_key":"s","step":18,"metrics":{"a":NaN}}NaN',
    b'{"ts":17,"step_key":"s","step":19,"metrics":{"\xc3\xa9":NaN,"b":[NaN]}}',
]


def test_nan_and_infinity_literals_decode_as_json_loads_decodes_them() -> None:
    block = b"\n".join(NONFINITE_LINES)
    batch, bad = decode_block(block, 0)
    store = MetricStore()
    store.append_batch(batch)
    expected, expected_bad = _reference(block)
    _same(_rebuilt(store), expected)
    assert [b.offset for b in bad] == expected_bad


def test_lines_with_nan_literals_are_not_handed_to_json_loads(monkeypatch: Any) -> None:
    """A diverged run writes NaN/Infinity on every line: json.loads on each would cost three times msgspec."""
    calls: list[str] = []
    loads = json.loads
    monkeypatch.setattr(json, "loads", lambda text, *a, **k: calls.append(text) or loads(text, *a, **k))
    lines = [NONFINITE_LINES[0].replace(b'"step":3', b'"step":%d' % i) for i in range(50)] + NONFINITE_LINES[1:2]
    batch, bad = decode_block(b"\n".join(lines), 0)
    assert len(batch) == 51 and not bad
    assert calls == []
    assert math.isnan(batch[0][3]["loss"]) and batch[0][3]["grad"] == math.inf and batch[0][3]["kl"] == -math.inf
    assert batch[0][3]["n"] == 2 and type(batch[0][3]["n"]) is int


def _raw_key(key: str) -> str:
    """The key as JSON, except that a key holding a backslash is written raw (an escape, or an invalid one)."""
    return f'"{key}"' if "\\" in key else json.dumps(key)


_key = st.sampled_from(["a", "b", "NaN", "Infinity", "-Infinity", "null", "x,y", ",", "é", 'q"', "a\\", "\\u0041"])
_literal = st.sampled_from(["NaN", "Infinity", "-Infinity", "null", "1", "2.5", "-0.0", "1e400", '"NaN"', "[NaN]"])
_space = st.sampled_from(["", " ", "  ", "\t"])


@settings(max_examples=300, deadline=None)
@given(
    members=st.lists(st.tuples(_key, _space, _literal), max_size=6),
    step=_literal,
    step_key=_key,
    insert=st.none() | st.tuples(st.integers(min_value=0, max_value=200), st.sampled_from(["NaN", "Infinity", "-"])),
)
def test_any_line_with_literals_decodes_as_json_loads_decodes_it(
    members: list[tuple[str, str, str]], step: str, step_key: str, insert: tuple[int, str] | None
) -> None:
    """Keys that hold a literal or a quote or a backslash, duplicate keys, literals in strings, in the step,
    glued to other tokens: whatever the line, the record (or the refusal) is json.loads'."""
    body = ",".join(f"{_raw_key(key)}{space}:{space}{value}" for key, space, value in members)
    line = f'{{"ts":1.5,"step_key":{json.dumps(step_key)},"step":{step},"metrics":{{{body}}}}}'
    if insert is not None:
        at = min(insert[0], len(line))
        line = line[:at] + insert[1] + line[at:]
    block = line.encode()
    batch, bad = decode_block(block, 0)
    store = MetricStore()
    store.append_batch(batch)
    expected, expected_bad = _reference(block)
    _same(_rebuilt(store), expected)
    assert [b.offset for b in bad] == expected_bad


def test_a_reader_appending_behind_holds_what_a_plain_reader_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from miles_tui.core.telemetry.metrics import metric_stream

    monkeypatch.setattr(metric_stream, "LONG_BLOCK_BYTES", 1)
    dash = tmp_path / "dashboard"
    dash.mkdir()
    lines = [_line(float(i), "t", i, loss=i / 7, **({"late": i} if i > 300 else {})) for i in range(600)]
    (dash / "metrics.jsonl").write_bytes(b"\n".join([*lines, *WEIRD]) + b"\n" + lines[0][:30])
    plain = DashboardReader(dash, parse_workers=2)
    behind = DashboardReader(dash, parse_workers=2, headless=True)
    behind._metric_stream.tail._block_size = 4096  # many blocks: each appended while the next is decoded
    appended: list[int] = []
    real = behind._metric_stream.store.append_batch
    monkeypatch.setattr(
        behind._metric_stream.store, "append_batch", lambda b, a=1.0: appended.append(len(b)) or real(b, a)
    )
    first = plain.poll(), behind.poll()
    assert len(appended) > 10 and sum(appended) == len(behind.metrics)
    assert behind._metric_stream._appender is None  # the appender stops with the poll
    assert [p.offset for p in first[0].problems] == [p.offset for p in first[1].problems]  # type: ignore[attr-defined]
    _same(_rebuilt(plain.metrics), _rebuilt(behind.metrics))


@pytest.mark.parametrize("headless", [False, True])
def test_a_long_read_beside_a_ui_pauses_between_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, headless: bool
) -> None:
    from miles_tui.core.base import pacing
    from miles_tui.core.telemetry.metrics import metric_stream

    monkeypatch.setattr(metric_stream, "LONG_BLOCK_BYTES", 1)
    pauses: list[float] = []
    monkeypatch.setattr(pacing.time, "sleep", pauses.append)
    dash = tmp_path / "dashboard"
    dash.mkdir()
    (dash / "metrics.jsonl").write_bytes(b"\n".join(_line(float(i), "t", i, loss=i / 7) for i in range(400)) + b"\n")
    reader = DashboardReader(dash, parse_workers=2, headless=headless)
    reader._metric_stream.tail._block_size = 4096
    reader.poll()
    assert len(reader.metrics) == 400
    if headless:
        assert pauses == []  # no UI to share the GIL with
    else:
        assert len(pauses) > 5 and all(0 <= p <= metric_stream.YIELD_MAX for p in pauses)  # one after each block
