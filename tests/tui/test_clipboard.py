"""Clipboard and CSV text: TSV of a ROW and of a token window, the CSV of shown rows, where a CSV may go."""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path

import pytest

from miles_tui.core.commands.export import rows_csv, step_export
from miles_tui.core.dump import ROW_COLUMNS, SERIES, Run, token_payload
from miles_tui.core.dump.token_view import token_view
from miles_tui.tui.screens.save_csv_screen import CsvPathError, csv_target
from miles_tui.tui.views.clipboard import (
    TOKEN_COLUMNS,
    default_csv_path,
    rows_csv_text,
    sample_row_tsv,
    token_window_tsv,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
NOW = time.time() + 3600


def test_a_sample_row_is_a_header_and_a_value_line() -> None:
    row = Run(GOLDEN / "tp_dup", use_cache=False).summary(0, False, NOW).rows[4]
    header, values, end = sample_row_tsv(row).split("\n")
    assert end == ""
    assert header.split("\t") == list(ROW_COLUMNS)
    cells = dict(zip(ROW_COLUMNS, values.split("\t"), strict=True))
    assert cells["sample_index"] == str(row.sample_index)
    assert cells["spec_accept_rate"] == "" and row.spec_accept_rate is None  # null stays empty, never 0
    assert cells["remove_sample"] == "false" and cells["alignment_failed"] == "false"
    assert float(cells["mean_abs_lp_diff"]) == row.mean_abs_lp_diff  # full precision, not the table's rounding


def test_a_token_window_has_every_series_and_gaps_where_masked() -> None:
    step = Run(GOLDEN / "tp_dup", use_cache=False).open(0, False, NOW)
    sample = next(r.sample_index for r in step.summary.rows if (step.train_rows[r.sample_index].loss_mask == 0).any())
    view = token_view(step, sample)
    start, stop = 2, view.total_length
    texts = [f"tok{i}\t" for i in range(view.total_length)]
    lines = token_window_tsv(view, start, stop, texts).rstrip("\n").split("\n")
    assert lines[0].split("\t") == list(TOKEN_COLUMNS)
    assert len(lines) == 1 + stop - start
    payload = token_payload(view, None, start, stop)
    masked_seen = 0
    for line in lines[1:]:
        cells = dict(zip(TOKEN_COLUMNS, line.split("\t"), strict=True))
        position = int(cells["position"])
        assert cells["token_id"] == str(view.token_ids[position])
        assert cells["text"] == f"tok{position}\\t"  # a tab inside a token cannot split the row
        if position < view.prompt_length:
            assert cells["response_position"] == "" and cells["loss_mask"] == ""
            assert all(cells[name] == "" for name in SERIES)
            continue
        r = position - view.prompt_length
        assert cells["response_position"] == str(r)
        assert view.loss_mask is not None
        assert cells["loss_mask"] == str(int(view.loss_mask[r]))
        if view.loss_mask[r] == 0:
            masked_seen += 1
            assert all(cells[name] == "" for name in SERIES)  # the engine never scored it: a gap, not 0
        else:
            offset = position - max(start, view.prompt_length)
            assert float(cells["lp_diff"]) == payload["lp_diff"][offset]
    assert masked_seen > 0


def test_the_csv_of_shown_rows_is_the_export_csv_of_those_rows() -> None:
    run = Run(GOLDEN / "tp_dup", use_cache=False)
    summary = run.summary(1, False, NOW)
    shown = sorted(summary.rows, key=lambda r: r.response_length)[:5]
    parsed = list(csv.DictReader(io.StringIO(rows_csv_text(shown))))
    assert [int(r["sample_index"]) for r in parsed] == [r.sample_index for r in shown]
    full = rows_csv(step_export(run, 1, False, NOW))
    by_index = {line.split(",")[0]: line for line in full.splitlines()[1:]}
    for line in rows_csv_text(shown).splitlines()[1:]:
        assert by_index[line.split(",")[0]] == line


def test_a_csv_never_goes_inside_the_run_directory(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "rollout_data").mkdir(parents=True)
    elsewhere = tmp_path / "out"
    elsewhere.mkdir()
    (elsewhere / "link").symlink_to(run_dir)
    for text in (str(run_dir / "x.csv"), "rollout_data/x.csv", str(elsewhere / "link" / "x.csv"), str(run_dir)):
        with pytest.raises(CsvPathError, match="inside the run directory"):
            csv_target(text, run_dir, cwd=run_dir)
    assert csv_target("step_3.csv", run_dir, cwd=elsewhere) == (elsewhere / "step_3.csv").resolve()
    with pytest.raises(CsvPathError, match="does not exist"):
        csv_target(str(tmp_path / "nope" / "x.csv"), run_dir)
    with pytest.raises(CsvPathError, match="a folder"):
        csv_target(str(elsewhere), run_dir)
    with pytest.raises(CsvPathError, match="type a file path"):
        csv_target("  ", run_dir)
    assert default_csv_path(3, False, run_dir, cwd=elsewhere) == elsewhere.resolve() / "step_3.csv"
    assert default_csv_path(3, True, run_dir, cwd=run_dir / "rollout_data") == Path.home() / "step_eval_3.csv"
