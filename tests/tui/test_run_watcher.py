"""The watcher serializes every read of the run, even when a waiting worker is cancelled."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from miles_tui.core.dump import Run
from miles_tui.tui.runtime.run_watcher import RunWatcher


async def test_a_cancelled_read_keeps_the_lock_until_its_thread_is_done(demo_run: Path) -> None:
    watcher = RunWatcher(Run(demo_run))
    release = threading.Event()
    running = threading.Event()
    active = []

    def slow(tag: str) -> str:
        active.append(tag)
        running.set()
        assert len(active) == 1, "two reads of the run at once"
        release.wait(5)
        time.sleep(0.01)
        active.remove(tag)
        return tag

    first = asyncio.create_task(watcher._serialized(watcher.lock, slow, "first"))
    await asyncio.to_thread(running.wait, 5)
    first.cancel()
    second = asyncio.create_task(watcher._serialized(watcher.lock, slow, "second"))
    await asyncio.sleep(0.05)
    assert watcher.lock.locked() and active == ["first"]
    release.set()
    assert await second == "second"
    assert first.cancelled()
