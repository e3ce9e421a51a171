"""The collector after a read: small reads freeze nothing; big ones freeze, and what freezing pins is freed."""

from __future__ import annotations

import gc
import weakref

from miles_tui.tui.runtime.gc_policy import BIG_READ_BYTES, FREEZES_PER_SWEEP, after_read, freezes


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_a_small_read_freezes_nothing() -> None:
    gc.unfreeze()
    after_read(BIG_READ_BYTES - 1)
    assert gc.get_freeze_count() == 0


def test_garbage_pinned_by_a_freeze_is_freed_within_a_sweep() -> None:
    """gc.freeze() after every open pinned whatever cyclic garbage was alive then, for good."""
    gc.unfreeze()
    try:
        while freezes() % FREEZES_PER_SWEEP != 0:  # start at a sweep boundary
            after_read(BIG_READ_BYTES)
        cycle = _Cycle()
        alive = weakref.ref(cycle)
        after_read(BIG_READ_BYTES)
        assert gc.get_freeze_count() > 0
        del cycle
        gc.collect()
        assert alive() is not None, "a frozen cycle was collected: freezing does nothing here"
        for _ in range(FREEZES_PER_SWEEP - 1):
            after_read(BIG_READ_BYTES)
        gc.collect()
        assert alive() is None, "garbage pinned by a freeze was never freed"
    finally:
        gc.unfreeze()


def test_overlapping_pauses_from_two_threads_keep_the_collector_off_until_the_last_leaves() -> None:
    """A telemetry poll and a step read pause the collector at the same time; the first to finish
    used to switch it back on under the other."""
    import threading

    from miles_tui.tui.runtime.gc_policy import paused

    assert gc.isenabled()
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with paused():
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=other)
    with paused():
        thread.start()
        assert inside.wait(10)
    assert not gc.isenabled(), "the other thread is still inside: the collector must stay off"
    leave.set()
    thread.join(10)
    assert gc.isenabled()
    gc.disable()
    try:
        with paused():
            pass
        assert not gc.isenabled(), "a collector that was off stays off"
    finally:
        gc.enable()


def test_the_app_imports_its_views_in_the_background_once_it_is_up(tmp_path: object) -> None:
    """A first `m` imported the metrics view (and plotext) in the key's handler: ~150 ms idle."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import asyncio, sys, tempfile
        from miles_tui.tui.app import make_app
        from miles_tui.tui.navigation import VIEW_MODULES

        async def main():
            with tempfile.TemporaryDirectory() as run:
                app = make_app(run, poll_seconds=3600)
                async with app.run_test() as pilot:
                    before = [m for m in VIEW_MODULES if m in sys.modules]
                    for _ in range(200):
                        await pilot.pause(0.05)
                        if all(m in sys.modules for m in VIEW_MODULES):
                            break
                    print(len(before), sum(m in sys.modules for m in VIEW_MODULES), len(VIEW_MODULES))

        asyncio.run(main())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    before, after, total = map(int, done.stdout.split()[-3:])
    assert before < total, "every view was imported before the app started: nothing to show"
    assert after == total


def test_trim_hands_freed_heap_back_to_the_system() -> None:
    """200 MB of freed 1 KB blocks under a live one stayed resident until malloc_trim."""
    import platform
    import subprocess
    import sys
    import textwrap

    import pytest

    if sys.platform != "linux" or platform.libc_ver()[0] != "glibc":
        pytest.skip("malloc_trim is glibc's")
    script = textwrap.dedent(
        """
        from pathlib import Path
        from miles_tui.tui.runtime import gc_policy

        def rss():
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024

        blocks = [bytes(1000) + bytes([i % 256]) for i in range(200_000)]
        keep = blocks[-1]  # the top of the heap stays in use: free() alone cannot shrink it
        del blocks
        before = rss()
        print(gc_policy.trim(), before, rss())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    trimmed, before, after = done.stdout.split()
    assert trimmed == "True"
    assert float(before) - float(after) > 150, f"RSS {before} -> {after} MB"


def test_the_app_freezes_what_start_up_made_once_it_has_settled() -> None:
    """Unfrozen, every full collection in the demo walked start-up's ~140k objects: 90-100 ms, GIL held.
    The freeze comes once the views' modules are imported in the background, before the first telemetry
    load may start (a timer's collection could land on anything; one after the imports, on a 2M-line load's
    keys: 319 ms)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import asyncio, gc, tempfile
        from miles_tui.tui.app import make_app

        async def main():
            with tempfile.TemporaryDirectory() as run:
                app = make_app(run, poll_seconds=3600)
                async with app.run_test() as pilot:
                    before = gc.get_freeze_count()
                    for _ in range(400):
                        await pilot.pause(0.02)
                        if app.navigation.views_imported.is_set():
                            break
                    # frozen by then: the first telemetry load, which waits for the imports, never meets it
                    print(before, gc.get_freeze_count())

        asyncio.run(main())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    before, after = map(int, done.stdout.split()[-2:])
    assert before == 0, "frozen before start-up settled"
    assert after > 50_000, f"{after} objects frozen: start-up's are not"


def test_a_telemetry_poll_keeps_collecting_young_garbage_but_never_runs_a_full_collection() -> None:
    """Pausing the collector for a 20 s load kept the UI's garbage of those seconds for one 350 ms collection
    at the end; inside young_only the young generations go on, the oldest is never collected."""
    import threading
    import weakref

    from miles_tui.tui.runtime.gc_policy import NO_FULL_COLLECTIONS, young_only

    class Node:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the collector frees it

    before = gc.get_threshold()
    full: list[int] = []

    def count_full(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(1)

    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with young_only():
            inside.set()
            leave.wait(10)

    gc.callbacks.append(count_full)
    try:
        thread = threading.Thread(target=other)
        with young_only():
            thread.start()
            assert inside.wait(10)
            assert gc.get_threshold() == (before[0], before[1], NO_FULL_COLLECTIONS)
            first = weakref.ref(Node())
            for _ in range(200_000):  # hundreds of young collections' worth of cyclic garbage
                Node()
            assert first() is None, "young garbage was collected inside"
        assert gc.get_threshold()[2] == NO_FULL_COLLECTIONS, "the other thread is still inside"
        leave.set()
        thread.join(10)
    finally:
        gc.callbacks.remove(count_full)
    assert gc.get_threshold() == before and not full


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _make_a_full_collection_due() -> None:
    class Node:
        def __init__(self) -> None:
            self.me = self

    from miles_tui.tui.runtime.gc_policy import FULL_DUE

    while gc.get_count()[2] < FULL_DUE:
        for _ in range(10_000):
            Node()


def test_the_idle_collector_runs_full_collections_only_when_keys_pause_and_one_is_due() -> None:
    """Left to the thresholds, a full collection (20-290 ms, GIL held) now and then landed on a key: `m` while
    a 2M-line metrics file loaded took 114-163 ms in 3 of 7 bench runs."""
    from miles_tui.tui.runtime import gc_policy
    from miles_tui.tui.runtime.gc_policy import (
        FULL_AT_MOST_SECONDS,
        FULL_SPACING_SECONDS,
        IDLE_SECONDS,
        NO_FULL_COLLECTIONS,
        IdleCollector,
        paused,
    )

    before = gc.get_threshold()
    clock = _Clock()
    collector = IdleCollector(clock)
    full: list[int] = []

    def count_full(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(1)

    gc.callbacks.append(count_full)
    collector.hold()
    try:
        assert gc.get_threshold() == (before[0], before[1], NO_FULL_COLLECTIONS)
        _make_a_full_collection_due()
        assert not full, "a full collection started by itself under the hold"
        clock.now += FULL_SPACING_SECONDS
        collector.last_input = clock.now - IDLE_SECONDS / 2
        assert not collector.tick(), "a key came a moment ago"
        collector.last_input = clock.now - IDLE_SECONDS
        with paused():
            assert not collector.tick(), "a step read is running"
        with gc_policy._lock:
            assert not collector.tick(), "a read is settling: the UI's thread must not wait for it"
        assert collector.tick() and collector.collections == 1 and full == [1]
        assert gc.get_count()[2] == 0
        clock.now += FULL_SPACING_SECONDS / 2
        _make_a_full_collection_due()
        assert not collector.tick(), "too soon after the last one"
        clock.now += FULL_SPACING_SECONDS
        collector.last_input = clock.now
        assert not collector.tick(), "keys keep coming, and the last one is not long ago"
        clock.now += FULL_AT_MOST_SECONDS
        collector.last_input = clock.now
        assert collector.tick(), "a due collection waits at most FULL_AT_MOST_SECONDS, keys or not"
        clock.now += FULL_AT_MOST_SECONDS
        collector.last_input = 0.0
        assert not collector.tick(), "nothing is due"
    finally:
        collector.release()
        gc.callbacks.remove(count_full)
    assert gc.get_threshold() == before


async def test_the_app_holds_full_collections_for_its_session_and_notes_each_key(tmp_path: object) -> None:
    from pathlib import Path

    from miles_tui.tui.app import make_app
    from miles_tui.tui.runtime.gc_policy import NO_FULL_COLLECTIONS

    before = gc.get_threshold()
    app = make_app(Path(str(tmp_path)), poll_seconds=3600)
    async with app.run_test() as pilot:
        assert gc.get_threshold()[2] == NO_FULL_COLLECTIONS
        seen = app.collector.last_input
        await pilot.pause(0.01)
        await pilot.press("question_mark")
        assert app.collector.last_input > seen, "a key did not count as input"
    assert gc.get_threshold() == before, "the app left full collections off after it exited"
