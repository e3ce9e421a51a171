"""The step table says "unknown format" for a record shape the reader does not know, never ``–``; the upstream
forms of ``spec_info`` and ``weight_versions`` show their values."""

from __future__ import annotations

from pathlib import Path

from miles_tui.tui.app import make_app
from miles_tui.tui.screens.step_screen import StepScreen
from miles_tui.tui.widgets.virtual_table import VirtualTable
from tests.conftest import EPOCH, stamp
from tests.drift_runs import STEP, write_drift_run
from tests.harness import screen_text, settle

DRIFT_COLUMNS = ("staleness", "weight_version", "turns", "spec_accept_rate")


async def _cells(root: Path) -> tuple[dict[int, dict[str, str]], str]:
    """Every drawn sample row's cells of the drift columns, by sample index, and the screen's text."""
    stamp(root, EPOCH - 3600)
    app = make_app(root, poll_seconds=3600, clock=lambda: EPOCH, start=(STEP, False, None))
    async with app.run_test(size=(200, 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, StepScreen)
        table = app.screen.query_one("#samples", VirtualTable)
        out: dict[int, dict[str, str]] = {}
        for key in DRIFT_COLUMNS:  # bring each column on screen, then read it on every row
            table.cursor_column = next(i for i, c in enumerate(table.columns) if c.key == key)
            await settle(pilot)
            drawn = {column.key: (column, x) for column, x in table.drawn_columns()}
            column, x = drawn[key]
            for y in range(1, len(table.rows) + 1):
                line = table.render_line(y).text
                ident = int(line[: drawn["sample_index"][0].width].split()[0])
                out.setdefault(ident, {})[key] = line[x : x + column.width].strip()
        return out, screen_text(app)


async def test_an_unknown_shape_reads_unknown_format_in_the_step_table(tmp_path: Path) -> None:
    cells, text = await _cells(write_drift_run(tmp_path / "unknown", "unknown"))
    assert cells[0] == dict.fromkeys(DRIFT_COLUMNS, "unknown format")  # both fields unknown
    assert cells[1]["spec_accept_rate"] == "unknown format"
    assert cells[1]["staleness"] == "3" and cells[1]["weight_version"] == "v6–v8"  # its versions were read
    assert cells[4]["staleness"] == "unknown format" and cells[4]["spec_accept_rate"] == "12%"
    assert cells[3] == {"staleness": "4", "weight_version": "v5*", "turns": "2", "spec_accept_rate": "–"}
    header = " ".join(text.split())
    assert "stale 3.50 · mixed 67% (of 3: 3 unknown format)" in header  # the step's figures say what they leave out


async def test_the_upstream_forms_show_their_values(tmp_path: Path) -> None:
    cells, text = await _cells(write_drift_run(tmp_path / "current", "current"))
    assert cells[0] == {"staleness": "2", "weight_version": "v7", "turns": "1", "spec_accept_rate": "60%"}
    assert cells[1] == {"staleness": "3", "weight_version": "v6–v8", "turns": "2", "spec_accept_rate": "0%"}
    assert cells[2]["weight_version"] == "v8" and cells[2]["spec_accept_rate"] == "100%"
    assert "unknown format" not in text


def test_the_sample_header_says_unknown_format_for_its_versions(tmp_path: Path) -> None:
    from miles_tui.core.dump import Run
    from miles_tui.tui.views.sample_lines import chips
    from miles_tui.tui.views.sample_tracks import SampleTracks

    root = write_drift_run(tmp_path / "unknown", "unknown")
    stamp(root, EPOCH - 3600)
    step = Run(root).open(STEP, False, EPOCH)
    unknown = " · ".join(text for text, _ in chips(step, SampleTracks.load(step, 0, None)))
    assert "staleness and versions: unknown format (weight_versions)" in unknown and "staleness –" not in unknown
    known = " · ".join(text for text, _ in chips(step, SampleTracks.load(step, 1, None)))
    assert "staleness 3" in known and "v6–v8 mixed" in known


async def test_the_overview_lists_one_advisory_naming_file_fields_and_schema(tmp_path: Path) -> None:
    from tests.harness import frozen_app

    root = write_drift_run(tmp_path / "unknown", "unknown", schema_version=4)
    stamp(root, EPOCH - 3600)
    app = frozen_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        text = " ".join(screen_text(app).replace("│", " ").replace("▏", " ").split())
    assert "advisories (1)" in text and "[WARN] unknown_format step 9" in text
    assert f"rollout_data/{STEP}.pt (step {STEP})" in text and "schema_version 4" in text
    assert "'weight_versions' of 3" in text and "'spec_info' of 3" in text
