"""The steps still to summarize, in the order a person wants them: newest first, the rows on screen first.

Sorted when steps are added, not on every poll (a back-fill of 20,000 steps
takes hundreds of polls); steps done since are skipped as they come up.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator

from miles_tui.core.dump import StepKey


def newest_first(key: StepKey) -> tuple[int, int]:
    """Sort key: newest step first, a step's eval batch right after its train step."""
    return (-key[0], key[1])


class SummaryQueue:
    """A set of steps with a cached newest-first order."""

    def __init__(self) -> None:
        self._keys: set[StepKey] = set()
        self._order: list[StepKey] = []
        """Newest first; may still hold steps discarded since it was sorted."""
        self._stale = False

    def add(self, key: StepKey) -> None:
        if key not in self._keys:
            self._keys.add(key)
            self._stale = True

    def discard(self, key: StepKey) -> None:
        self._keys.discard(key)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[StepKey]:
        return iter(self._keys)

    def ordered(self, first: Iterable[StepKey | None] = ()) -> Iterator[StepKey]:
        """The steps to do: those in ``first`` that are to do (in that order), then newest first."""
        chosen = [k for k in dict.fromkeys(first) if k is not None and k in self._keys]
        yield from chosen
        self._sort()
        skip = set(chosen)
        gone = 0
        for key in self._order:
            if key not in self._keys:
                gone += 1
            elif key not in skip:
                yield key
        if gone > len(self._order) // 2:
            self._order = [k for k in self._order if k in self._keys]

    def newest(self, n: int) -> list[StepKey]:
        """The ``n`` newest steps to do."""
        if self._stale:
            return heapq.nlargest(n, self._keys)
        return list(itertools.islice((k for k in self._order if k in self._keys), n))

    def _sort(self) -> None:
        if self._stale:
            self._order = sorted(self._keys, key=newest_first)
            self._stale = False
