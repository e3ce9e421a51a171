"""Telemetry lines written by an attacker (issue 25, items 5-7), each appended to a copy of a golden run's newest
hour as raw bytes and read by ``report`` and ``export`` in a child under a memory limit:

5. a name that is a list or an object (``engine_series``' ``addr`` or ``metric``, ``phases``' ``name``, an open
   marker's ``node`` or ``rank``): ``report`` died "internal error: TypeError: unhashable type" naming no file;
6. a ``phases`` line with ``t0`` NaN or ``t1`` Infinity (``json.loads`` reads both): accepted silently, and the
   GPU view then drew no phase band for any lane;
7. ``gpu_util`` lines whose ``gpu`` values are distinct ints that hash alike (k·(2**61−1): CPython's int hash
   is not randomised): 40,000 of them kept the GPU view from drawing for ~90 s.

Each bad line is a malformed line named with its file; the run's good lines read as before.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

from hostile_fs import cli

from tests.conftest import EPOCH, GOLDEN, stamp

HASH_MODULUS = 2**61 - 1
"""CPython hashes an int modulo this prime: k·HASH_MODULUS all hash to 0."""


def _copy(case: str, tmp_path: Path) -> Path:
    run = tmp_path / case
    shutil.copytree(GOLDEN / case, run)
    return run


def _append(path: Path, lines: list[bytes]) -> None:
    with open(path, "ab") as handle:
        handle.write(b"".join(line + b"\n" for line in lines))


def _newest(run: Path, stream: str) -> Path:
    return max((run / "dashboard" / stream).glob("*.jsonl"))


def _report(run: Path) -> dict[str, Any]:
    stamp(run, EPOCH - 3600)
    done = cli("report", run, "--json", "--no-cache", timeout=120)
    assert not done.hung and done.returncode in (0, 1, 2), done.stderr[-2000:]
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    return dict(json.loads(done.stdout))


def _malformed(report: dict[str, Any], path: Path) -> list[str]:
    return [
        a["message"]
        for a in report["advisories"]
        if a.get("code") == "malformed_stream_lines" and str(path) in (a.get("path") or a["message"])
    ]


def _export(run: Path, stream: str) -> dict[str, Any]:
    """``export --STREAM`` of ``run``: its columns, and the problems it met (each naming a file and offset)."""
    done = cli("export", run, f"--{stream}", "--no-cache", timeout=120)
    assert not done.hung and done.returncode == 0, done.stderr[-2000:]
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    return dict(json.loads(done.stdout))


def _problem_files(export: dict[str, Any]) -> list[str]:
    return [p["file"] for p in export["problems"]]


def test_names_that_are_lists_or_objects_are_malformed_lines_named(tmp_path: Path) -> None:
    run = _copy("live_engines", tmp_path)
    clean = _export(run, "engines")
    engines, phases = _newest(run, "engine_series"), _newest(run, "phases")
    ts = json.loads(engines.read_text().splitlines()[-1])["ts"]
    sample = {"ts": ts, "addr": "http://rollout-alpha", "metric": "sglang_num_running_reqs", "labels": {}, "value": 1}
    _append(
        engines, [json.dumps({**sample, "addr": ["x"]}).encode(), json.dumps({**sample, "metric": {"a": 1}}).encode()]
    )
    marker = {"name": "actor_train", "t0": ts, "t1": -1.0, "node": "10.0.0.7", "gpus": [0], "rank": 0, "role": "train"}
    odd = [{**marker, "name": ["x"]}, {**marker, "node": {"a": 1}}, {**marker, "rank": [0]}]
    _append(phases, [json.dumps(m).encode() for m in odd])
    report = _report(run)
    [said_engines] = _malformed(report, engines)
    [said_phases] = _malformed(report, phases)
    assert said_engines.startswith("2 malformed lines") or "2 malformed lines" in said_engines
    assert "3 malformed lines" in said_phases
    hostile = _export(run, "engines")
    assert hostile["columns"] == clean["columns"]  # every engine keeps its data
    assert _problem_files(hostile) == [str(engines)] * 2


def test_a_phase_time_that_is_nan_or_infinity_is_a_malformed_line(tmp_path: Path) -> None:
    run = _copy("live_streams", tmp_path)
    phases = _newest(run, "phases")
    first = json.loads(phases.read_text().splitlines()[0])
    lines = [
        json.dumps({**first, "t0": "NaN"}).replace('"NaN"', "NaN").encode(),
        json.dumps({**first, "t1": "Infinity"}).replace('"Infinity"', "Infinity").encode(),
        json.dumps({**first, "t0": "-Infinity"}).replace('"-Infinity"', "-Infinity").encode(),
    ]
    _append(phases, lines)
    [said] = _malformed(_report(run), phases)
    assert "3 malformed lines" in said
    exported = _export(run, "phases")
    assert _problem_files(exported) == [str(phases)] * 3
    times = exported["columns"]["t0"] + exported["columns"]["t1"]
    assert all(isinstance(t, float) and math.isfinite(t) for t in times)


def test_gpu_indices_that_hash_alike_are_malformed_lines_read_in_linear_time(tmp_path: Path) -> None:
    run = _copy("live_streams", tmp_path)
    gpu = _newest(run, "gpu_util")
    last = json.loads(gpu.read_text().splitlines()[-1])
    flood = [json.dumps({**last, "gpu": k * HASH_MODULUS}).encode() for k in range(1, 40_001)]
    _append(gpu, flood)
    exported = _export(run, "gpu")  # quadratic, this took minutes; cli's timeout fails it
    assert HASH_MODULUS not in exported["columns"]["gpu"] and len(set(exported["columns"]["gpu"])) <= 8
    [said] = _malformed(_report(run), gpu)
    assert "40,000 malformed lines" in said or "40000 malformed lines" in said
