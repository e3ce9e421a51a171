"""Pauses that leave the GIL to a UI's thread: after a stretch of work, sleep in proportion to it.

Contract:

- A :class:`Pacer` measures a stretch of work from its creation, its
  :meth:`~Pacer.restart` or its last pause to :meth:`~Pacer.pause`, which sleeps
  ``share`` times that (at most ``cap`` seconds); the next stretch starts when
  it wakes. With ``share`` 0 it never sleeps.
- Why: a thread that reads a long file or a long run's series holds the GIL in
  numpy and Python between its releases; sleeping as long as it worked gives a
  UI's thread the GIL at least half of the time (keys 100-380 ms while 2M
  metrics lines load, against 30-60 ms).
- Reads the monotonic clock and sleeps; nothing else.
"""

from __future__ import annotations

import time


class Pacer:
    """See the module docstring."""

    __slots__ = ("_since", "cap", "share")

    def __init__(self, share: float, cap: float) -> None:
        self.share = share
        self.cap = cap
        self._since = time.perf_counter()

    def restart(self) -> None:
        """A stretch of work starts now."""
        self._since = time.perf_counter()

    def pause(self) -> None:
        """Sleep ``share`` times as long as the stretch took (at most ``cap`` s); the next one starts after."""
        if self.share > 0:
            time.sleep(min(self.cap, (time.perf_counter() - self._since) * self.share))
        self._since = time.perf_counter()
