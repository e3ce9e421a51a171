"""One view computed in a thread at a time, at most one more waiting: what the GPU and engine views share.

Contract of :class:`Recompute`: :meth:`Recompute.request` asks for the view
again. On the event loop it calls ``prepare()`` (reads what the computation
needs from the screen: sizes, window, clock) and runs the job it returns in a
worker thread. While a job runs, further requests are coalesced into one more
run after it. A job's view reaches ``show`` only if no newer request was made
since it started and the owner is still attached; a job that raises gives
``failed`` one line of text, already inert (a telemetry problem never takes the
screen down, nor puts a run's bytes on the terminal).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Generic, TypeVar

from textual.widget import Widget

from miles_tui.core.base.inert_text import inert

V = TypeVar("V")


class Recompute(Generic[V]):
    """The coalesced, generation-checked computation of one view (see the module docstring)."""

    def __init__(
        self,
        owner: Widget,
        group: str,
        prepare: Callable[[], Callable[[], V]],
        show: Callable[[V], None],
        failed: Callable[[str], None],
    ) -> None:
        self._owner, self._group = owner, group
        self._prepare, self._show, self._failed = prepare, show, failed
        self.running = False
        """A job is in its thread."""
        self.again = False
        """A request came while it ran: one more run follows."""
        self.generation = 0
        """How many jobs have started; a result of an older one is not shown."""

    def request(self) -> None:
        """Compute the view again (coalesced: at most one computation runs, one more waits)."""
        if self.running:
            self.again = True
            return
        self.running, self.again = True, False
        self.generation += 1
        job = functools.partial(self._run, self.generation, self._prepare())
        self._owner.run_worker(job, thread=True, group=self._group, exit_on_error=False)

    def _run(self, generation: int, job: Callable[[], V]) -> None:
        try:
            view = job()
        except Exception as err:  # telemetry problems never take the screen down
            self._owner.app.call_from_thread(self._fail, str(err))
            return
        self._owner.app.call_from_thread(self._land, generation, view)

    def _finish(self) -> None:
        self.running = False
        if self.again:
            self.request()

    def _fail(self, message: str) -> None:
        self._finish()
        self._failed(inert(message))

    def _land(self, generation: int, view: V) -> None:
        self._finish()
        if generation == self.generation and self._owner.is_attached:
            self._show(view)
