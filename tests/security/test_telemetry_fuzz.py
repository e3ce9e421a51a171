"""Fuzz the telemetry readers: a golden run's dashboard/ with generated and damaged lines, read in a child.

Each case (:func:`tests.security.telemetry_fuzzing.telemetry_case`) is read by
two workers, one with the compiled scanner and one with ``MILES_TUI_NO_SCANNER=1``,
each through every reader a user's command runs, cold and then from its cache
(``tests/security/telemetry_child.py``). Acceptable outcomes: values, and
problems that name their file; a traceback, a MemoryError under the worker's
address-space limit, a hang past the per-case timeout, a view that lost what the
intact golden lines show (a GPU lane, an engine, every phase, a metric key), or
the two decoders disagreeing fails, and the case is kept as a folder.

CI runs a short budget (~8 s); ``MILES_TUI_FUZZ_MINUTES`` runs longer and prints figures:

    MILES_TUI_FUZZ_MINUTES=30 python -m pytest -q -s tests/security/test_telemetry_fuzz.py
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.security.fuzzing import Verdict, Worker
from tests.security.telemetry_fuzzing import TelemetryCase, golden_files, newest_time, telemetry_case
from tests.security.test_unpickle_fuzz import MINUTES, _keep_dir

BATCH = settings(max_examples=2, deadline=None, database=None, suppress_health_check=list(HealthCheck))
"""A case takes about a second per worker: small batches keep the time budget."""
SECONDS = MINUTES * 60 if MINUTES > 0 else 8.0
"""The test suite's run is a few cases (every kind of damage shows up within a minute or two)."""


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[list[Worker]]:
    started = []
    for name, env in (("scanner", {}), ("no-scanner", {"MILES_TUI_NO_SCANNER": "1"})):
        scratch = tmp_path / name
        scratch.mkdir()
        worker = Worker(scratch, env={**env, "MILES_TUI_CACHE_DIR": str(scratch / "cache")})
        worker.start()
        started.append(worker)
    yield started
    for worker in started:
        worker.stop()


def _write_run(root: Path, files: dict[str, bytes]) -> Path:
    """The case as a run directory (a fresh one each time: new inodes, nothing of the last case left)."""
    shutil.rmtree(root, ignore_errors=True)
    for path, data in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


def _read(worker: Worker, run: Path, now: float) -> Verdict:
    shutil.rmtree(worker.scratch / "cache", ignore_errors=True)
    return worker.ask({"kind": "telemetry", "path": str(run), "now": now})


def shortfall(case: TelemetryCase, found: dict[str, Any]) -> list[str]:
    """What the views lost of what the intact golden lines show."""
    lost = []
    if missing := case.lanes - set(found["lanes"]):
        lost.append(f"GPU lanes gone from the GPU view: {sorted(missing)}")
    if missing := case.engines - set(found["engines"]):
        lost.append(f"engines gone from the engines view: {sorted(missing)}")
    if case.closed_phases and not found["bands"]:
        lost.append(f"no phase span in the GPU view ({case.closed_phases} intact closed phases)")
    if missing := case.metric_keys - set(found["metric_keys"]):
        lost.append(f"metric keys gone: {sorted(missing)[:5]}")
    return lost


WARNED: set[str] = set()
"""Python warnings the readers gave (printed with the figures: a warning is no failure, but it reaches stderr)."""


def check_case(workers: list[Worker], case: TelemetryCase, run: Path) -> str | None:
    """None when every worker read the case acceptably and they agree; else what went wrong."""
    _write_run(run, case.files)
    findings = []
    for worker in workers:
        verdict = _read(worker, run, case.now)
        if not verdict.ok:
            mode = "no-scanner" if worker.env.get("MILES_TUI_NO_SCANNER") else "scanner"
            return f"{mode}: {verdict.detail}"
        found = verdict.report["found"]
        if lost := shortfall(case, found):
            return "; ".join(lost)
        WARNED.update(found["warnings"])
        findings.append({k: v for k, v in found.items() if k != "warnings"})
    if findings[0] != findings[1]:
        differ = {k: (findings[0][k], findings[1][k]) for k in findings[0] if findings[0][k] != findings[1][k]}
        return f"the scanner and the general decoder disagree: {differ}"[:2000]
    return None


def _keep_case(keep: Path, case: TelemetryCase, detail: str, failures: list[str]) -> None:
    digest = hashlib.sha1(json.dumps(sorted((k, v.hex()) for k, v in case.files.items())).encode()).hexdigest()[:12]
    folder = _write_run(keep / f"telemetry-{digest}", case.files)
    (folder / "now").write_text(repr(case.now))
    failures.append(f"{folder}: {detail}")


def test_generated_telemetry(workers: list[Worker], tmp_path: Path) -> None:
    keep = _keep_dir(tmp_path)
    run = tmp_path / "run"
    failures: list[str] = []
    started = time.monotonic()
    while time.monotonic() - started < SECONDS:

        @BATCH
        @given(case=telemetry_case())
        def batch(case: TelemetryCase) -> None:
            problem = check_case(workers, case, run)
            if problem is not None:
                _keep_case(keep, case, problem, failures)

        batch()
    elapsed = time.monotonic() - started
    outcomes = [w.outcomes for w in workers]
    print(
        f"\n[fuzz telemetry] {workers[0].cases} cases (each read with and without the scanner) in {elapsed:.0f} s, "
        f"outcomes {outcomes}, worker restarts {sum(w.restarts for w in workers)}, failures {len(failures)} "
        f"(kept in {keep}); warnings seen: {sorted(WARNED) or 'none'}"
    )
    assert not failures, "\n".join(failures[:10])


def test_the_worker_reads_a_golden_run_whole(workers: list[Worker], tmp_path: Path) -> None:
    """The harness itself: an undamaged golden run shows every lane, engine, phase and key, both ways alike."""
    for name in ("live_streams", "live_engines"):
        files = golden_files(name)
        case = TelemetryCase(files, newest_time(files) + 60.0)
        for path, data in files.items():
            kind = path.split("/")[1].removesuffix(".jsonl") if path.endswith(".jsonl") else None
            for line in data.splitlines() if kind in ("gpu_util", "engine_series", "phases", "metrics") else ():
                case.note_intact(kind or "", line)
        assert case.lanes and case.closed_phases and case.metric_keys
        assert check_case(workers, case, tmp_path / name) is None
