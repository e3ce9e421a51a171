"""The compiled line scanner: lines of a learned template read straight into numbers, and what comes out is still
exactly what json.loads gives for each line, whatever the line, whatever the number."""

from __future__ import annotations

import json
import math
import os
import random
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.telemetry.metrics import line_templates
from miles_tui.core.telemetry.metrics.line_templates import MAX_SLOTS, Buffers, Templates, scan_decode
from tests.core.metric_lines import as_text, line, reference

pytestmark = pytest.mark.skipif(not line_templates.AVAILABLE, reason="the compiled line scanner is not built here")


def _compact(ts: Any, step_key: str, step: Any, **metrics: Any) -> bytes:
    record = {"ts": ts, "step_key": step_key, "step": step, "metrics": metrics}
    return json.dumps(record, separators=(",", ":")).encode()


def _scanned(block: bytes, templates: Templates, **options: Any) -> tuple[list[str], list[int]]:
    return as_text(*scan_decode(block, 0, templates=templates, **options))


def _matched(block: bytes, templates: Templates) -> int:
    """How many lines of ``block`` a learned template matches."""
    found = line_templates._scan_all(block, 0, len(block), templates.known, Buffers())
    return int((found.kinds >= 0).sum())


TEACHERS = [
    line(0.5, "train/step", 0, loss=0.25, n=3, lr=1e-6),
    _compact(0.5, "rollout/step", 0, reward=0.5, len=7),
]

LINES = [
    line(1.5, "train/step", 1, loss=0.48677725304935715, n=4, lr=1e-6),  # 17 significant digits
    line(2, "train/step", 2, loss=1, n=2**53 + 1, lr=-0.0),  # an int beyond 15 digits: the general way
    line(3.0, "train/step", 3.0, loss=1.0, n=0, lr=5e-324),  # 1.0 stays a float, 0 an int; a subnormal
    line(4.0, "train/step", -0.0, loss=float("nan"), n=-1, lr=float("-inf")),
    line(5.0, "train/step", 5, loss=None, n=999999999999999, lr=1.7976931348623157e308),
    line(None, "train/step", 6, loss=1.0, n=1, lr=1.0),  # a null ts: malformed, named by the general way
    line(7.0, "train/step", None, loss=0.1, n=2, lr=0.2),  # a null step is a step
    b'{"ts": 8.0, "step_key": "train/step", "step": 8, "metrics": {"loss": 1e400, "n": 1, "lr": 1E-2}}',
    b'{"ts": 9.0, "step_key": "train/step", "step": 9, "metrics": {"loss": 0.1, "n": 01, "lr": 1}}',  # bad JSON
    b'{"ts": 10.0, "step_key": "train/step", "step": 10, "metrics": {"loss": 1., "n": 1, "lr": 1}}',
    b'{"ts": 11.0, "step_key": "train/step", "step": 11, "metrics": {"loss": .5, "n": 1, "lr": 1}}',
    b'{"ts": 12.0, "step_key": "train/step", "step": 12, "metrics": {"loss": -NaN, "n": 1, "lr": 1}}',
    b'{"ts": 13.0, "step_key": "train/step", "step": 13, "metrics": {"loss": +1, "n": 1, "lr": 1}}',
    b'{"ts": 14.0, "step_key": "train/step", "step": 14, "metrics": {"loss": 1e, "n": 1, "lr": 1}}',
    b'{"ts": 15.0, "step_key": "train/step", "step": 15, "metrics": {"loss": true, "n": 1, "lr": 1}}',
    b'{"ts": 16.0, "step_key": "train/step", "step": 16, "metrics": {"loss": "1", "n": 1, "lr": 1}}',
    b'{"ts": 17.0, "step_key": "train/step", "step": 17, "metrics": {"loss": 1, "n": 1, "lr": 1, "lr": 2}}',
    b'{"ts": 18.0, "step_key": "train/step", "step": 18, "metrics": {"loss": 1, "n": 1, "lr": 1}} ',
    b'{"ts": 19.0, "step_key": "train/step", "step": 19, "metrics": {"loss": 1, "n": 1, "lr": 1}}\r',
    b'{"ts": 20.0, "step_key": "train/step", "step": 20, "metrics": {"loss": 1, "n": 1,"lr": 1}}',
    b'{"ts": 21.0, "step_key": "train/step", "step": 21, "metrics": {"loss": 1, "n": 1, "lr": 1}, "x": 1}',
    b'{"ts": 22.0, "step_key": "train/step", "step": 22, "metrics": {"loss": 1, "n": 1}}',  # a shape of its own
    b'{"ts": 23.0, "step_key": "train/step", "step": 23, "metrics": {"lo\\u0073s": 1, "n": 1, "lr": 1}}',
    b'{"ts": 24.0, "step_key": "train/step", "step": 24, "metrics": {"loss": 1' + b"0" * 400 + b', "n": 1, "lr": 1}}',
    b'{"ts": 25.0, "step_key": "train/step", "step": 25, "metrics": {"loss": 0.' + b"1" * 80 + b', "n": 1, "lr": 1}}',
    b'{"ts": 26.0, "step_key": "train/step", "step": 26, "metrics": {"loss": 1e-99999, "n": 1, "lr": 1e99999}}',
    b'{"ts": 27.0, "step_key": "train/step", "step": 27, "metrics": {"loss": \xd9\xa1, "n": 1, "lr": 1}}',
    b'{"ts":28.0,"step_key":"rollout/step","step":28,"metrics":{"reward":Infinity,"len":-Infinity}}',
    b'{"ts":29.0,"step_key":"rollout/step","step":29,"metrics":{"reward":null,"len":9007199254740993.0}}',
    b'{"ts":30.0,"step_key":"rollout/step","step":30,"metrics":{"reward":0.1,"len":7}}{"ts":31.0}',
    b'{"ts":32.0,"step_key":"rollout/step","step":32,"metrics":{"reward":0.1,"len":7',
    b"",
    b"garbage",
]


def test_lines_of_a_learned_template_decode_as_json_loads_decodes_them() -> None:
    templates = Templates()
    teach = b"\n".join(TEACHERS)
    assert _scanned(teach, templates) == reference(teach)
    assert len(templates.known) == 2  # one template per shape, json.dumps' default separators or compact
    block = b"\n".join(LINES)
    assert _matched(block, templates) == 10  # the scanner read lines 0, 2-7, 25, 27, 28; the rest are handed on
    assert _scanned(block, templates) == reference(block)
    assert _scanned(block, templates) == reference(block)  # again, with what the first pass taught


def test_parts_scanned_in_threads_give_what_one_pass_gives() -> None:
    rng = random.Random(7)
    lines = [
        _compact(float(i), "train/step", i, loss=rng.random(), n=rng.randrange(100), **({"late": 1} if i > 500 else {}))
        if i % 3
        else line(float(i), "rollout/step", i, reward=rng.choice([0.5, None, float("nan")]))
        for i in range(1000)
    ]
    lines[400] = b"not json"
    block = b"\n".join(lines)
    one, threads = Templates(), Templates()
    with ThreadPoolExecutor(3) as pool:
        assert _scanned(block, threads, parts=7, scans=pool.map) == _scanned(block, one) == reference(block)
    assert {t.slots for t in one.known} == {t.slots for t in threads.known}
    assert _matched(block, one) == 999  # the late key's shape was learned on the way, and scanned again with it


def _same_number(token: str, value: float, flag: int) -> bool:
    expected = json.loads(token)
    if expected is None:
        return flag == 2 and math.isnan(value)
    return flag == (type(expected) is int) and struct.pack("<d", float(expected)) == struct.pack("<d", value)


def _scan_tokens(tokens: list[str]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    block = "\n".join(f"[{t}]" for t in tokens).encode()
    template = line_templates.Template((b"[", b"]"), "s", ("x",), 0, 0)
    found = line_templates._scan_all(block, 0, len(block), (template,), Buffers(4, 4))
    return found.kinds, found.values, found.flags


def test_a_quarter_million_numbers_read_as_float_reads_them() -> None:
    """Random numbers of every kind the fast paths take or hand on: up to 19 and more digits, exponents near
    and past their limits, and exact midpoints between two doubles (where rounding twice would go wrong)."""
    rng = random.Random(2026)
    tokens = []
    for _ in range(250_000):
        kind = rng.randrange(8)
        if kind == 0:
            token = repr(rng.random() * 10 ** rng.randint(-30, 30))
        elif kind == 1:
            token = repr(rng.random() / 10 ** rng.randint(0, 5))
        elif kind == 2:
            token = f"{rng.randint(0, 10**19)}.{rng.randint(0, 10 ** rng.randint(0, 20))}"
        elif kind == 3:
            token = f"{rng.randint(1, 10**19)}e{rng.randint(-40, 40)}"
        elif kind == 4:
            token = str(rng.randint(0, 10**15 - 1))
        elif kind == 5:
            token = repr(float(rng.randint(0, 2**60)))
        else:  # a midpoint between two doubles, in decimal: exactly representable in a long double
            mantissa, exponent = rng.randint(2**52, 2**53), rng.randint(-40, 20)
            token = repr(mantissa + 0.5) if kind == 6 else str((2 * mantissa + 1) * 5 ** max(0, -exponent))
            token += "" if kind == 6 else f"e{min(0, exponent)}"
        tokens.append(("-" if rng.random() < 0.3 else "") + token)
    kinds, values, flags = _scan_tokens(tokens)
    assert (kinds == 0).all()
    wrong = [t for t, v, f in zip(tokens, values.tolist(), flags.tolist(), strict=True) if not _same_number(t, v, f)]
    assert wrong == []


_GRAMMAR = r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,25})?([eE][-+]?[0-9]{1,5})?"
_TOKEN = st.from_regex(_GRAMMAR, fullmatch=True) | st.sampled_from(
    ["NaN", "Infinity", "-Infinity", "null", "-0", "0e0", "1E+2", "9007199254740993", "999999999999999"]
)


@settings(max_examples=300, deadline=None)
@given(tokens=st.lists(_TOKEN, min_size=1, max_size=30))
def test_any_json_number_reads_as_json_loads_reads_it_or_is_handed_on(tokens: list[str]) -> None:
    kinds, values, flags = _scan_tokens(tokens)
    at = 0
    for token, kind in zip(tokens, kinds.tolist(), strict=True):
        if kind < 0:  # handed to the general decoder: only integers of 16 digits and more, and tokens over 63 bytes
            assert len(token) > 63 or ("." not in token and "e" not in token.lower() and len(token.lstrip("-")) > 15)
            continue
        assert _same_number(token, values[at], flags[at]), token
        at += 1


@pytest.mark.parametrize(
    "token",
    ["01", "1.", ".5", "+1", "1e", "1e+", "-", "--1", "0x10", "1_0", "\u0661", "nan", "inf", "-NaN", "NULL", "1 ", " "],
)
def test_what_is_not_a_json_number_matches_nothing(token: str) -> None:
    kinds, values, _ = _scan_tokens([token])
    assert kinds.tolist() == [-1] and len(values) == 0


def test_the_scanner_checks_its_buffers_and_never_reads_past_the_end() -> None:
    scan = line_templates._scan
    assert scan is not None
    template = ((b"[", b"]"),)
    out = (np.empty(4, np.int32), np.empty(4, np.int64), np.empty(8), np.empty(8, np.uint8))
    assert scan(b"[1]\n[2]", 0, 7, template, *out) == (2, 2, 8)
    assert scan(b"[1]\n[2]", 0, 6, template, *out)[:2] == (2, 1)  # the cut line "[2" matches nothing
    assert out[0][:2].tolist() == [0, -1]
    assert scan(b"[1]\n[2]\n[3]", 0, 11, template, out[0][:1], out[1][:1], *out[2:]) == (1, 1, 4)  # kinds full
    assert scan(b"[1]\n[2]", 0, 7, template, *out[:2], out[2][:1], out[3][:1]) == (1, 1, 4)  # values full
    for bad in [
        (b"[1]", 0, 4, template, *out),  # hi past the end
        (b"[1]", 2, 1, template, *out),
        (b"[1]", 0, 3, ((b"[", b"", b"]"),), *out),  # an empty inner segment
        (b"[1]", 0, 3, ((),), *out),
        (b"[1]", 0, 3, template, np.empty(4, np.int64), *out[1:]),  # kinds of the wrong item size
        (b"[1]", 0, 3, template, *out[:2], out[2][::2], out[3]),  # not contiguous
    ]:
        with pytest.raises((ValueError, TypeError, BufferError)):
            scan(*bad)


def test_learning_is_bounded_and_skips_what_it_cannot_read_back(monkeypatch: pytest.MonkeyPatch) -> None:
    templates = Templates()
    assert templates.learn(line(1.0, "s", 1, x=True)) is None  # a bool: never learned
    assert templates.learn(line(1.0, "s", 1, x=2**60)) is None  # an int the scanner hands on
    assert templates.learn(line(None, "s", 1, x=1)) is None  # a null ts
    assert templates.learn(b'{"ts": 1.0, "step_key": "s", "step": 1, "metrics": {"x": 1}, "extra": 2}') is None
    assert templates.learn(b'{"ts": 1.0, "step_key": "s", "step": 1, "metrics": {"\\u0078": 1}}') is None
    wide = line(1.0, "s", 1, **{f"k{i}": i for i in range(MAX_SLOTS - 1)})
    assert templates.learn(wide) is None and templates.known == ()
    monkeypatch.setattr(line_templates, "MAX_TEMPLATES", 2)
    lines = [line(float(i), "s", i, **{f"new{i}": i}) for i in range(6)]  # every line a new shape
    block = b"\n".join(lines)
    assert _scanned(block, templates) == reference(block)
    assert len(templates.known) == 2
    monkeypatch.setattr(line_templates, "MAX_ATTEMPTS", templates.attempts)
    assert templates.learn(line(1.0, "t", 1, y=1)) is None  # out of tries


_value = (
    st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0, -0.0, 1.0, 10**15 - 1, 10**15, 5e-324, 1.7976931348623157e308])
    | st.none()
    | st.booleans()
    | st.just("text")
)


@settings(max_examples=80, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["rollout/step", "train/step"]),
            st.integers(min_value=0, max_value=2**60) | st.floats() | st.none(),
            st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), _value, max_size=4),
            st.booleans(),
        ),
        max_size=40,
    )
)
def test_any_records_decode_as_json_loads_decodes_them_once_their_templates_are_learned(
    rows: list[tuple[str, Any, dict[str, Any], bool]],
) -> None:
    templates = Templates()
    block = b"\n".join(
        (_compact if compact else line)(float(i), key, step, **metrics)
        for i, (key, step, metrics, compact) in enumerate(rows)
    )
    first = _scanned(block, templates)
    assert first == reference(block)
    assert _scanned(block, templates, parts=3) == first  # the second time, what the first pass taught is used


_GOOD = _compact(1787223008.3348122, "rollout/step", 12, reward=0.8584684590486795, n=3085, kl=-1.5e-06, x=None)


@settings(max_examples=400, deadline=None)
@given(
    edits=st.lists(
        st.tuples(st.integers(min_value=0, max_value=len(_GOOD)), st.binary(max_size=3), st.integers(0, 3)),
        min_size=1,
        max_size=4,
    ),
    cut=st.integers(min_value=0, max_value=len(_GOOD) + 8),
)
def test_damaged_lines_of_a_learned_template_decode_as_json_loads_decodes_them(
    edits: list[tuple[int, bytes, int]], cut: int
) -> None:
    """Bytes inserted, replaced or deleted anywhere in a line the scanner knows, and the line cut short: whatever
    the scanner does with it, the result is json.loads'."""
    templates = Templates()
    _scanned(_GOOD, templates)
    assert len(templates.known) == 1
    line = bytearray(_GOOD)
    for at, data, dropped in edits:
        line[at : at + dropped] = data
    block = b"\n".join([_GOOD, bytes(line)[:cut], _GOOD])
    assert _scanned(block, templates) == reference(block)


def test_miles_tui_no_scanner_turns_the_scanner_off() -> None:
    code = "from miles_tui.core.telemetry.metrics import line_templates as t; print(t.AVAILABLE)"
    env = {**os.environ, "MILES_TUI_NO_SCANNER": "1"}
    found = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert found.stdout == "False\n"
