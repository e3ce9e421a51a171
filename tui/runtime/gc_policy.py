"""When Python's cyclic garbage collector walks what reading a step allocated.

- While a step is read the collector is paused (:func:`paused`): unpickling
  allocates a container per sample field, and collections in the middle would
  walk them again and again (about 15 % of an open). A telemetry poll runs
  with :func:`young_only`: a first load of a long metrics.jsonl takes tens of
  seconds, and each full collection meanwhile walked the screens' render
  caches (~140k objects, 60-130 ms with the GIL held: a key pressed then waited
  for it); pausing the collector instead kept the UI's garbage of those
  seconds for one collection at the end (219k objects, 350 ms).
- Once start-up has settled (the views' modules are imported, in the
  background, a second or two after the first paint), :func:`after_start`
  collects the young generations and freezes: the modules, styles and widgets start-up made
  (~140k objects) are never walked again. Unfrozen, every
  full collection walked them: 90-100 ms with the GIL held, about every 45 s in
  the live demo (bench/gc_pauses.py). What this freeze can pin is bounded by
  what start-up made; the big reads' sweeps (below) unfreeze it too.
- After a small read (rollout file under :data:`BIG_READ_BYTES`) nothing
  special happens: the ordinary generational collector walks those few
  objects cheaply, and nothing is frozen, so nothing is pinned.
- After a big read (hundreds of thousands of token lists) there is one
  collection and then ``gc.freeze()``: later collections never walk those
  objects again (unfrozen, a full collection walked the open steps for
  0.6-1.3 s, a frozen screen at a random moment). Frozen objects are still
  freed by reference counting when the open-step LRU drops them; what a freeze
  does pin is cyclic garbage alive at that moment. So every
  :data:`FREEZES_PER_SWEEP`-th big read first unfreezes and collects
  everything: pinned garbage is bounded by a few big reads, not by the session.
  (A freeze after every read made the demo grow ~0.5 MB per step.)
- In the app, full collections never start by themselves (:class:`IdleCollector`): the oldest generation's
  threshold stays out of reach for the session, and the app runs a full collection itself when no key or
  click came for :data:`IDLE_SECONDS`, at most every :data:`FULL_SPACING_SECONDS`. Each one walks everything
  not frozen (start-up's garbage, screens' render caches: 20-290 ms with the GIL held); left to the
  thresholds, one landed on a key now and then (``m`` while a 2M-line metrics file loaded: 114-163 ms in 3
  of 7 bench runs). When keys never pause, a due collection waits at most :data:`FULL_AT_MOST_SECONDS`, so
  cyclic garbage stays bounded.
- Memory freed back to the C allocator stays with the process until something
  hands it back: :func:`trim` (glibc's ``malloc_trim``; elsewhere nothing) runs
  after every big read and, from the app, every :data:`TRIM_SECONDS`. A read
  of a big step frees hundreds of MB; without it a monitor that lives beside a
  run for weeks kept its high-water mark on a shared login node.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import cast

TRIM_SECONDS = 60.0
"""How often the app hands freed memory back to the system (in a worker thread: the call releases the GIL)."""

BIG_READ_BYTES = 4 << 20
"""A rollout file this big makes a read big (an 8,192-sample step of short answers is ~13 MB)."""

FREEZES_PER_SWEEP = 8
"""Every this many big reads, frozen objects are unfrozen and collected once."""

_lock = threading.Lock()
_freezes = [0]
"""Big reads settled so far (a one-item list: module state without a global statement)."""


class _Held:
    """A collector setting held while any thread is inside :meth:`inside`: made by the first to come in,
    undone by the last to leave (a telemetry poll and a step read overlap; the first to finish used to undo
    it under the other)."""

    def __init__(self, make: Callable[[], Callable[[], None]]) -> None:
        self.make = make
        """Makes the setting; returns what undoes it."""
        self.threads = 0
        self.undo: Callable[[], None] = lambda: None

    @contextlib.contextmanager
    def inside(self) -> Iterator[None]:
        with _lock:
            if self.threads == 0:
                self.undo = self.make()
            self.threads += 1
        try:
            yield
        finally:
            with _lock:
                self.threads -= 1
                if self.threads == 0:
                    self.undo()


def _disable() -> Callable[[], None]:
    was_on = gc.isenabled()
    gc.disable()
    return gc.enable if was_on else lambda: None


NO_FULL_COLLECTIONS = 1 << 30
"""The oldest generation's threshold inside :func:`young_only`: never reached."""


def _no_full_collections() -> Callable[[], None]:
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], NO_FULL_COLLECTIONS)
    return lambda: gc.set_threshold(*thresholds)


_paused = _Held(_disable)
_young = _Held(_no_full_collections)


def paused() -> contextlib.AbstractContextManager[None]:
    """No cyclic collection inside, whichever thread comes and goes: the collector is back on (unless it
    was off already) when the last thread inside leaves."""
    return _paused.inside()


def young_only() -> contextlib.AbstractContextManager[None]:
    """No full collection inside, whichever thread comes and goes; the young generations are collected as usual
    (their thresholds are kept), so garbage made meanwhile, by any thread, goes as it comes. The old threshold
    is back when the last thread inside leaves."""
    return _young.inside()


IDLE_SECONDS = 3.0
"""No key or click for this long: the app is idle, and a due full collection may run."""

FULL_SPACING_SECONDS = 30.0
"""At least this long between two of the app's idle full collections (each walks everything not frozen)."""

FULL_AT_MOST_SECONDS = 120.0
"""A due full collection waits no longer than this for an idle moment."""

FULL_DUE = 10
"""Young-generation collections since the last full one that make a full one due (Python's own threshold)."""


class IdleCollector:
    """Full collections at the app's idle moments instead of at the thresholds' (see the module docstring).

    :meth:`hold` from mount to unmount keeps the automatic ones off (as :func:`young_only` does, so a telemetry
    poll's own ``young_only`` and this hold overlap safely); :meth:`tick`, from a timer, runs a due one.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.last_input = clock()
        """When the last key or click came (:meth:`note_input`)."""
        self.last_full = clock()
        self.collections = 0
        """Full collections this collector ran."""
        self._held = contextlib.ExitStack()

    def note_input(self) -> None:
        """A key or click came now."""
        self.last_input = self.clock()

    def hold(self) -> None:
        """From now until :meth:`release`, no full collection starts by itself."""
        self._held.close()
        self._held.enter_context(young_only())

    def release(self) -> None:
        self._held.close()

    def tick(self) -> bool:
        """Run a full collection if one is due and the moment is right; True when one ran."""
        now = self.clock()
        if _paused.threads or gc.get_count()[2] < FULL_DUE:  # a step read is making objects, or nothing is due
            return False
        since = now - self.last_full
        idle = now - self.last_input >= IDLE_SECONDS
        if not (idle and since >= FULL_SPACING_SECONDS) and since < FULL_AT_MOST_SECONDS:
            return False
        if not _lock.acquire(blocking=False):  # a read is settling (collecting, freezing): not now, on the UI's thread
            return False
        try:
            gc.collect()
        finally:
            _lock.release()
        self.last_full = self.clock()
        self.collections += 1
        return True


def after_start() -> None:
    """Collect the young generations and freeze what survives: start-up's objects, never walked by a collection
    again. Not a full collection: walking start-up's ~140k objects held the GIL for 60-130 ms, as the first keys
    came (a key pressed then took up to 140 ms); start-up garbage old enough to be in the oldest generation stays
    pinned until the first sweep after big reads."""
    with _lock:
        gc.collect(1)
        gc.freeze()


def after_read(rollout_bytes: int) -> None:
    """Settle what a read of a step whose rollout file has ``rollout_bytes`` bytes allocated."""
    if rollout_bytes < BIG_READ_BYTES:
        return
    with _lock:
        _freezes[0] += 1
        if _freezes[0] % FREEZES_PER_SWEEP == 0:
            gc.unfreeze()  # what earlier freezes pinned gets collected now
        gc.collect()
        gc.freeze()
    trim()


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if sys.platform != "linux":
        return None
    try:
        return cast("Callable[[int], int]", ctypes.CDLL(None).malloc_trim)
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None


def trim() -> bool:
    """Hand the C allocator's free pages back to the system; False where that cannot be done."""
    call = _malloc_trim()
    if call is None:
        return False
    call(0)
    return True


def freezes() -> int:
    """Big reads settled so far (for tests)."""
    return _freezes[0]
