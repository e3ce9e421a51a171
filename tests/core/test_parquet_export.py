"""``export --parquet DIR`` round-trips: every table read back with pyarrow equals ``export``'s JSON.

The round-trip tests need the optional extra (``pip install 'miles-tui[parquet]'``) and skip only where
pyarrow is missing; what the command says without it is tested everywhere.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from miles_tui.core.commands.telemetry_export import FIELDS
from miles_tui.core.dump.record_formats import unknown_columns
from miles_tui.tui.cli import main
from tests.conftest import EPOCH, stamp, write_demo_run
from tests.drift_runs import write_drift_run

FLAGS = {"phases": "--phases", "gpu_util": "--gpu", "engine_series": "--engines"}


def _export(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    code = main(["export", *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def _demo(tmp_path: Path) -> Path:
    root = write_demo_run(tmp_path / "demo", 3)
    stamp(root, EPOCH - 600)
    return root


def _step_rows(capsys: pytest.CaptureFixture[str], root: Path) -> list[dict[str, Any]]:
    """Every step's rows as ``export --step`` prints them, with rollout_id and evaluation, in Parquet's order."""
    listing = _export(capsys, str(root))
    steps = sorted([(rid, False) for rid in listing["train"]] + [(rid, True) for rid in listing["eval"]])
    rows = []
    for rid, evaluation in steps:
        document = _export(capsys, str(root), "--step", str(rid), *(["--eval"] if evaluation else []))
        for row in document["samples"]:
            for column in unknown_columns(row["unknown_format"]):
                row[column] = None  # Parquet holds null there; the JSON says "unknown format"
            rows.append({"rollout_id": rid, "evaluation": evaluation, **row})
    return rows


def test_every_table_reads_back_as_exports_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    root = _demo(tmp_path)
    out = tmp_path / "tables"
    done = _export(capsys, str(root), "--parquet", str(out))
    assert set(done["tables"]) == {"samples", *FIELDS}
    samples = pq.read_table(out / "samples.parquet").to_pylist()
    expected = _step_rows(capsys, root)
    assert len(samples) == len(expected) == done["tables"]["samples"]["rows"] > 0
    assert samples == expected
    for stream, flag in FLAGS.items():
        table = pq.read_table(out / f"{stream}.parquet")
        document = _export(capsys, str(root), flag)
        assert table.num_rows == document["count"] == done["tables"][stream]["rows"] > 0
        assert table.column_names == document["fields"]
        for field in FIELDS[stream]:
            back = table.column(field).to_pylist()
            if field == "labels":
                back = [None if v is None else json.loads(v) for v in back]
            assert back == document["columns"][field], (stream, field)


def test_the_window_applies_to_the_telemetry_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    root = _demo(tmp_path)
    out = tmp_path / "recent"
    _export(capsys, str(root), "--parquet", str(out), "--since", "5m")
    for stream, flag in FLAGS.items():
        document = _export(capsys, str(root), flag, "--since", "5m")
        table = pq.read_table(out / f"{stream}.parquet")
        assert table.num_rows == document["count"]
        assert table.column(FIELDS[stream][0]).to_pylist() == document["columns"][FIELDS[stream][0]]


def test_unknown_format_cells_are_null_and_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    root = write_drift_run(tmp_path / "unknown", "unknown")
    stamp(root, EPOCH - 600)
    out = tmp_path / "tables"
    _export(capsys, str(root), "--parquet", str(out))
    rows = pq.read_table(out / "samples.parquet").to_pylist()
    assert rows == _step_rows(capsys, root)
    assert rows[0]["unknown_format"] == "weight_versions spec_info" and rows[0]["staleness"] is None
    assert rows[0]["turns"] is None and rows[1]["staleness"] == 3


def test_without_pyarrow_the_command_names_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    out = tmp_path / "tables"
    code = main(["export", str(_demo(tmp_path)), "--parquet", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "pip install 'miles-tui[parquet]'" in err
    assert not out.exists()


def test_a_folder_inside_the_run_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pyarrow")
    root = _demo(tmp_path)
    code = main(["export", str(root), "--parquet", str(root / "tables")])
    assert code == 1 and "never writes to" in capsys.readouterr().err
    assert not (root / "tables").exists()
