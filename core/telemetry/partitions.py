"""One stream file of ``dashboard/`` as :class:`~miles_tui.core.telemetry.streams.DashboardReader` holds it.

Contract: a :class:`Partition` is a tail, the records parsed from it (a
:class:`~miles_tui.core.telemetry.record_table.RecordTable` for the bulky
streams, a list for the rest), the time span they cover and a generation that
changes whenever its records are replaced. Not thread-safe: the reader locks
around it. Reads no file itself (its tail does, when the reader polls it).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final

from miles_tui.core.base.tail import TailFile
from miles_tui.core.telemetry.record_table import Interner, RecordTable
from miles_tui.core.telemetry.stream_records import GpuUtil, Phase, StreamRecord, record_span

COLUMNAR_STREAMS: Final = {"gpu_util": GpuUtil, "phases": Phase}
"""Streams whose records are held as columns (:class:`RecordTable`): the bulk of a long run's telemetry."""

HOUR_SECONDS: Final = 3600.0


@dataclass(frozen=True)
class PartitionInfo:
    """One stream file as the reader knows it."""

    stream: str
    """Stream name."""
    path: Path
    """The file."""
    hour: float | None
    """Start of its UTC hour (seconds since the epoch); None for a flat file covering all time."""
    loaded: bool
    """Whether it has been parsed (and is followed)."""
    records: int
    """Records held from it."""
    generation: int = 0
    """Changes when the records held are replaced (the file was rewritten, or vanished and came back): the
    same path and generation mean the records held then are still the first ones now."""


_generations = itertools.count(1)


def next_generation() -> int:
    """A generation no partition had before (see :attr:`PartitionInfo.generation`)."""
    return next(_generations)


class Partition:
    """A stream file: its tail, its records, the time span they cover."""

    __slots__ = ("generation", "hour", "key", "loaded", "records", "span", "tail")

    def __init__(
        self, key: str, tail: TailFile[StreamRecord], hour: float | None, stream: str, interner: Interner | None = None
    ) -> None:
        self.key = key
        """The path as listed: how a later listing tells that the file is still there."""
        self.tail = tail
        self.hour = hour
        self.loaded = False
        kind = COLUMNAR_STREAMS.get(stream)
        self.records: list[StreamRecord] | RecordTable[Any] = [] if kind is None else RecordTable(kind, interner)
        self.span: tuple[float, float] | None = None
        self.generation = next_generation()

    def sort_key(self) -> float:
        return -1.0 if self.hour is None else self.hour

    def overlaps(self, since: float | None, until: float | None) -> bool:
        return hour_overlaps(self.hour, since, until)

    def widen(self, records: Sequence[StreamRecord]) -> None:
        lo, hi = self.span if self.span is not None else (float("inf"), float("-inf"))
        for record in records:
            span = record_span(record)
            if span is not None:
                lo, hi = min(lo, span[0]), max(hi, span[1])
        if lo <= hi:
            self.span = (lo, hi)


def hour_overlaps(hour: float | None, since: float | None, until: float | None) -> bool:
    """Whether the partition of ``hour`` (None: a flat file, all time) may hold records of [since, until]."""
    if hour is None:
        return True
    return (since is None or hour + HOUR_SECONDS > since) and (until is None or hour <= until)


@functools.lru_cache(maxsize=1 << 14)
def hour_of(name: str) -> float | None:
    """``20260820_10.jsonl`` -> the epoch second 2026-08-20T10:00Z; None for any other name (remembered: every
    refresh lists every hour file of a stream, a month of them)."""
    stem, ext = name[:11], name[11:]
    digits = stem[:8] + stem[9:]
    if ext != ".jsonl" or stem[8:9] != "_" or not (digits.isascii() and digits.isdigit()):
        return None
    try:
        hour = datetime(int(stem[:4]), int(stem[4:6]), int(stem[6:8]), int(stem[9:11]), tzinfo=timezone.utc)
    except ValueError:
        return None
    return hour.timestamp()
