"""metrics.jsonl written to make every key a series: a line of a million keys, 200,000 lines of a new key each.

Each key becomes a series of its own, so unbounded they took 5.2 GB and 1.4 GB.
The files are written as an attacker would (raw lines appended to a real
run's metrics.jsonl); ``export --metrics`` and ``report`` run in a child
under a 1 GiB address-space limit, so a blow-up fails the test.
"""

from __future__ import annotations

import json
from pathlib import Path

from hostile_fs import cli

from miles_tui.core.telemetry import MetricStore
from miles_tui.core.telemetry.metrics.metric_batch import MAX_LINE_KEYS, rows_to_batch
from miles_tui.core.telemetry.metrics.metric_store import MAX_KEYS

MILLION = 1_000_000
FLOOD = 200_000


def _append(path: Path, lines: list[bytes]) -> None:
    with open(path, "ab") as handle:
        handle.write(b"".join(line + b"\n" for line in lines))


def _metric_line(metrics: dict[str, float], ts: float = 1.7e9) -> bytes:
    return json.dumps({"ts": ts, "step_key": "train/step", "step": 1, "metrics": metrics}).encode()


def test_a_line_of_a_million_keys_is_malformed(demo_run: Path) -> None:
    metrics = demo_run / "dashboard" / "metrics.jsonl"
    line = b'{"ts": 1.7e9, "step_key": "train/step", "step": 1, "metrics": {'
    line += b",".join(b'"k%d": %d' % (i, i) for i in range(MILLION)) + b"}}"
    assert len(line) > 16 << 20
    _append(metrics, [line])
    done = cli("export", demo_run, "--metrics", "--no-cache", timeout=180)
    assert not done.hung and done.returncode == 0, done.stderr[-2000:]
    keys = json.loads(done.stdout)["metrics"]
    assert ("k0" not in keys and "train/loss" in keys) or keys  # the run's own keys are still there
    assert not any(k.startswith("k") and k[1:].isdigit() for k in keys)
    report = cli("report", demo_run, "--no-cache", timeout=180)
    assert not report.hung and "internal error" not in report.stderr
    assert f"more than {MAX_LINE_KEYS}" in report.stdout and "metrics.jsonl" in report.stdout


def test_a_flood_of_new_keys_is_cut_at_the_budget_and_named(demo_run: Path) -> None:
    metrics = demo_run / "dashboard" / "metrics.jsonl"
    _append(metrics, [_metric_line({f"flood/{i}": float(i)}, 1.7e9 + i) for i in range(FLOOD)])
    done = cli("export", demo_run, "--metrics", "--no-cache", timeout=180)
    assert not done.hung and done.returncode == 0, done.stderr[-2000:]
    keys = json.loads(done.stdout)["metrics"]
    assert MAX_KEYS - 100 <= len(keys) <= MAX_KEYS
    report = cli("report", demo_run, "--no-cache", timeout=180)
    assert not report.hung and "internal error" not in report.stderr
    lines = [line for line in report.stdout.splitlines() if f"more than {MAX_KEYS:,} distinct metric keys" in line]
    assert len(lines) == 1 and str(metrics) in lines[0]


def test_the_store_keeps_the_keys_it_had_and_counts_the_rest() -> None:
    store = MetricStore()
    rows = [(1.0, "s", i, {f"k{i}": 1.0}) for i in range(MAX_KEYS + 5)]
    store.append_batch(rows_to_batch(rows))
    store.append_batch(rows_to_batch([(2.0, "s", 0, {"k0": 2.0, "new": 1.0})]))
    assert len(store.keys()) == MAX_KEYS
    assert store.dropped_keys == 6 and store.first_dropped == f"k{MAX_KEYS}"
    assert store.point_counts()["k0"] == 2  # a known key still takes points
