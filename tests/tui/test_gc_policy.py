"""The collector after a read: small reads freeze nothing; big ones freeze, and what freezing pins is freed."""

from __future__ import annotations

import gc
import weakref

from miles_tui.tui.gc_policy import BIG_READ_BYTES, FREEZES_PER_SWEEP, after_read, freezes


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
