"""Hours no cache entry covers, read by a pool of worker processes, each saving its hour's entry for its store.

Contract: :func:`read_in_workers` hands the given partitions of one or more
:class:`~.store.HourStore` to one pool (biggest first, so the workers finish
together), then restores each hour into its store as soon as its worker is
done; nothing happens when they are few bytes (:data:`PARALLEL_BYTES`: the
store reads them itself). :func:`refreshing_together` does that for every
unread hour of several stores while the caller's block runs, then refreshes
the stores (``report``: phases and engine_series, with ``metrics.jsonl`` read
meanwhile). Workers start from a forkserver (never fork: the monitor runs
threads), with the caller's cache settings and niceness and nothing they
print reaching the terminal. A worker that fails leaves its hour to its store.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.context
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Final

from miles_tui.core.base import cache_dir
from miles_tui.core.base.errors import StreamError
from miles_tui.core.base.worker_processes import start_context
from miles_tui.core.telemetry.hours import cache
from miles_tui.core.telemetry.partitions import hour_of

if TYPE_CHECKING:
    from miles_tui.core.telemetry.hours.store import HourStore, _Part

PARALLEL_BYTES: Final = 64 << 20
"""Hours to read from scratch are read by worker processes once they hold this many bytes together."""


def read_in_workers(
    work: Sequence[tuple[HourStore, Sequence[_Part]]], workers: int, nice: int = 0, columns: bool | None = None
) -> None:
    """Read the given partitions of the given stores by one pool of ``workers`` processes, each saving its hour's
    cache entry; then restore them into their stores. Nothing when they are few bytes (this process reads them)."""
    with _reading(work, workers, nice, columns):
        pass


@contextlib.contextmanager
def _reading(
    work: Sequence[tuple[HourStore, Sequence[_Part]]], workers: int, nice: int = 0, columns: bool | None = None
) -> Iterator[None]:
    """:func:`read_in_workers`, the caller's block running while the workers read; ``columns``: whether the
    workers save the hours' columns beside their summaries (None: as each store saves). Nothing without two
    workers or with caching off (a worker hands its hour over through the cache)."""
    jobs = [(store, part) for store, parts in work for part in parts] if workers >= 2 and cache.enabled() else []
    try:
        sizes = {part.path: os.stat(part.path).st_size for _, part in jobs}
    except OSError:
        sizes = {}
    if len(jobs) < 2 or len(sizes) < len(jobs) or sum(sizes.values()) < PARALLEL_BYTES:
        yield
        return
    order = sorted(jobs, key=lambda job: -sizes[job[1].path])  # the biggest first: the workers finish together
    pool = None
    futures: dict[Future[bool], tuple[HourStore, _Part]] = {}
    try:
        pool = ProcessPoolExecutor(
            workers, mp_context=_context(), initializer=_start, initargs=(nice, _cache_settings())
        )
        for store, part in order:
            saved = store.save_columns if columns is None else columns
            future = pool.submit(_read_to_cache, str(store.dashboard), store.stream, str(part.path), saved)
            futures[future] = (store, part)
    except (OSError, RuntimeError, ValueError, BrokenProcessPool):
        pass  # the stores read what no worker took themselves
    restored: set[int] = set()
    try:
        yield
    finally:
        try:
            for future in as_completed(futures):  # each hour restored as soon as its worker is done
                future.result()
                store, part = futures[future]
                store._restore(part)
                restored.add(id(part))
        except (OSError, RuntimeError, ValueError, BrokenProcessPool):
            pass  # what a worker did not save, its store reads itself
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
    for store, part in jobs:
        if id(part) not in restored:
            store._restore(part)


@contextlib.contextmanager
def refreshing_together(stores: Sequence[HourStore], workers: int) -> Iterator[list[StreamError]]:
    """:meth:`HourStore.refresh` of every partition of each store, the hours no cache entry covers read first by
    one pool of workers for all the stores (one pool's start; no store waits on another's last hour) while the
    caller's block runs. The list it gives is filled with the stores' problems when the block ends."""
    problems: list[StreamError] = []
    with _reading([(store, store.unread_parts()) for store in stores], workers):
        yield problems
    problems.extend(problem for store in stores for problem in store.refresh())


def _context() -> multiprocessing.context.BaseContext:
    """forkserver where there is one, else spawn; never fork (the monitor has threads)."""
    return start_context()


def _cache_settings() -> dict[str, str | None]:
    """This process's cache settings (a forkserver's children have the environment it started with, not ours)."""
    return {name: os.environ.get(name) for name in (cache_dir.ENV_DIR, cache_dir.ENV_MAX, cache_dir.ENV_OFF)}


def _start(nice: int, settings: Mapping[str, str | None]) -> None:
    """A worker's start: the caller's cache settings, its niceness, and nothing it might print (a numpy warning)
    reaching the terminal the monitor draws on."""
    for name, value in settings.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if nice:
        with contextlib.suppress(OSError):
            os.nice(nice)
    warnings.simplefilter("ignore")
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.close(devnull)


def _read_to_cache(dashboard: str, stream: str, path: str, save_columns: bool = True) -> bool:
    """A worker: read one hour whole, summarise it and save its cache entry (what the parent restores)."""
    from miles_tui.core.telemetry.hours.store import HourStore  # the store starts pools of these: imported here

    store = HourStore(Path(dashboard), stream, keep_columns=False, save_columns=save_columns)
    part = store._part(Path(path), hour_of(Path(path).name))
    store._sync(part, [], settled=True)
    return part.end > 0
