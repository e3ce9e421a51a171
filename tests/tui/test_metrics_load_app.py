"""The app loads a long metrics.jsonl with worker processes (inside Textual, whose sys.stderr has no file
descriptor), and a process where they cannot start still loads it, in the poll's thread."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from miles_tui.core.telemetry import MetricStore
from miles_tui.core.telemetry.metrics.metric_batch import decode_block
from miles_tui.tui.app import make_app

REPO = Path(__file__).resolve().parents[2]


def _metrics(path: Path, lines: int) -> bytes:
    rows = []
    for i in range(lines):
        metrics = {"train/loss": 1 / (i + 1), "train/step": i, **({"late": i} if i > lines // 2 else {})}
        rows.append(json.dumps({"ts": 1000.0 + i, "step_key": "train/step", "step": i, "metrics": metrics}))
    data = ("\n".join(rows) + "\n").encode()
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    return data


async def _loaded(store: MetricStore, records: int, timeout: float = 30.0) -> None:
    """Wait until ``store`` holds ``records`` records (or ``timeout`` passed: the test's assertion then says)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while len(store) < records and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.02)


def _records(store: MetricStore) -> list[str]:
    return [json.dumps(store.record(i).__dict__, sort_keys=True, default=dict) for i in range(len(store))]


async def test_the_app_decodes_a_long_metrics_file_in_worker_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("miles_tui.core.telemetry.metrics.metric_workers.PARALLEL_BYTES", 1)
    monkeypatch.setattr("miles_tui.core.telemetry.metrics.metric_workers.PIECE_BYTES", 16 << 10)
    data = _metrics(tmp_path / "run" / "dashboard" / "metrics.jsonl", 3000)
    app = make_app(tmp_path / "run", poll_seconds=3600)
    async with app.run_test():
        store = app.watcher.follower.metrics
        await _loaded(store, 3000)
        decoder = app.watcher.follower.dashboard._metric_stream.decoder
        assert decoder.workers > 0  # the workers ran: no fallback to the poll's thread
    expected = MetricStore()
    expected.append_batch(decode_block(data[:-1], 0)[0])
    assert _records(store) == _records(expected)


def test_workers_start_when_stderr_has_no_file_descriptor(tmp_path: Path) -> None:
    data = _metrics(tmp_path / "m" / "metrics.jsonl", 2000)
    script = f"""
import sys
sys.path.insert(0, {str(REPO)!r})
class Capture:  # what Textual puts in sys.stderr while an app runs
    def write(self, text): return len(text)
    def flush(self): pass
    def fileno(self): return -1
from pathlib import Path
from miles_tui.core.telemetry.metrics.metric_workers import MetricBlockDecoder
def main():
    sys.stderr = Capture()
    decoder = MetricBlockDecoder(Path("m"), workers=2, parallel_bytes=1, piece_bytes=8192)
    block = Path({str(tmp_path / "m" / "metrics.jsonl")!r}).read_bytes()[:-1]
    batch, bad = decoder(block, 0)
    decoder.close()
    print(decoder.workers, len(batch), len(bad))
if __name__ == "__main__":
    main()
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["2", "2000", "0"] and data


def test_a_process_without_workers_decodes_in_the_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from miles_tui.core.telemetry.metrics import metric_workers

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("no semaphores here")

    monkeypatch.setattr(metric_workers, "ProcessPoolExecutor", refuse)
    monkeypatch.setattr(metric_workers.line_templates, "AVAILABLE", False)  # the worker-process path
    data = _metrics(tmp_path / "m" / "metrics.jsonl", 500)
    decoder = metric_workers.MetricBlockDecoder(tmp_path / "m", workers=2, parallel_bytes=1)
    batch, bad = decoder(data[:-1], 0)
    assert len(batch) == 500 and not bad and decoder.workers == 0


async def test_the_first_telemetry_poll_waits_for_the_views_imports_for_a_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first metrics load shared the GIL with the views' imports: a first `m` waited on the import lock for
    all of them (108-276 ms). The load now starts once they are done, or after VIEWS_WAIT_SECONDS."""
    import threading

    release = threading.Event()
    monkeypatch.setattr("miles_tui.tui.navigation._import_views", lambda: release.wait(30))
    monkeypatch.setattr("miles_tui.tui.app.VIEWS_WAIT_SECONDS", 30.0)
    _metrics(tmp_path / "run" / "dashboard" / "metrics.jsonl", 50)
    app = make_app(tmp_path / "run", poll_seconds=3600)
    async with app.run_test() as pilot:
        store = app.watcher.follower.metrics
        await pilot.pause(0.6)
        assert len(store) == 0, "the telemetry poll did not wait for the views' imports"
        assert app.model.polled, "the step poll must not wait: it paints the overview"
        release.set()
        await _loaded(store, 50)
        assert len(store) == 50

    never = threading.Event()
    monkeypatch.setattr("miles_tui.tui.navigation._import_views", lambda: never.wait(30))
    monkeypatch.setattr("miles_tui.tui.app.VIEWS_WAIT_SECONDS", 0.3)
    app = make_app(tmp_path / "run", poll_seconds=3600)
    async with app.run_test():
        store = app.watcher.follower.metrics
        await _loaded(store, 50)
        assert len(store) == 50, "imports that never end held the telemetry back for good"
    never.set()


async def test_opening_each_view_the_first_time_does_not_reparse_the_css(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A screen's own CSS_PATH, read at its first push, made Textual reparse and restyle everything: ~120 ms
    on the first press of each view. The app parses every screen's CSS at start instead."""
    _metrics(tmp_path / "run" / "dashboard" / "metrics.jsonl", 50)
    app = make_app(tmp_path / "run", poll_seconds=3600)
    async with app.run_test() as pilot:
        await pilot.pause(0.3)
        reparses: list[str] = []
        reparse = app.stylesheet.reparse
        monkeypatch.setattr(app.stylesheet, "reparse", lambda: (reparses.append(type(app.screen).__name__), reparse()))
        opened = []
        for key in ("m", "escape", "u", "escape", "E", "escape", "question_mark", "escape"):
            await pilot.press(key)
            await pilot.pause(0.2)
            opened.append(type(app.screen).__name__)
        assert opened[::2] == ["MetricsScreen", "ComputeScreen", "EnginesScreen", "HelpScreen"]
        assert reparses == [], f"opening a view reparsed the stylesheet: {reparses}"
