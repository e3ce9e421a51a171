"""``dashboard/metrics.jsonl`` followed: its tail, its columnar store, its decoder and its cache entry.

Contract:

- :meth:`MetricStream.poll` is the tail rule of :mod:`miles_tui.core.base.tail` (complete
  lines only, one transaction per poll, rewrite detection), with the lines
  decoded into columns by :class:`~miles_tui.core.telemetry.metrics.metric_workers.MetricBlockDecoder`
  (scanner threads or worker processes for a long stretch, stopped again before the poll returns).
  Without ``headless`` (the app), a long read pauses after each block as long
  as the block took: the UI's thread gets the GIL at least half of the time.
  ``headless`` (a process with no UI: one more thread that wants the GIL
  would slow the UI's keys): a block of at least :data:`LONG_BLOCK_BYTES`
  is appended to the store by a thread while the tail reads and decodes the
  next one (in order, one at a time); the poll returns only once every block
  is in the store.
- The first poll starts from the user cache when it holds this file's records
  (:mod:`miles_tui.core.telemetry.metrics.metric_cache`): the tail then reads only the bytes after them.
  A poll that has read enough new bytes (``cache_min_bytes`` in all, and an
  eighth more than the entry covers) writes the entry again. A rewritten file
  drops the store's records, as the tail rule says, and so its entry.
- ``save_in_background``: the entry is written by a thread while the caller
  goes on (the export writes its document meanwhile: both mostly wait on
  writes, which release the GIL); :meth:`MetricStream.wait_saved` waits for it,
  and the next poll waits before it reads. The thread writes views of the
  store's arrays, which appends never touch.
- When the store first drops keys over its budget (:data:`~miles_tui.core.telemetry.metrics.metric_store.MAX_KEYS`),
  the poll's ``error`` names the file and says so (once: the budget stays hit).
- Called by :class:`~miles_tui.core.telemetry.streams.DashboardReader` under its lock; never
  writes into the run.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Final

from miles_tui.core.base.errors import StreamError
from miles_tui.core.base.pacing import Pacer
from miles_tui.core.base.tail import BLOCK_SIZE, ReadHook, TailFile, TailRead
from miles_tui.core.telemetry.metrics import metric_cache
from miles_tui.core.telemetry.metrics.metric_batch import MetricRow, decode_metric_record
from miles_tui.core.telemetry.metrics.metric_store import MAX_KEYS, MetricStore
from miles_tui.core.telemetry.metrics.metric_workers import BLOCK_BYTES, MetricBlockDecoder

CACHE_MIN_BYTES: Final = 4 << 20
"""Files shorter than this are not cached: reading them again costs milliseconds."""

LONG_BLOCK_BYTES: Final = 4 << 20
"""A block at least this long is appended behind (``headless``) or followed by a pause (otherwise)."""

YIELD_SHARE: Final = 1.0
YIELD_MAX: Final = 0.25
"""Without ``headless``, after each long block the read pauses YIELD_SHARE times as long as the block took (at
most YIELD_MAX seconds): a long read shares the process with a UI, and the block's batch assembly and append
hold the GIL; without a pause they took half of every slice the UI's thread asked for (keys 100-280 ms while 2M
lines load, against 30-40 ms)."""

RESAVE_BYTES: Final = 32 << 20
"""New bytes (at least) after which the cache entry is written again."""


class MetricStream:
    """See the module docstring."""

    def __init__(
        self,
        path: Path,
        *,
        read_hook: ReadHook | None = None,
        workers: int = 0,
        nice: int = 0,
        cache_min_bytes: int | None = None,
        save_in_background: bool = False,
        headless: bool = False,
    ) -> None:
        self.path = path
        self.save_in_background = save_in_background
        self.headless = headless
        self._saving: threading.Thread | None = None
        self.store = MetricStore()
        """Every record read so far."""
        self.decoder = MetricBlockDecoder(path, workers=workers, nice=nice)
        self.tail: TailFile[MetricRow] = TailFile(
            path,
            decode_metric_record,
            read_hook=read_hook,
            block_size=BLOCK_BYTES if workers > 0 else BLOCK_SIZE,
            decode_block=self.decoder,
        )
        self.cache_min_bytes = CACHE_MIN_BYTES if cache_min_bytes is None else cache_min_bytes
        self._started = False
        self._saved_end = 0
        self._size: int | None = None
        self._appender: ThreadPoolExecutor | None = None
        self._pacer = Pacer(YIELD_SHARE, YIELD_MAX)
        """Pauses a long read between blocks (not ``headless``)."""
        self._appending: Future[None] | None = None
        self._budget_reported = False

    def poll(self) -> TailRead:
        """One transaction of the tail: new complete lines into the store (see the module docstring)."""
        self.wait_saved()
        if not self._started:
            self._started = True
            self._restore()
        self._size = None  # stat'ed when a block arrives: a poll that finds nothing costs the tail's one stat
        self._pacer.restart()
        try:
            read = self.tail.poll(self._append, self._on_reset)
            self._appended()
        finally:
            self.decoder.close()
            appender, self._appender = self._appender, None
            if appender is not None:
                appender.shutdown(wait=True)
        self._save()
        return self._budget_notice(read)

    def _budget_notice(self, read: TailRead) -> TailRead:
        """The read, with a problem naming the file the first time keys were dropped over the budget."""
        if not self.store.dropped_keys or self._budget_reported or read.error is not None:
            return read
        self._budget_reported = True
        message = (
            f"more than {MAX_KEYS:,} distinct metric keys: later keys (the first {self.store.first_dropped!r}) "
            "are not kept; a run logs a few hundred, so check what writes this file"
        )
        return replace(read, error=StreamError(message, self.path))

    def _append(self, records: Sequence[MetricRow]) -> None:
        # A long read sizes the store's arrays for the whole file at its first block (no growth slack).
        block = self.decoder.last_block
        if self._size is None:
            try:
                self._size = os.stat(self.path).st_size
            except OSError:
                self._size = 0
        ahead = (self._size - block[0]) / block[1] * 1.02 if block[1] else 1.0
        ahead = ahead if ahead > 2.0 else 1.0
        long = block[1] >= LONG_BLOCK_BYTES
        if not (self.headless and long):
            self.store.append_batch(records, ahead)
            if long:
                self._pacer.pause()
            return
        # A long read's block is copied into the store by a thread while the next block is decoded (the copies
        # release the GIL); one block at a time, in order, and all of them before the poll returns.
        self._appended()
        if self._appender is None:
            self._appender = ThreadPoolExecutor(1, "metrics store append")
        self._appending = self._appender.submit(self.store.append_batch, records, ahead)

    def _appended(self) -> None:
        """Wait for the block being appended, if any (its error, if it failed, is raised here)."""
        appending, self._appending = self._appending, None
        if appending is not None:
            appending.result()

    def _on_reset(self) -> None:
        self._appended()
        self.store.clear()
        self._saved_end = 0

    def _restore(self) -> None:
        restored = metric_cache.load(self.path)
        if restored is None:
            return
        self.store.replace(restored.store)
        self.tail.resume(restored.end, restored.ino)
        self.decoder.restored(restored.head, restored.tail, restored.end)
        self._saved_end = restored.end

    def _save(self) -> None:
        fingerprint = self.decoder.fingerprint()
        if fingerprint is None or fingerprint.end != self.tail.offset or fingerprint.end < self.cache_min_bytes:
            return
        if fingerprint.end - self._saved_end < max(RESAVE_BYTES, self._saved_end // 8) and self._saved_end:
            return
        if not self.save_in_background:
            if metric_cache.save(self.path, self.store, fingerprint):
                self._saved_end = fingerprint.end
            return
        columns = self.store.columns()  # taken now: what this poll read, whatever comes next
        self._saved_end = fingerprint.end  # a failed write is retried after as many new bytes as a good one

        def save() -> None:
            metric_cache.save_columns(self.path, columns, fingerprint)

        self._saving = threading.Thread(target=save, name="metrics cache save")
        self._saving.start()

    def wait_saved(self) -> None:
        """Return once a cache entry being written in the background is written (or failed)."""
        saving, self._saving = self._saving, None
        if saving is not None:
            saving.join()
