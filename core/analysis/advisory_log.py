"""The advisories' history: each advisory with the steps and times it was seen, and whether it still holds.

Contract: an advisory is known in the log by its code and the file it names
(``zero_std_groups`` at step 59 and at step 67 is one entry, seen twice). Two
pure folds build the log, and never read a file or the clock:

- :func:`step_history` over the dump rules' advisories of every summarized
  train step, oldest first: what a run already had before the monitor opened
  it (the demo's ``zero_std_groups`` at 59, gone at 60-66, back at 67).
- :meth:`AdvisoryLog.observe` with what holds now (every poll's advisories, at
  the newest step and ``now``): an entry missing from a poll is cleared there.

:func:`merged` joins the two per entry. :meth:`AdvisoryLog.sidebar` is what
the sidebar lists: every active advisory, then those cleared within the last
:data:`CLEARED_KEPT_STEPS` steps (each still naming the step it was last seen
at, so Enter still jumps there).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from miles_tui.core.analysis.advisories import Advisory, ordered

CLEARED_KEPT_STEPS: Final = 10
"""A cleared advisory stays in the sidebar (dimmed) for this many steps after it cleared."""

Key = tuple[str, Path | None]


def key_of(advisory: Advisory) -> Key:
    """What makes two advisories the same one over time: the rule and the file it names."""
    return (advisory.code, advisory.path)


@dataclass(frozen=True)
class LoggedAdvisory:
    """One advisory over the run: when it was first and last seen, how often, and whether it still holds."""

    advisory: Advisory
    """Its newest form (message and the step or sample it points at, as last seen)."""
    first_step: int | None
    """The step it was first seen at (None: seen before any step)."""
    last_step: int | None
    """The step it was last seen at."""
    first_seen: float | None
    """When it was first seen (epoch seconds; None when the step's time is not known)."""
    last_seen: float | None
    """When it was last seen."""
    count: int
    """Steps (or, before any step, polls) it was seen at."""
    active: bool
    """It holds now."""
    cleared_at: int | None = None
    """The step at which it was found gone (None while active, or when no later step was looked at)."""


@dataclass(frozen=True)
class AdvisoryLog:
    """Every advisory seen, newest first within active / cleared."""

    entries: tuple[LoggedAdvisory, ...] = ()
    """Active ones first (alarms first), then cleared ones, the most recently seen first."""

    def observe(self, advisories: Iterable[Advisory], step: int | None, at: float | None) -> AdvisoryLog:
        """The log after a poll that found ``advisories`` holding at ``step`` (the newest step) and ``at``."""
        now = {key_of(a): a for a in advisories}
        out: list[LoggedAdvisory] = []
        for entry in self.entries:
            key = key_of(entry.advisory)
            current = now.pop(key, None)
            if current is not None:
                again = step is None or step != entry.last_step or not entry.active
                out.append(
                    replace(
                        entry,
                        advisory=current,
                        last_step=step if step is not None else entry.last_step,
                        last_seen=at if at is not None else entry.last_seen,
                        count=entry.count + (1 if again else 0),
                        active=True,
                        cleared_at=None,
                    )
                )
            elif entry.active:
                out.append(replace(entry, active=False, cleared_at=step))
            else:
                out.append(entry)
        out += [LoggedAdvisory(a, step, step, at, at, 1, True) for a in now.values()]
        return AdvisoryLog(_sorted(out))

    def sidebar(self, step: int | None, keep: int = CLEARED_KEPT_STEPS) -> tuple[LoggedAdvisory, ...]:
        """Active entries, then those cleared within ``keep`` steps of ``step``."""
        recent = [
            e
            for e in self.entries
            if not e.active and e.cleared_at is not None and (step is None or step - e.cleared_at < keep)
        ]
        return (*(e for e in self.entries if e.active), *recent)

    @property
    def active(self) -> tuple[LoggedAdvisory, ...]:
        return tuple(e for e in self.entries if e.active)


def _last_step(entry: LoggedAdvisory) -> int:
    return entry.last_step if entry.last_step is not None else -1


def _sorted(entries: Iterable[LoggedAdvisory]) -> tuple[LoggedAdvisory, ...]:
    entries = list(entries)
    active_order = {id(a): i for i, a in enumerate(ordered([e.advisory for e in entries if e.active]))}
    active = sorted((e for e in entries if e.active), key=lambda e: active_order[id(e.advisory)])
    cleared = sorted(
        (e for e in entries if not e.active), key=lambda e: e.last_step if e.last_step is not None else -1, reverse=True
    )
    return (*active, *cleared)


def step_history(
    per_step: Mapping[int, Iterable[Advisory]], times: Mapping[int, float | None] | None = None
) -> AdvisoryLog:
    """The log of the dump rules over the steps given (each step's advisories, folded oldest first): an entry
    seen at some step and missing at a later one is cleared at that later step.

    The same answer as :meth:`AdvisoryLog.observe` step after step, in one pass over plain dicts (the app
    folds a long run's thousands of steps again as older ones are summarized)."""
    times = times or {}
    seen: dict[Key, _Tally] = {}
    for step in sorted(per_step):
        at = times.get(step)
        here = {key_of(a): a for a in per_step[step]}
        for key, earlier in seen.items():
            if earlier.active and key not in here:
                earlier.active, earlier.cleared_at = False, step
        for key, advisory in here.items():
            tally = seen.get(key)
            if tally is None:
                seen[key] = _Tally(advisory, step, step, at, at)
                continue
            tally.advisory, tally.last_step, tally.count = advisory, step, tally.count + 1
            tally.active, tally.cleared_at = True, None
            tally.last_seen = at if at is not None else tally.last_seen
    return AdvisoryLog(_sorted(t.frozen() for t in seen.values()))


@dataclass
class _Tally:
    """:func:`step_history`'s running record of one advisory (mutable: a fold over thousands of steps)."""

    advisory: Advisory
    first_step: int
    last_step: int
    first_seen: float | None
    last_seen: float | None
    count: int = 1
    active: bool = True
    cleared_at: int | None = None

    def frozen(self) -> LoggedAdvisory:
        return LoggedAdvisory(
            self.advisory, self.first_step, self.last_step, self.first_seen, self.last_seen, self.count,
            self.active, self.cleared_at,
        )  # fmt: skip


def merged(history: AdvisoryLog, live: AdvisoryLog) -> AdvisoryLog:
    """One entry per advisory from the steps' history and the live polls: the live log says whether it holds
    now, the history how far back it goes."""
    past = {key_of(e.advisory): e for e in history.entries}
    out: list[LoggedAdvisory] = []
    for entry in live.entries:
        before = past.pop(key_of(entry.advisory), None)
        if before is None:
            out.append(entry)
            continue
        steps = [s for s in (before.first_step, entry.first_step) if s is not None]
        firsts = [t for t in (before.first_seen, entry.first_seen) if t is not None]
        cleared = entry.cleared_at if not entry.active else None
        if not entry.active and before.last_step is not None and (entry.last_step or -1) < before.last_step:
            cleared = before.cleared_at
        out.append(
            replace(
                entry,
                first_step=min(steps) if steps else None,
                first_seen=min(firsts) if firsts else None,
                count=max(entry.count, before.count),
                cleared_at=cleared,
            )
        )
    out += list(past.values())
    return AdvisoryLog(_sorted(out))
