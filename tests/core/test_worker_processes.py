"""Worker pools start inside a running app, whose sys.stderr is a capture with no file (fileno() -1): a whole-run
GPU view on a fresh cache said "cannot read telemetry: bad value(s) in fds_to_keep" (the resource tracker was
handed -1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = """
import sys
from pathlib import Path
from miles_tui.core.telemetry.hours import hour_workers, store

class Capture:  # what Textual puts in sys.stderr while an app runs
    def write(self, text): return len(text)
    def flush(self): pass
    def fileno(self): return -1

hour_workers.PARALLEL_BYTES = 0  # two small hours go to the workers too
sys.stderr = Capture()
hours = store.HourStore(Path(sys.argv[1]), "gpu_util", keep_columns=False, workers=2)
problems = hours.refresh()
import multiprocessing.resource_tracker as tracker
print(hours.records(), len(problems), tracker._resource_tracker._pid is not None)
"""


def _run(root: Path) -> Path:
    folder = root / "dashboard" / "gpu_util"
    folder.mkdir(parents=True)
    for hour in range(3):
        lines = [
            json.dumps({"ts": 1787223600.0 + hour * 3600 + s, "node": "n", "gpu": g, "util": s % 100, "mem_mb": 1})
            for s in range(0, 3600, 30)
            for g in range(4)
        ]
        (folder / f"20260820_{hour:02d}.jsonl").write_text("\n".join(lines) + "\n")
    return root / "dashboard"


def test_hours_are_read_by_workers_when_stderr_has_no_file(tmp_path: Path) -> None:
    dashboard = _run(tmp_path)
    env = {**os.environ, "MILES_TUI_CACHE_DIR": str(tmp_path / "cache")}
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(dashboard)], capture_output=True, text=True, env=env, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == [str(3 * 120 * 4), "0", "True"], result.stdout
