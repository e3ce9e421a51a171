"""``export --phases/--gpu/--engines``: the records of a window, as the files have them, reading only the hours
the window touches; ``--since/--until`` as Unix seconds, ISO dates and spans back from the newest record."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from miles_tui.core.base.export_window import TimeBound, parse_time
from miles_tui.core.commands.telemetry_export import FIELDS, read_window
from miles_tui.core.synth.dump_files import append_jsonl, write_json
from miles_tui.tui.cli import main

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
FLAGS = {"phases": "--phases", "gpu_util": "--gpu", "engine_series": "--engines"}


def _run(tmp_path: Path) -> Path:
    root = tmp_path / "live_engines"
    shutil.copytree(GOLDEN / "live_engines", root)
    return root


def _lines(root: Path, stream: str) -> list[dict[str, Any]]:
    """Every record of the stream, read independently of the reader (json, file by file)."""
    out = []
    for path in sorted((root / "dashboard" / stream).glob("*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return out


def _time(stream: str, record: dict[str, Any]) -> float:
    if stream == "phases":
        return float(record["t0"] if record["t1"] == -1 else record["t1"])
    return float(record["ts"])


def _export(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["export", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- time bounds ----------------------------------------------------------------------------------


def test_time_bounds_in_every_accepted_form() -> None:
    assert parse_time("1787240020") == TimeBound(seconds=1787240020.0)
    assert parse_time("1787240020.5") == TimeBound(seconds=1787240020.5)
    day = datetime(2026, 8, 20, tzinfo=timezone.utc).timestamp()
    assert parse_time("2026-08-20") == TimeBound(seconds=day)
    assert parse_time("2026-08-20T15:30") == TimeBound(seconds=day + 15.5 * 3600)  # no offset: UTC
    assert parse_time("2026-08-20 15:30:00Z") == TimeBound(seconds=day + 15.5 * 3600)
    assert parse_time("2026-08-20T17:30+02:00") == TimeBound(seconds=day + 15.5 * 3600)
    assert parse_time("30m") == TimeBound(back=1800.0) and parse_time("2h") == TimeBound(back=7200.0)
    assert parse_time("1d") == TimeBound(back=86400.0) and parse_time("1.5h") == TimeBound(back=5400.0)
    assert parse_time("90s").at(1000.0) == 910.0 and parse_time("90s").at(None) is None


@pytest.mark.parametrize("text", ["yesterday", "30 minutes", "-5", "2h ago", "2026-13-01", "", "nan"])
def test_anything_else_is_refused_saying_what_is_accepted(text: str) -> None:
    with pytest.raises(ValueError, match="Unix seconds, an ISO date"):
        parse_time(text)


# --- the window ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", list(FIELDS))
@pytest.mark.parametrize(
    "window", [(None, None), ("30m", None), ("1787241000", "1787242000"), ("2026-08-20T16:00", None)]
)
def test_the_window_holds_exactly_the_records_whose_time_is_in_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stream: str, window: tuple[str | None, str | None]
) -> None:
    root = _run(tmp_path)
    records = _lines(root, stream)
    newest = max(_time(stream, r) for r in records)
    since, until = (None if w is None else parse_time(w).at(newest) for w in window)
    expected = [
        r
        for r in records
        if (since is None or _time(stream, r) >= since) and (until is None or _time(stream, r) <= until)
    ]
    args = [str(root), FLAGS[stream]]
    args += [] if window[0] is None else ["--since", window[0]]
    args += [] if window[1] is None else ["--until", window[1]]
    code, out, _ = _export(capsys, *args)
    assert code == 0
    document = json.loads(out)
    assert document["stream"] == stream and document["fields"] == list(FIELDS[stream])
    assert document["since"] == since and document["until"] == until
    assert document["count"] == len(expected) > 0
    for field in FIELDS[stream]:
        assert document["columns"][field] == [r.get(field) for r in expected], field


def test_csv_is_the_same_records_and_formula_safe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _run(tmp_path)
    hostile = {"ts": 1787243000.0, "node": '=HYPERLINK("http://x")', "gpu": 0, "util": -3, "mem_mb": 1, "power_w": 2}
    append_jsonl(root / "dashboard" / "gpu_util" / "20260820_16.jsonl", [hostile])
    _, out, _ = _export(capsys, str(root), "--gpu", "--since", "1787242990")
    document = json.loads(out)
    _, text, _ = _export(capsys, str(root), "--gpu", "--since", "1787242990", "--format", "csv")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == list(FIELDS["gpu_util"]) and len(rows) == document["count"] + 1
    cell = rows[-1][1]
    assert cell.startswith("'=HYPERLINK") and rows[-1][3] == "-3"  # a formula is inert, a negative number stays
    _, text, _ = _export(capsys, str(root), "--engines", "--since", "1m", "--format", "csv")
    assert next(csv.reader(io.StringIO(text))) == list(FIELDS["engine_series"])
    assert ",{}," in text  # labels as JSON text


def _hours(root: Path, count: int) -> float:
    """``count`` hourly gpu_util partitions of one sample a minute; returns the newest record's time."""
    start = 1_787_000_400.0  # an hour's start
    for hour in range(count):
        base = start + hour * 3600
        name = datetime.fromtimestamp(base, timezone.utc).strftime("%Y%m%d_%H")
        records = [
            {"ts": base + 60 * m, "node": "n0", "gpu": 0, "util": m, "mem_mb": 1, "power_w": 2} for m in range(60)
        ]
        append_jsonl(root / "dashboard" / "gpu_util" / f"{name}.jsonl", records)
    write_json(root / "dashboard" / "meta.json", {"run_name": "hours", "start_ts": start, "args": {}})
    return start + (count - 1) * 3600 + 59 * 60


@pytest.mark.parametrize("count", [3, 72])
def test_only_the_hours_the_window_touches_are_read(tmp_path: Path, count: int) -> None:
    root = tmp_path / f"run{count}"
    newest = _hours(root, count)
    recent = read_window(root, "gpu_util", parse_time("30m"), None)
    assert recent.newest == newest and recent.columns.size == 31  # minutes newest-30m .. newest
    assert len(recent.files_read) == 1  # the newest hour only, however long the run
    hour = newest - 3540  # the newest hour's start
    middle = read_window(root, "gpu_util", TimeBound(seconds=hour - 900), TimeBound(seconds=hour + 900))
    assert len(middle.files_read) == 2 and middle.columns.size == 31  # :45-:59 of one hour, :00-:15 of the next


def test_cost_follows_the_window_not_the_run(tmp_path: Path) -> None:
    short, long = tmp_path / "short", tmp_path / "long"
    _hours(short, 2)
    _hours(long, 200)
    timings = []
    for root in (short, long):
        began = time.perf_counter()
        window = read_window(root, "gpu_util", parse_time("1h"), None)
        timings.append(time.perf_counter() - began)
        assert len(window.files_read) <= 2
    assert timings[1] < timings[0] * 5 + 0.05, timings  # listing 200 names is not reading 200 hours


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--phases", "--step", "1"], "leave out --step"),
        (["--phases", "--gpu"], "one of --phases"),
        (["--since", "30m"], "use them with --phases"),
        (["--parquet", "/tmp/x", "--format", "csv"], "leave out --format csv"),
    ],
)
def test_options_that_do_not_go_together_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _, err = _export(capsys, str(_run(tmp_path)), *args)
    assert code == 1 and message in err


def test_a_bad_time_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _export(capsys, str(_run(tmp_path)), "--gpu", "--since", "yesterday")
    assert code == 2 and "Unix seconds" in err


def test_a_malformed_line_is_named_and_the_rest_exported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _run(tmp_path)
    path = root / "dashboard" / "phases" / "20260820_16.jsonl"
    with open(path, "a") as handle:
        handle.write('{"name": "x", "t0": "soon"}\n')
    code, out, err = _export(capsys, str(root), "--phases")
    assert code == 0 and "20260820_16.jsonl" in err
    document = json.loads(out)
    assert document["problems"] and document["problems"][0]["file"] == str(path)
    assert document["count"] == len(_lines(root, "phases")) - 1
    assert all(not (isinstance(v, float) and math.isnan(v)) for v in document["columns"]["t1"])


def test_odd_numbers_stay_exact_or_null(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """NaN and overflowing floats are null (strict JSON); an int past 64 bits is written exactly."""
    path = tmp_path / "odd" / "dashboard" / "gpu_util" / "20260820_15.jsonl"
    path.parent.mkdir(parents=True)
    huge = 123456789012345678901234567890
    path.write_text(
        f'{{"ts":1787240000.0,"node":"n","gpu":0,"util":NaN,"mem_mb":{huge},"power_w":1e400}}\n'
        '{"ts":1787240001.0,"node":"n","gpu":1,"util":5,"mem_mb":2,"power_w":3.5}\n'
    )
    code, out, _ = _export(capsys, str(tmp_path / "odd"), "--gpu")
    assert code == 0
    columns = json.loads(out)["columns"]
    assert columns["util"] == [None, 5] and columns["power_w"] == [None, 3.5] and columns["mem_mb"] == [huge, 2]


@pytest.mark.parametrize("stream", ["phases", "gpu_util", "engine_series"])
def test_a_window_that_ends_before_it_starts_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stream: str
) -> None:
    """``--since 2h --until 1d`` printed an empty export and exited 0, as if the run had no records then."""
    code, out, err = _export(capsys, str(_run(tmp_path)), FLAGS[stream], "--since", "2h", "--until", "1d")
    assert code == 1 and out == ""
    assert "--since/--until give an empty window" in err and "--until must be later than --since" in err
