"""The metrics tail's block decoder: big stretches decoded off the caller's GIL (scanner threads, or processes).

Contract:

- :class:`MetricBlockDecoder` is a :data:`miles_tui.core.base.tail.BlockDecoder` for
  ``metrics.jsonl`` (and has the tail's ``decode_prefix``: it reads
  ``data[:end]`` where it lies). The result is always that of
  :func:`miles_tui.core.telemetry.metrics.metric_batch.decode_block` on the block.
- With the compiled line scanner (:data:`~.line_templates.AVAILABLE`), a
  block of at least ``parallel_bytes``
  goes through :func:`~.line_templates.scan_decode` in ``workers`` threads
  (the scanner releases the GIL; each thread runs ``nice`` lower), in twice as
  many parts, so this thread assembles the first parts while the last ones are
  scanned. The scanner's arrays are kept from block to block until
  :meth:`close`.
  A shorter one (every poll of a live run) is scanned in the calling thread.
- Without it, a block shorter than ``parallel_bytes`` is decoded in the
  calling thread; a longer one (a first load) is cut at line ends into pieces
  that ``workers`` processes decode, and their batches are joined in file
  order. The pieces travel to the workers as bytes: a worker never
  reads the file, so what it decodes is exactly what the tail read in its
  transaction. Workers are started (``forkserver``, else ``spawn``; never
  ``fork``: the app has threads) on the first long block; ``nice`` lowers
  their priority. A worker that fails has its piece decoded in the calling
  thread instead.
- :meth:`close`, which the reader calls at the end of every poll, stops the
  threads or processes and drops the arrays: nothing outlives the poll that
  needed it.
- It also remembers the first and the last few KB of what it decoded
  (:meth:`fingerprint`): the cache validates a file's covered bytes with them.
"""

from __future__ import annotations

import gc
import hashlib
import os
import sys
import threading
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from miles_tui.core.base.tail import MalformedLineError
from miles_tui.core.base.worker_processes import start_context
from miles_tui.core.telemetry.metrics import line_templates
from miles_tui.core.telemetry.metrics.metric_batch import BadLine, MetricBatch, cut_lines, decode_block

PARALLEL_BYTES: Final = 8 << 20
"""Blocks at least this long are decoded by worker processes (when there are workers)."""

PIECE_BYTES: Final = 2 << 20
"""What one worker task decodes."""

BLOCK_BYTES: Final = 32 << 20
"""What the metrics tail reads per block when it has workers (the parts of one block run in parallel). 32 MB: a
2M-line export took 8.1-11.3 s (median 8.8) against 10.2-11.5 s with 16 MB, peak RSS 938 MB; 64 MB went over 1 GB."""

WINDOW: Final = 4096
"""Bytes of the start and of the end of the decoded stretch kept for :meth:`MetricBlockDecoder.fingerprint`."""


def _thread_start(nice: int) -> None:
    """A scanner thread's start: its own nice value (Linux keeps one per thread), so the UI's thread comes first."""
    if nice and sys.platform.startswith("linux"):
        try:
            thread = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, thread, os.getpriority(os.PRIO_PROCESS, thread) + nice)
        except OSError:
            return


def _worker_start(nice: int) -> None:
    gc.disable()  # a worker's objects live for one piece: the cyclic collector would only walk them
    if nice:
        try:
            os.nice(nice)
        except OSError:
            return


def _fileno(stream: object) -> int:
    try:
        return int(stream.fileno())  # type: ignore[attr-defined]
    except Exception:
        return -1


@dataclass(frozen=True)
class Fingerprint:
    """What identifies the bytes ``[0, end)`` of a file: its first and its last few KB, hashed."""

    end: int
    """Where the covered bytes end (just after a newline)."""
    head: str
    """blake2b of the first min(WINDOW, end) bytes."""
    tail: str
    """blake2b of the WINDOW bytes before ``end`` (fewer when the file is shorter)."""

    @staticmethod
    def of(head: bytes, tail: bytes, end: int) -> Fingerprint:
        return Fingerprint(end, hashlib.blake2b(head).hexdigest(), hashlib.blake2b(tail).hexdigest())


class MetricBlockDecoder:
    """See the module docstring."""

    def __init__(
        self,
        path: Path,
        *,
        workers: int = 0,
        nice: int = 0,
        parallel_bytes: int | None = None,
        piece_bytes: int | None = None,
    ) -> None:
        self.path = path
        self.workers = workers
        self.nice = nice
        self.parallel_bytes = PARALLEL_BYTES if parallel_bytes is None else parallel_bytes
        self.piece_bytes = PIECE_BYTES if piece_bytes is None else piece_bytes
        self._pool: ProcessPoolExecutor | None = None
        self._threads: ThreadPoolExecutor | None = None
        self._buffers: line_templates.BufferPool | None = None
        self._head = b""
        self._tail = b""
        self._end = 0
        self._whole = False
        self.last_block = (0, 0)
        """(offset, bytes) of the last block decoded, its final newline included."""

    def __call__(self, block: bytes, base: int) -> tuple[MetricBatch, list[MalformedLineError]]:
        return self.decode_prefix(block, len(block), base)

    def decode_prefix(self, data: bytes, end: int, base: int) -> tuple[MetricBatch, list[MalformedLineError]]:
        """Decode the complete lines ``data[:end]`` (no newline at ``end``) starting at byte ``base``: what a call
        with ``data[:end]`` does, without that copy (the tail calls this when it has it)."""
        self._remember(data, end, base)
        self.last_block = (base, end + 1)
        if line_templates.AVAILABLE:
            batch, bad = self._scanned(data, end, base)
        else:
            block = data if end == len(data) else data[:end]
            if self.workers > 0 and end >= self.parallel_bytes:
                batch, bad = self._parallel(block, base)
            else:
                batch, bad = decode_block(block, base)
        return batch, [MalformedLineError(self.path, b.offset, b.reason, b.excerpt) for b in bad]

    def _remember(self, data: bytes, end: int, base: int) -> None:
        if base == 0:
            self._head, self._tail, self._whole = b"", b"", True
        elif base != self._end:
            self._whole = False  # a gap: the start is unknown here, so no fingerprint until a read from 0
        if len(self._head) < WINDOW:
            self._head = (self._head + data[: min(WINDOW, end)] + b"\n")[:WINDOW]
        if end + 1 >= WINDOW:
            self._tail = data[end + 1 - WINDOW : end] + b"\n"
        else:
            self._tail = (self._tail + data[:end] + b"\n")[-WINDOW:]
        self._end = base + end + 1

    def restored(self, head: bytes, tail: bytes, end: int) -> None:
        """The first and last bytes of what a cache covered, up to ``end`` (the tail resumes there)."""
        self._head, self._tail, self._end, self._whole = head[:WINDOW], tail[-WINDOW:], end, True

    def fingerprint(self) -> Fingerprint | None:
        """The fingerprint of everything decoded so far (None before anything was)."""
        if not self._end or not self._whole:
            return None
        return Fingerprint.of(self._head, self._tail, self._end)

    def _scanned(self, data: bytes, end: int, base: int) -> tuple[MetricBatch, list[BadLine]]:
        """The compiled scanner's decode of ``data[:end]``: in ``workers`` threads for a long block (it releases
        the GIL)."""
        if self._buffers is None:
            self._buffers = line_templates.BufferPool()
        if self.workers < 2 or end < self.parallel_bytes:
            return line_templates.scan_decode(data, base, buffers=self._buffers, end=end)
        if self._threads is None:
            self._threads = ThreadPoolExecutor(self.workers, "miles-tui-scan", _thread_start, (self.nice,))
        # twice as many parts as threads: this thread assembles the first parts while the last ones are scanned
        return line_templates.scan_decode(
            data, base, parts=2 * self.workers, scans=self._threads.map, buffers=self._buffers, end=end
        )

    def _parallel(self, block: bytes, base: int) -> tuple[MetricBatch, list[BadLine]]:
        try:
            pool = self._start()
        except Exception:  # no worker processes here (a sandbox, no semaphores ...): this thread decodes
            self.workers = 0
            return decode_block(block, base)
        futures: list[tuple[int, int, Future[tuple[MetricBatch, list[BadLine]]] | None]] = []
        for start, end in cut_lines(block, len(block), self.piece_bytes):
            try:
                futures.append((start, end, pool.submit(decode_block, block[start:end], base + start)))
            except Exception:  # the pool broke: this piece is decoded here
                futures.append((start, end, None))
        batches: list[MetricBatch] = []
        bad: list[BadLine] = []
        for start, end, future in futures:
            try:
                if future is None:
                    raise RuntimeError("no worker")
                batch, lines = future.result()
            except Exception:  # a worker died or failed: the same piece, decoded here
                batch, lines = decode_block(block[start:end], base + start)
            batches.append(batch)
            bad += lines
        return MetricBatch.concat(batches), bad

    def _start(self) -> ProcessPoolExecutor:
        if self._pool is None:
            context = start_context()
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=context, initializer=_worker_start, initargs=(self.nice,)
            )
        return self._pool

    def close(self) -> None:
        """Stop the worker processes, if any were started (the next long block starts them again)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        self._buffers = None  # the scanner's arrays go with the poll that needed them
        threads, self._threads = self._threads, None
        if threads is not None:
            threads.shutdown(wait=True, cancel_futures=True)
