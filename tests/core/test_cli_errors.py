"""What a first-time user types wrong, and what the CLI says back.

Every error is one line on stderr that names the input and what to do, with a
non-zero status and no traceback: a folder that is not a dump (``report`` exits
3, not "nothing needs attention"), an empty token window, a poll interval that
is not a number of seconds, ``--format csv`` without a step, ``RUN --demo``.
Also: ``--version``, ``report --json`` filling ``data_age_seconds``, and where
``response_offset`` points when a token window ends inside the prompt.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from miles_tui.core.dump import SERIES, Run, TokenView, token_payload
from miles_tui.core.dump.token_view import token_view
from miles_tui.tui.cli import main
from tests.conftest import EPOCH, GOLDEN, stamp, write_demo_run

NOT_A_DUMP = "not a --dump-details folder"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# --- a folder that is not a dump ----------------------------------------------------------------


@pytest.fixture(params=["empty", "unrelated"])
def not_a_dump(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    folder = tmp_path / request.param
    folder.mkdir()
    if request.param == "unrelated":
        (folder / "notes.txt").write_text("hello\n")
        (folder / "train_data").mkdir()  # a stray dump-like folder is not enough
        (folder / "checkpoints").mkdir()
    return folder


def test_report_on_a_folder_that_is_not_a_dump_exits_3(not_a_dump: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for flags in ([], ["--json"]):
        code, out, err = _run(capsys, "report", str(not_a_dump), *flags)
        line = _one_line(err)
        assert code == 3 and out == ""
        assert NOT_A_DUMP in line and str(not_a_dump) in line


def test_export_on_a_folder_that_is_not_a_dump_fails(not_a_dump: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for flags in ([], ["--step", "0"], ["--metrics"]):
        code, out, err = _run(capsys, "export", str(not_a_dump), *flags)
        assert code == 1 and out == "" and NOT_A_DUMP in _one_line(err)


def test_a_dump_with_nothing_in_it_yet_is_still_a_dump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "run" / "rollout_data").mkdir(parents=True)
    code, out, err = _run(capsys, "report", str(tmp_path / "run"), "--json")
    assert code == 0 and err == "" and json.loads(out)["steps"]["train"] == 0


def test_report_json_takes_data_age_from_the_records_not_the_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 24.4: a copied run (fresh mtimes) is as old as its records; its files' times are not its clock."""
    root = tmp_path / "live_streams"  # dashboard/ only: every record carries its own ts
    shutil.copytree(GOLDEN / "live_streams", root)
    stamp(root, time.time() - 60)
    newest = 1787226017.5  # the truth file's dashboard.time_range[1]
    code, out, _ = _run(capsys, "report", str(root), "--json")
    document = json.loads(out)
    assert document["run"]["last_data_ts"] == newest and document["run"]["last_data_from"] == "records"
    assert document["run"]["data_age_seconds"] == pytest.approx(time.time() - newest, abs=120)
    assert document["run"]["state"] == "quiet"
    [stale] = [a for a in document["advisories"] if a["code"] == "no_new_data"]
    assert stale["level"] == "critical" and code == 2
    # its arguments do not say num_rollout: --quiet-ok leaves the exit code to what else is wrong (low MFU)
    code, out, _ = _run(capsys, "report", str(root), "--json", "--quiet-ok")
    assert code == 1 and json.loads(out)["exit_status"] == 1


def test_report_json_data_age_counts_step_files(demo_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stamp(demo_run, time.time() - 600)
    _, out, _ = _run(capsys, "report", str(demo_run), "--json")
    run = json.loads(out)["run"]
    # the streams' records carry their own times (EPOCH - 600): that is the run's clock, not the files'
    assert run["last_data_from"] == "records" and run["last_data_ts"] == pytest.approx(EPOCH - 600)
    shutil.rmtree(demo_run / "dashboard")  # no record has a time: the step files' times are the clock
    _, out, _ = _run(capsys, "report", str(demo_run), "--json")
    run = json.loads(out)["run"]
    assert run["last_data_from"] == "files" and run["data_age_seconds"] == pytest.approx(600, abs=120)


# --- token windows ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def views(tmp_path_factory: pytest.TempPathFactory) -> list[TokenView]:
    root = write_demo_run(tmp_path_factory.mktemp("tokens") / "demo", 1)
    stamp(root, EPOCH - 600)
    step = Run(root, use_cache=False).open(0, False, EPOCH)
    return [token_view(step, row.sample_index) for row in step.summary.rows[:6]]


def test_a_window_inside_the_prompt_clamps_response_offset(views: list[TokenView]) -> None:
    view = next(v for v in views if v.prompt_length >= 4)
    payload = token_payload(view, None, 1, 3)
    assert payload["token_ids"] == list(view.token_ids[1:3])
    assert payload["response_offset"] == 2 == len(payload["token_ids"])  # was prompt_length - 1
    assert all(payload[name] in ([], None) for name in SERIES) and payload["loss_mask"] == []


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_response_offset_splits_every_window_at_the_response(views: list[TokenView], data: st.DataObject) -> None:
    view = data.draw(st.sampled_from(views))
    start = data.draw(st.none() | st.integers(-5, view.total_length + 5))
    end = data.draw(st.none() | st.integers(-5, view.total_length + 5))
    payload = token_payload(view, None, start, end)
    ids, offset = payload["token_ids"], payload["response_offset"]
    assert 0 <= offset <= len(ids)
    assert payload["start"] + offset == max(payload["start"], min(view.prompt_length, payload["end"]))
    response = len(ids) - offset  # the per-token arrays cover exactly the response part of the window
    assert len(payload["loss_mask"]) == response
    for name in SERIES:
        assert payload[name] is None or len(payload[name]) == response


def _tokens(demo_run: Path, *window: str) -> list[str]:
    return ["export", str(demo_run), "--step", "0", "--sample", "3", "--tokens", *window]


@pytest.mark.parametrize("window", [("--start", "5", "--end", "5"), ("--start", "9", "--end", "4")])
def test_an_empty_token_range_is_an_error(
    demo_run: Path, capsys: pytest.CaptureFixture[str], window: tuple[str, ...]
) -> None:
    code, out, err = _run(capsys, *_tokens(demo_run, *window))
    line = _one_line(err)
    assert code == 1 and out == "" and "empty window" in line and "--end" in line


@pytest.mark.parametrize("window", [("--start", "-5"), ("--end", "-1"), ("--start", "-3", "--end", "4")])
def test_a_negative_token_position_is_an_error_not_a_silent_zero(
    demo_run: Path, capsys: pytest.CaptureFixture[str], window: tuple[str, ...]
) -> None:
    """`--start -5` printed the window from 0, as if asked for."""
    code, out, err = _run(capsys, *_tokens(demo_run, *window))
    line = _one_line(err)
    negative = next(f"{flag} {value}" for flag, value in zip(window[::2], window[1::2], strict=True) if int(value) < 0)
    assert code == 1 and out == "" and "count from 0" in line and negative in line


def test_a_window_past_the_sample_is_an_error_naming_it(demo_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, *_tokens(demo_run, "--start", "100000"))
    line = _one_line(err)
    assert code == 1 and out == "" and "sample 3 of step 0 has no token in [100000, end)" in line
    code, out, _ = _run(capsys, *_tokens(demo_run, "--start", "2", "--end", "100000"))
    assert code == 0 and json.loads(out)["start"] == 2  # a window that overlaps the sample is fine


def test_start_and_end_need_tokens(demo_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "export", str(demo_run), "--step", "0", "--start", "3")
    assert code == 1 and out == "" and "--sample I --tokens" in _one_line(err)


# --- small things -------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, flag)
    assert code == 0 and err == "" and out.startswith(f"miles-tui {version('miles-tui')}\nline scanner: ")


@pytest.mark.parametrize("value", ["0.1", "0", "-1", "nan", "NaN", "inf", "-inf", "1e309", "abc", ""])
def test_a_poll_interval_that_is_not_seconds_is_an_error(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "RUN", f"--poll={value}")
    line = _one_line(err)
    assert code == 2 and out == "" and "--poll" in line and "at least 0.2" in line


def test_the_slowest_and_fastest_poll_intervals_parse() -> None:
    from miles_tui.tui.cli import _monitor_parser

    assert _monitor_parser().parse_args(["RUN", "--poll", "0.2"]).poll == 0.2
    assert _monitor_parser().parse_args(["RUN", "--poll", "3600"]).poll == 3600.0


def test_csv_needs_a_step(demo_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["export", str(demo_run), "--format", "csv"],
        ["export", str(demo_run), "--format", "csv", "--metrics"],
        [*_tokens(demo_run), "--format", "csv"],
        ["export", str(demo_run), "--step", "1", "--format", "csv", "--per-token"],  # was ignored, exit 0
    ):
        code, out, err = _run(capsys, *argv)
        assert code == 1 and out == "" and "--format csv" in _one_line(err) and "--step N" in err
    code, out, _ = _run(capsys, "export", str(demo_run), "--step", "1", "--format", "csv")
    assert code == 0 and out.startswith("sample_index,")


def test_run_dir_and_demo_together_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    for argv in (["RUN", "--demo"], ["--demo", str(tmp_path / "d"), "RUN"]):
        code, out, err = _run(capsys, *argv)
        line = _one_line(err)
        assert code == 2 and out == "" and "--demo" in line and "'RUN'" in line
    assert os.listdir(tmp_path) == []  # nothing was started or written


def test_no_arguments_says_what_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys)
    assert code == 2 and "miles-tui --demo" in _one_line(err)


def test_a_command_line_that_does_not_parse_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["export"], ["report", "RUN", "--jsn"], ["RUN", "--no-such-flag"]):
        code, out, err = _run(capsys, *argv)
        assert code == 2 and out == "" and "--help" in _one_line(err)


def test_a_step_that_exists_only_as_the_other_kind_says_which_flag(
    golden_copy: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = golden_copy("tp_dup")  # train steps 0-2; eval steps 0 and 3
    code, out, err = _run(capsys, "export", str(root), "--step", "3")
    line = _one_line(err)
    assert code == 1 and out == ""
    assert "the run has no step 3 (visible: 0, 1, 2); step 3 exists as an eval step: add --eval" in line
    code, out, _ = _run(capsys, "export", str(root), "--step", "3", "--eval")
    assert code == 0 and json.loads(out)
    code, out, err = _run(capsys, "export", str(root), "--step", "2", "--eval")
    assert code == 1 and "step 2 exists as a train step: drop --eval" in _one_line(err)
    code, out, err = _run(capsys, "export", str(root), "--step", "12")
    assert code == 1 and "exists as" not in _one_line(err)


# --- an internal error ---------------------------------------------------------------------------


def _broken(*_args: object, **_kwargs: object) -> None:
    raise ZeroDivisionError("a bug in miles-tui")


@pytest.mark.parametrize("command", ["report", "export"])
def test_an_internal_error_has_its_own_exit_status(
    command: str, demo_run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not 1 ("warning" to a script reading `report`), nor any other documented status."""
    from miles_tui.core.commands import export, report
    from miles_tui.tui.cli import EXIT_INTERNAL

    monkeypatch.setattr(report, "build_report", _broken)
    monkeypatch.setattr(export, "step_list", _broken)
    code, out, err = _run(capsys, command, str(demo_run))
    assert code == EXIT_INTERNAL == 70
    assert code not in (0, 1, 2, 3, 75, 130)
    line = _one_line(err)
    assert "internal error: ZeroDivisionError: a bug in miles-tui" in line and "--debug" in line
    assert out == ""
