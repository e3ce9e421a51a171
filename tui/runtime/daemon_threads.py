"""Threads for blocking reads of the run that never hold up the app's exit.

Contract: :class:`DaemonThreadExecutor` runs submitted calls on daemon worker
threads and never joins one. Like ThreadPoolExecutor it reuses an idle worker
(so a call starts as soon, and in the same order relative to the event loop),
but it starts another whenever none is idle, so a worker stuck in the kernel (a
hung network mount, a device that never answers) costs one thread, never the
next read. When the app quits, asyncio's executor shutdown returns at once, and
the interpreter waits at exit only for non-daemon threads and for
ThreadPoolExecutor's own workers, which this class never starts. It subclasses
ThreadPoolExecutor because asyncio accepts nothing else as a loop's default executor.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_Work = tuple["Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]]

_names = itertools.count(1)


class DaemonThreadExecutor(ThreadPoolExecutor):
    """An executor of daemon workers, started as needed and never joined; ``shutdown`` never waits."""

    def __init__(self, name: str = "miles-tui-read") -> None:
        super().__init__(max_workers=1, thread_name_prefix=name)  # the pool's own workers are never started
        self._name = name
        self._queue: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._closed = False
        self._closing = threading.Lock()

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        future: Future[T] = Future()
        with self._closing:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._queue.put((future, fn, args, kwargs))
            if not self._idle.acquire(blocking=False):  # no worker waiting: start one
                threading.Thread(target=self._work, name=f"{self._name}-{next(_names)}", daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            future, fn, args, kwargs = self._queue.get()
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # handed to the waiting side, as ThreadPoolExecutor does
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, fn, args, kwargs  # hold nothing of a finished call while idle
            self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuse new calls; never wait for running ones (a stuck read must not block the exit)."""
        with self._closing:
            self._closed = True
        super().shutdown(wait=False, cancel_futures=cancel_futures)
