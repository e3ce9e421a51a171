"""Recompute: one job in a thread, requests meanwhile coalesced into one more, stale views dropped, errors inert."""

from __future__ import annotations

import threading
from collections.abc import Callable

from textual.app import App, ComposeResult
from textual.widget import Widget

from miles_tui.tui.runtime.recompute import Recompute


class _Owner(Widget):
    def __init__(self, job: Callable[[int], int]) -> None:
        super().__init__()
        self.started = 0
        self.shown: list[int] = []
        self.failures: list[str] = []
        self.views: Recompute[int] = Recompute(self, "test", self._prepare, self.shown.append, self.failures.append)
        self._job = job

    def _prepare(self) -> Callable[[], int]:
        self.started += 1
        number = self.started
        return lambda: self._job(number)


class _Host(App[None]):
    def __init__(self, owner: _Owner) -> None:
        super().__init__()
        self.owner = owner

    def compose(self) -> ComposeResult:
        yield self.owner


async def test_requests_while_running_make_one_more_run_and_only_its_view_shows() -> None:
    gate = threading.Event()

    def job(number: int) -> int:
        gate.wait(5)
        return number

    owner = _Owner(job)
    async with _Host(owner).run_test() as pilot:
        for _ in range(4):
            owner.views.request()
        assert owner.started == 1 and owner.views.again
        gate.set()
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        assert owner.started == 2  # four requests: the running one and one more
        assert owner.shown == [2]  # the first run's view was stale once the second started
        assert not owner.views.running


async def test_a_failing_job_gives_one_inert_line_and_a_later_request_runs() -> None:
    def job(number: int) -> int:
        if number == 1:
            raise ValueError("bad \x1b[31mred\x1b[0m line\x07")
        return number

    owner = _Owner(job)
    async with _Host(owner).run_test() as pilot:
        owner.views.request()
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        assert len(owner.failures) == 1 and "\x1b" not in owner.failures[0] and "\x07" not in owner.failures[0]
        assert "bad" in owner.failures[0] and owner.shown == []
        owner.views.request()
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        assert owner.shown == [2]
