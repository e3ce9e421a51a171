"""A run's ``engine_series`` for a time window, read through the hour stores: only the hours the window touches.

Contract: :class:`EngineHours` follows the stream with an
:class:`~miles_tui.core.telemetry.hours.store.HourStore` (each hour parsed once,
with the user cache; hours outside a window are known by name only, never
opened). :meth:`EngineHours.table` brings the hours a window touches (and the
newest) up to date and returns an
:class:`~miles_tui.core.telemetry.engine_series.EngineTable` of the samples in
the window; :meth:`EngineHours.newest` the newest scrape time, reading the
newest hour only. Thread-safe (one lock); reads no clock, never writes into
the run.
"""

from __future__ import annotations

import threading
from pathlib import Path

from miles_tui.core.base.errors import StreamError
from miles_tui.core.telemetry.engine_series import EngineTable
from miles_tui.core.telemetry.hours.engine_columns import engine_table
from miles_tui.core.telemetry.hours.store import ENGINE_STREAM, HourStore


class EngineHours:
    """See the module docstring."""

    def __init__(self, dashboard: Path | str, *, workers: int = 0, nice: int = 0) -> None:
        self._lock = threading.Lock()
        self._store = HourStore(dashboard, ENGINE_STREAM, keep_columns=False, workers=workers, nice=nice)
        self.problems: list[StreamError] = []
        """Problems the last call found (malformed lines, unreadable files), each said once by the store."""

    def newest(self) -> float | None:
        """The newest scrape time (the newest hour, and a flat file, read)."""
        with self._lock:
            self.problems = self._store.refresh(newest=True)
            span = self._store.span()
            return None if span is None else span[1]

    def table(self, since: float | None, until: float | None) -> EngineTable:
        """Every sample with a time in [since, until] (None: unbounded)."""
        with self._lock:
            self.problems = self._store.refresh(since, until) + self._store.refresh(newest=True)
            columns = self._store.columns(since, until)
            if since is not None or until is not None:
                ts = columns.numbers["ts"]
                keep = (ts >= (since if since is not None else -float("inf"))) & (
                    ts <= (until if until is not None else float("inf"))
                )
                columns = columns.take(keep)
            return engine_table(columns)

    def hours_read(self) -> list[tuple[float | None, bool]]:
        """(hour, read) of every file known, flat file first, then by hour."""
        with self._lock:
            return [(hour, read) for _, hour, read in self._store.partitions()]
