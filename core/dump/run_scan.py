"""Following a run's step files: a poll of a long, quiet run costs a few ``stat`` calls, not one per file.

Contract: :meth:`RunScanner.scan` returns what :meth:`RunDir.scan` would
(every step with a rollout file, keyed by ``(rollout_id, evaluation)``), plus
which steps changed since the previous scan. It reads directory entries and
``stat`` results only. How fresh the answer is:

- a file added, removed or renamed is seen on the next scan (the directories'
  mtime and ctime change; a directory changed within :data:`RACY_SECONDS` of
  a listing is listed again, so a same-tick change is not missed);
- a file written in place is seen on the next scan while it is young
  (modified within :data:`HOT_SECONDS`), and within about :data:`SWEEP_SCANS`
  scans when it is older (a slice of at most :data:`SWEEP_MAX` old files is
  re-stat'ed each scan, so a run of 20,000 steps takes longer).

Unchanged steps keep the same :class:`StepFiles` object from scan to scan, so
callers may compare by identity. What is kept per file is small (its name,
size and mtime, the folder shared: a few hundred bytes), as a live run is
followed for weeks. Never writes; not thread-safe (one poller).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from miles_tui.core.dump.run_dir import (
    FileStat,
    RunDir,
    StepFiles,
    StepKey,
    TrainFile,
    _scan,
    _stat,
    is_canonical,
    rollout_key,
    train_key,
)

HOT_SECONDS = 120.0
"""Files modified this recently are re-stat'ed on every scan (a step being written)."""

SWEEP_SCANS = 30
"""Older files are all re-stat'ed once every this many scans (a minute at the default poll)..."""

SWEEP_MIN = 64
"""... at least this many of them per scan ..."""

SWEEP_MAX = 256
"""... and at most this many (a run of 20,000 steps takes ~80 scans for a sweep, not one core)."""

RACY_SECONDS = 2.0
"""A directory modified this close to a listing is listed again on the next scan."""


@dataclass(frozen=True)
class ScanResult:
    """One scan: every step, and what changed since the previous scan."""

    steps: dict[StepKey, StepFiles]
    """Every step with a rollout file (the scanner's own mapping: read, do not modify)."""
    changed: frozenset[StepKey]
    """Steps that are new or whose files (names, sizes, mtimes) changed."""
    removed: frozenset[StepKey]
    """Steps whose rollout file is gone."""
    listed: bool
    """Whether the directories were listed (else only some files were re-stat'ed)."""


class RunScanner:
    """Incremental listing of one run directory's step files."""

    def __init__(self, run_dir: RunDir) -> None:
        self.dir = run_dir
        self._dirs = (run_dir.rollout_dir, run_dir.train_dir)
        """The two folders, one Path each for every file listed in them to share."""
        self._files: dict[str, FileStat] = {}
        """Every step file by name (names are unique across the two folders: their patterns are disjoint)."""
        self._dir_mtimes: dict[Path, tuple[int, int] | None] = {}
        self._relist = True
        self._steps: dict[StepKey, StepFiles] = {}
        self._sweep: list[str] = []
        self._hot: set[str] = set()
        """Names of files modified within HOT_SECONDS (as of their last stat)."""
        self.listings = 0
        """Directory listings done (for tests and benchmarks)."""
        self.stats = 0
        """Files stat'ed (for tests and benchmarks)."""

    # -- public --------------------------------------------------------------------------

    def scan(self, now: float) -> ScanResult:
        """The steps at ``now`` and what changed since the last scan."""
        mtimes = {d: _dir_stamp(d) for d in self._dirs}
        if self._relist or mtimes != self._dir_mtimes:
            changed, removed = self._list(now, mtimes)
            listed = True
        else:
            changed, removed = self._restat(now)
            listed = False
        return ScanResult(self._steps, frozenset(changed), frozenset(removed), listed)

    # -- listing ---------------------------------------------------------------------------

    def _list(self, now: float, mtimes: dict[Path, tuple[int, int] | None]) -> tuple[set[StepKey], set[StepKey]]:
        self.listings += 1
        seen: dict[str, FileStat] = {}
        by_key: dict[StepKey, list[FileStat]] = {}
        touched: set[StepKey] = set()
        rollout_dir, train_dir = self._dirs
        for entry in _scan(rollout_dir):
            key = rollout_key(entry.name)
            if key is not None:
                self._keep(seen, by_key, touched, rollout_dir, entry, key, None)
        for entry in _scan(train_dir):
            shard = train_key(entry.name)
            if shard is not None:
                self._keep(seen, by_key, touched, train_dir, entry, StepKey(shard[0], False), shard[1])
        touched |= {_step_key(file) for name, file in self._files.items() if name not in seen}
        self._files = seen
        self._hot = {name for name, file in seen.items() if now - file.mtime < HOT_SECONDS}
        self._dir_mtimes = mtimes
        self._relist = any(m is not None and now - max(m) / 1e9 < RACY_SECONDS for m in mtimes.values())
        self._sweep = []
        return self._rebuild({key: by_key.get(key, []) for key in touched})

    def _keep(
        self,
        seen: dict[str, FileStat],
        by_key: dict[StepKey, list[FileStat]],
        touched: set[StepKey],
        folder: Path,
        entry: os.DirEntry[str],
        key: StepKey,
        rank: int | None,
    ) -> None:
        st = _stat(entry)  # a link loop is listed as the link itself: reading it names the problem
        if st is None:
            return
        self.stats += 1
        old = self._files.get(entry.name)
        file = _file(old, folder, entry.name, rank, st)
        seen[file.name] = file  # the name string the file holds: not a second copy per listing
        by_key.setdefault(key, []).append(file)
        if file is not old:
            touched.add(key)

    # -- re-stat between listings ------------------------------------------------------------

    def _restat(self, now: float) -> tuple[set[StepKey], set[StepKey]]:
        hot = list(self._hot)
        if not self._sweep:
            self._sweep = [name for name in self._files if name not in self._hot]
        quota = min(SWEEP_MAX, max(SWEEP_MIN, len(self._files) // SWEEP_SCANS))
        cold, self._sweep = self._sweep[:quota], self._sweep[quota:]
        rewritten: dict[StepKey, list[FileStat]] = {}
        for name in (*hot, *cold):
            old = self._files.get(name)
            if old is None:
                continue
            try:
                st = os.stat(os.path.join(old.folder, name))
            except FileNotFoundError:  # removed without the directory changing: list again
                self._relist = True
                continue
            except OSError:
                continue
            self.stats += 1
            file = _file(old, old.folder, name, old.rank if isinstance(old, TrainFile) else None, st)
            if now - file.mtime < HOT_SECONDS:
                self._hot.add(name)
            else:
                self._hot.discard(name)
            if file is not old:
                self._files[name] = file
                rewritten.setdefault(_step_key(file), []).append(file)
        steps: dict[StepKey, list[FileStat]] = {}
        for key, files in rewritten.items():
            step = self._steps.get(key)
            if step is not None:  # else a shard whose rollout file is not listed yet: no step to change
                names = {f.name for f in files}
                kept = (step.rollout, *step.train, *step.ignored)
                steps[key] = [*files, *(f for f in kept if f.name not in names)]
        return self._rebuild(steps)

    # -- steps ------------------------------------------------------------------------------

    def _rebuild(self, touched: dict[StepKey, list[FileStat]]) -> tuple[set[StepKey], set[StepKey]]:
        """Take in the current files of each touched step; (changed, removed) steps."""
        changed: set[StepKey] = set()
        removed: set[StepKey] = set()
        for key, files in touched.items():
            canonical = [f for f in files if is_canonical(f.name)]
            rollout = next((f for f in canonical if not isinstance(f, TrainFile)), None)
            if rollout is None:
                if self._steps.pop(key, None) is not None:
                    removed.add(key)
                continue
            shards = [f for f in canonical if isinstance(f, TrainFile)]
            train = () if key[1] else tuple(sorted(shards, key=lambda f: f.rank))
            others = tuple(sorted((f for f in files if not is_canonical(f.name)), key=lambda f: f.name))
            step = StepFiles(key[0], key[1], rollout, train, others)
            if self._steps.get(key) != step:
                self._steps[key] = step
                changed.add(key)
        return changed, removed


def _file(old: FileStat | None, folder: Path, name: str, rank: int | None, st: os.stat_result) -> FileStat:
    """The known file when it did not change, else a new one (on the known file's name string)."""
    if old is not None:
        if old.size == st.st_size and old.mtime == st.st_mtime:
            return old
        name = old.name
    if rank is None:
        return FileStat(folder, name, st.st_size, st.st_mtime)
    return TrainFile(folder, name, st.st_size, st.st_mtime, rank)


def _step_key(file: FileStat) -> StepKey:
    """The step of a listed file, from its name (which matched its folder's pattern when it was listed)."""
    if isinstance(file, TrainFile):
        shard = train_key(file.name)
        assert shard is not None  # only names that match are listed
        return StepKey(shard[0], False)
    key = rollout_key(file.name)
    assert key is not None  # only names that match are listed
    return key


def _dir_stamp(directory: Path) -> tuple[int, int] | None:
    """(mtime, ctime) in ns: an entry added or removed changes both; resetting the mtime (``touch -d``,
    ``cp -p``) still changes the ctime."""
    try:
        st = os.stat(directory)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns)
