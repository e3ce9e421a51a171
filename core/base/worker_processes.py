"""Starting worker processes from inside a running monitor.

Contract: :func:`stderr_with_a_file` makes ``sys.stderr`` a real file for the
``with`` block when it is not one (inside a Textual app it is a capture whose
``fileno()`` is -1): multiprocessing's resource tracker hands that descriptor to
the helper it starts, and a -1 fails the start ("bad value(s) in fds_to_keep").
/dev/null stands in, so nothing a helper writes reaches the terminal the monitor
draws on. :func:`start_context` is the one way core and the app start a pool:
forkserver where there is one, else spawn, never fork (the monitor runs threads),
with the resource tracker already running.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.context
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def stderr_with_a_file() -> Iterator[None]:
    """See the module docstring."""
    try:
        usable = sys.stderr is not None and sys.stderr.fileno() >= 0
    except (OSError, ValueError, AttributeError):
        usable = False
    if usable:
        yield
        return
    saved = sys.stderr
    with open(os.devnull, "w") as devnull:
        sys.stderr = devnull
        try:
            yield
        finally:
            sys.stderr = saved


def start_context(method: str | None = None) -> multiprocessing.context.BaseContext:
    """A process context to start workers with (``method``: one asked for, else forkserver or spawn), its
    resource tracker started first under :func:`stderr_with_a_file`."""
    from multiprocessing import resource_tracker

    methods = multiprocessing.get_all_start_methods()
    chosen = method or ("forkserver" if "forkserver" in methods else "spawn")
    with stderr_with_a_file():
        resource_tracker.ensure_running()
    return multiprocessing.get_context(chosen)
