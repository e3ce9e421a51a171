"""The engine figures of a followed run, recomputed only when its ``engine_series`` records changed.

Contract: :func:`reader_engine_figures` returns
:func:`~miles_tui.core.analysis.engine_advisories.engine_figures` over every engine record a
:class:`~miles_tui.core.telemetry.streams.DashboardReader` holds. The figures are kept per reader
with the partitions they were computed from (file, parsed or not, records
held); a call that finds the same partitions returns them without touching a
record, so a poll that brought no new scrape costs nothing here. Thread-safe;
reads no file and no clock (the reader's poll does the reading).
"""

from __future__ import annotations

import threading
import weakref
from typing import Final

from miles_tui.core.analysis.engine_advisories import EngineFigures, engine_figures
from miles_tui.core.telemetry import DashboardReader, EngineTable, PartitionInfo

STREAM: Final = "engine_series"

_lock = threading.Lock()
_cache: weakref.WeakKeyDictionary[DashboardReader, tuple[tuple[PartitionInfo, ...], EngineFigures]] = (
    weakref.WeakKeyDictionary()
)


def reader_engine_figures(reader: DashboardReader) -> EngineFigures:
    """The engine rules' inputs over everything ``reader`` holds (cached until its engine partitions change)."""
    with _lock:
        before = reader.partitions(STREAM)
        cached = _cache.get(reader)
        if cached is not None and cached[0] == before:
            return cached[1]
        figures = engine_figures(EngineTable(reader.loaded_records(STREAM)))
        if reader.partitions(STREAM) == before:  # no poll landed in between: the figures match ``before``
            _cache[reader] = (before, figures)
        return figures
