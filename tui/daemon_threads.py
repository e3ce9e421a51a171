"""Threads for blocking reads of the run that never hold up the app's exit.

Contract: :class:`DaemonThreadExecutor` runs each submitted call in a new
daemon thread and never joins one. A read stuck in the kernel (a hung network
mount, a device that never answers) is abandoned when the app quits instead of
blocking it: asyncio's executor shutdown returns at once, and the interpreter
waits at exit only for non-daemon threads and for ThreadPoolExecutor's own
workers, which this class never starts. It subclasses ThreadPoolExecutor
because asyncio accepts nothing else as a loop's default executor.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_names = itertools.count(1)


class DaemonThreadExecutor(ThreadPoolExecutor):
    """An executor whose every call runs in its own daemon thread; ``shutdown`` never waits."""

    def __init__(self, name: str = "miles-tui-read") -> None:
        super().__init__(max_workers=1, thread_name_prefix=name)  # the pool's own workers are never started
        self._name = name
        self._closed = False
        self._closing = threading.Lock()

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        with self._closing:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
        future: Future[T] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # handed to the waiting side, as ThreadPoolExecutor does
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=run, name=f"{self._name}-{next(_names)}", daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuse new calls; never wait for running ones (a stuck read must not block the exit)."""
        with self._closing:
            self._closed = True
        super().shutdown(wait=False, cancel_futures=cancel_futures)
