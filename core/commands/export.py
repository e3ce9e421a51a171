"""The headless ``export`` output: plain JSON-ready dicts and CSV text.

Contract: the shapes of ``docs/cli.md``, exactly; keys may be added,
never renamed or dropped. Values are raw (None for a value that does not
exist, never 0 or NaN). Reading goes through :class:`miles_tui.core.dump.run.Run`, and the
metric series through :class:`miles_tui.core.telemetry.streams.DashboardReader`.

CSV (:func:`rows_csv`, also what the monitor's ctrl+s writes) is made safe to open in a spreadsheet: a text
cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return, which a spreadsheet would run as
a formula, gets a leading ``'`` (OWASP's rule); numbers, and text that is exactly a plain decimal number,
are written as they are, so a negative reward stays a number.
"""

from __future__ import annotations

import csv
import ctypes
import difflib
import io
import os
import platform
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

from miles_tui.core.base.errors import CorruptFileError, MetricNotFoundError, StepNotFoundError
from miles_tui.core.base.inert_text import inert
from miles_tui.core.base.json_out import clean
from miles_tui.core.dump import ROW_COLUMNS, Run, RunDir, StepSummary
from miles_tui.core.dump.record_formats import marked

if TYPE_CHECKING:
    from miles_tui.core.dump import OpenStep
    from miles_tui.core.telemetry import DashboardReader, MetricStore

# Modules that need numpy are imported where they are used: a step export served
# from the summary cache never imports numpy (nor the dump reader).


def step_list(run: Run, now: float) -> dict[str, Any]:
    """``{"train": [...], "eval": [...]}``: visible steps, ascending."""
    ids = run.step_ids(now)
    return {"train": list(ids.train), "eval": list(ids.evaluation)}


def metrics_export(run_dir: Path, keys: list[str] | None, x_key: str | None) -> dict[str, Any]:
    """The ``--metrics [KEY ...] [--x STEP_KEY]`` document, read once from ``RUN_DIR/dashboard/``.

    A run without a dashboard folder has no metrics: ``{"metrics": {}}``. A key
    (or ``x_key``) the run never logged raises :class:`~miles_tui.core.base.errors.MetricNotFoundError`
    naming it (a mistyped key must not look like an empty series); a known key
    never logged against ``x_key`` gets empty lists. A missing or unusable
    RUN_DIR raises :class:`~miles_tui.core.base.errors.RunDirError`.
    """
    from miles_tui.core.telemetry import export_metrics

    document: dict[str, Any] = clean(export_metrics(_metric_store(run_dir, keys, x_key), keys, x_key))
    return document


def write_metrics_export(run_dir: Path, keys: list[str] | None, x_key: str | None, out: IO[bytes]) -> None:
    """:func:`metrics_export`'s document written to ``out`` as it is built."""
    from miles_tui.core.telemetry import write_metrics

    try:
        long = os.stat(RunDir(run_dir).dashboard_dir / "metrics.jsonl").st_size >= LONG_EXPORT_BYTES
    except OSError:
        long = False
    if long:
        _long_export_memory()
    reader = _metrics_reader(run_dir, keys, x_key)
    try:
        write_metrics(reader.metrics, keys, x_key, out, helper=long and _cpus() > 1)
    finally:
        reader.wait_saved()


LONG_EXPORT_BYTES: Final = 256 << 20
"""A metrics.jsonl at least this long is exported with the memory settings of :func:`_long_export_memory`, and
its document written by this process and a helper process (``write_metrics(helper=True)``) when two CPUs are
free for it."""


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _long_export_memory() -> None:
    """glibc keeps freed memory for the next allocation, for the rest of this (short-lived, headless) process.

    A long export allocates and frees blocks, batches and one JSON string per key, tens of MB each; by default
    glibc maps each afresh and unmaps it when freed, so every page is faulted in again (on a 2-core VM: 374k page
    faults and 10.2 s for 2M lines, against 151k and 8.7 s kept; the peak RSS does not change). Only where the C
    library is glibc; values fit a C int (a bigger one would wrap). (numpy's huge pages are turned off for every
    command at its start: :mod:`miles_tui.core.base.memory_settings`.)
    """
    if platform.libc_ver()[0] != "glibc":
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(ctypes.c_int(-3), ctypes.c_int(1 << 30))  # M_MMAP_THRESHOLD: below 1 GiB, from the heap
        libc.mallopt(ctypes.c_int(-1), ctypes.c_int(2**31 - 1))  # M_TRIM_THRESHOLD: never give the heap back
    except (OSError, AttributeError):
        return


def _metric_store(run_dir: Path, keys: list[str] | None, x_key: str | None) -> MetricStore:
    reader = _metrics_reader(run_dir, keys, x_key)
    reader.wait_saved()
    return reader.metrics


def _metrics_reader(run_dir: Path, keys: list[str] | None, x_key: str | None) -> DashboardReader:
    """metrics.jsonl read once (scanner threads or worker processes decode it, a thread appends each block to
    the store while the next is decoded; the user cache keeps its columns, written by a thread while the
    document is: :meth:`~DashboardReader.wait_saved`); an unknown key or step key is a
    MetricNotFoundError naming it."""
    dashboard = RunDir(run_dir).dashboard_dir
    from miles_tui.core.telemetry import DashboardReader

    reader = DashboardReader(
        dashboard, parse_workers=os.cpu_count() or 1, save_in_background=True, headless=True, streams=()
    )
    if dashboard.is_dir():
        reader.poll()
    logged = reader.metrics.keys()
    for key in keys or ():
        if key not in logged:
            raise MetricNotFoundError(_unknown("metric", key, logged), dashboard / "metrics.jsonl")
    if x_key is not None and x_key not in (step_keys := reader.metrics.step_keys()):
        raise MetricNotFoundError(_unknown("step key", x_key, step_keys), dashboard / "metrics.jsonl")
    return reader


LISTED_KEYS = 12
"""An unknown metric's message names up to this many of the run's keys (exporting them all to list them
would print every point of every series)."""


def _unknown(kind: str, name: str, known: Sequence[str]) -> str:
    """'no metric X in this run ...' with the closest names, else the run's names (the first few)."""
    if not known:
        return f"no {kind} {name!r}: this run has logged no metrics yet"
    close = difflib.get_close_matches(name, known, n=3)
    if close:
        return f"no {kind} {name!r} in this run (did you mean {', '.join(close)}?)"
    names = sorted(known)
    shown = ", ".join(names[:LISTED_KEYS]) + (f", … ({len(names):,} in all)" if len(names) > LISTED_KEYS else "")
    return f"no {kind} {name!r} in this run; it has: {shown}"


def _problems(summary: StepSummary) -> list[dict[str, Any]]:
    return [{"file": str(p.path), "kind": p.kind.value, "message": p.message} for p in summary.problems]


def _per_token(opened: OpenStep, sample_index: int, problems: list[dict[str, Any]]) -> dict[str, Any]:
    """A sample's loss mask and resolved per-token arrays, as lists (None: blank; unreadable: also a problem)."""
    from miles_tui.core.dump import PER_TOKEN_FIELDS

    train = opened.train_rows.get(sample_index)
    mask: Any = None
    if train is not None and train.loss_mask is not None:
        mask = train.loss_mask.tolist()
    elif opened.sample(sample_index).get("loss_mask") is not None:
        import numpy as np

        from miles_tui.core.dump import sample_array

        try:
            mask = sample_array(opened, sample_index, "loss_mask", np.int64).tolist()
        except CorruptFileError as err:  # that sample's mask only: the rest of the step goes on
            problems.append({"file": str(err.path), "kind": "corrupt", "message": str(err)})
    values: dict[str, Any] = {"loss_mask": mask}
    for name in PER_TOKEN_FIELDS:
        array = None if train is None else train.per_token.get(name)
        values[name] = None if array is None else array.tolist()
    return values


def step_export(run: Run, rollout_id: int, evaluation: bool, now: float, per_token: bool = False) -> dict[str, Any]:
    """The ``--step N [--eval] [--per-token]`` document."""
    if per_token:
        opened = run.open(rollout_id, evaluation, now)
        summary = opened.summary
    else:
        summary = run.summary(rollout_id, evaluation, now)
    samples = []
    problems = _problems(summary)
    for row in summary.rows:
        record = marked(row.to_dict())  # a column of an unrecognised field reads "unknown format", not null
        if per_token:
            record["per_token"] = _per_token(opened, row.sample_index, problems)
        samples.append(record)
    document: dict[str, Any] = clean(
        {
            "rollout_id": summary.rollout_id,
            "evaluation": summary.evaluation,
            "samples": samples,
            "groups": [g.to_dict() for g in summary.groups],
            "aggregate": summary.aggregate.to_dict(),
            "complete": summary.complete,
            "problems": problems,
        }
    )
    return document


def tokens_export(
    run: Run,
    rollout_id: int,
    evaluation: bool,
    sample_index: int,
    now: float,
    start: int | None = None,
    end: int | None = None,
    warn: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The ``--sample I --tokens`` payload; a window ``[start, end)`` holding no token is an error.

    ``warn`` hears which per-token arrays are null because they are unreadable (dumped, but their train
    data could not be read or placed), which the payload alone cannot tell from not dumped.
    """
    opened = run.open(rollout_id, evaluation, now)
    from miles_tui.core.dump import SERIES, FieldState, find_view, token_payload

    view = find_view(opened, sample_index)
    payload: dict[str, Any] = clean(token_payload(view, run.detokenizer, start, end))
    if payload["token_text_notice"] is not None and warn is not None:
        warn(payload["token_text_notice"])
    unreadable = [name for name in SERIES if view.states.get(name) is FieldState.UNREADABLE]
    if unreadable and warn is not None:
        warn(
            f"sample {sample_index} of step {rollout_id}: {', '.join(unreadable)} are null because they are "
            "unreadable (dumped, but their train data could not be read or placed), not because they were not dumped"
        )
    if (start is not None or end is not None) and payload["start"] >= payload["end"]:
        asked = f"[{'0' if start is None else start}, {'end' if end is None else end})"
        raise StepNotFoundError(
            f"sample {sample_index} of step {rollout_id} has no token in {asked}: it has {view.total_length} "
            f"tokens, so give --start/--end within 0..{view.total_length}",
            None,
        )
    return payload


def conversation_export(run: Run, rollout_id: int, evaluation: bool, sample_index: int, now: float) -> dict[str, Any]:
    """The ``--sample I --conversation`` document: the sample's recorded conversation (what the sample
    screen's conversation view shows), from ``trajectory/{rid}.jsonl``.

    A step that is not visible, a step without a sidecar and a sample the sidecar does not hold each raise
    :class:`~miles_tui.core.base.errors.StepNotFoundError` naming what is missing; a sidecar that cannot be read
    (permissions, not a regular file, over its cap) raises :class:`~miles_tui.core.base.errors.UnreadableFileError`
    saying why, never "no conversation recorded".
    """
    from miles_tui.core.base.errors import StepNotFoundError
    from miles_tui.core.dump import conversation_document, read_sidecar, sidecar_path

    ids = run.step_ids(now)
    if rollout_id not in (ids.evaluation if evaluation else ids.train):
        kind = "eval step" if evaluation else "step"
        raise StepNotFoundError(f"{kind} {rollout_id} is not in this run (see `miles-tui export RUN_DIR`)", run.path)
    sidecar = read_sidecar(run.path, rollout_id, evaluation)
    if sidecar is None:
        path = sidecar_path(run.path, rollout_id, evaluation)
        raise StepNotFoundError("no such file: the run recorded no conversations for this step", path)
    conversation = sidecar.conversations.get(sample_index)
    if conversation is None and sidecar.problem is not None:  # unreadable is not "none recorded"
        from miles_tui.core.base.errors import UnreadableFileError

        prefix = f"{sidecar.path}: "
        problem = sidecar.problem[len(prefix) :] if sidecar.problem.startswith(prefix) else sidecar.problem
        raise UnreadableFileError(f"the step's conversations cannot be read: {problem}", sidecar.path)
    if conversation is None:
        held = sorted(sidecar.conversations)
        some = ", ".join(map(str, held[:8])) + (" …" if len(held) > 8 else "")
        raise StepNotFoundError(
            f"no conversation recorded for sample {sample_index} (samples with one: {some or 'none'})", sidecar.path
        )
    document: dict[str, Any] = clean(
        {
            "rollout_id": rollout_id,
            "evaluation": evaluation,
            **conversation_document(conversation),
            "file": str(sidecar.path),
            "malformed_lines": list(sidecar.bad_lines),
        }
    )
    return document


FORMULA_STARTS: Final = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a CSV cell as a formula."""
_PLAIN_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def csv_cell(value: Any) -> str:
    """One CSV cell: "" for None, true/false, a number as written, text made inert and never a formula."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return inert(not_a_formula(str(value)))


def not_a_formula(text: str) -> str:
    """``text`` with a leading ``'`` when a spreadsheet would run it as a formula (a plain number stays)."""
    if text.startswith(FORMULA_STARTS) and _PLAIN_NUMBER.fullmatch(text) is None:
        return "'" + text
    return text


def rows_csv(document: dict[str, Any]) -> str:
    """ROW columns of a step document as CSV, one line per sample (empty cell for null; text made inert and
    never a spreadsheet formula: :func:`csv_cell`)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(ROW_COLUMNS)
    for sample in document["samples"]:
        writer.writerow([csv_cell(sample.get(column)) for column in ROW_COLUMNS])
    return out.getvalue()
