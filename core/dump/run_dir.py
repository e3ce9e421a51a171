"""A ``--dump-details`` run directory: which steps exist, which are visible, which files hold them.

Contract:
- Listing a run reads directory entries and ``stat`` results only, never file
  contents, so it is cheap enough to call on every poll of a 1,000-step run.
- Visibility follows the spec, with the clock passed in as ``now``: a train
  step shows once ANY rank's train file exists (rank 0 may never write) or
  once its rollout file is ``MIN_AGE_SECONDS`` old; an eval step waits for the
  age. (miles' own reader looks only for rank 0's file, which hides every
  fresh step of a gated run; the spec's any-rank rule is followed here.)
- :meth:`RunDir.load` turns a load failure into :class:`StillWritingError`
  when the file is younger than ``STILL_WRITING_SECONDS`` and into
  :class:`CorruptFileError` otherwise; a path that is not a regular file (a
  FIFO, a device, a symbolic link loop) is refused at once, whatever its age.
  Nothing here ever writes into the run.
- A step's files are the names miles writes (and reads): ``{rid}.pt``,
  ``eval_{rid}.pt``, ``{rid}_{rank}.pt``, numbers without leading zeros.
  Another name that spells the same numbers (``00005.pt``, ``05_3.pt``) is
  never read as the step's; it is kept in :attr:`StepFiles.ignored`, so the
  step can name it, whatever order the directory lists them in.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from miles_tui.core.base.errors import (
    CorruptFileError,
    DumpLoadError,
    RunDirError,
    StillWritingError,
    UnreadableFileError,
    UnsafePickleError,
)

MIN_AGE_SECONDS = 10.0
"""A rollout file younger than this may still be being written."""

STILL_WRITING_SECONDS = 60.0
"""A .pt that fails to load and is younger than this is retried, not called corrupt."""

_ROLLOUT_RE = re.compile(r"^(eval_)?(\d+)\.pt$", re.ASCII)  # ASCII: "٣.pt" is not step 3
_TRAIN_RE = re.compile(r"^(\d+)_(\d+)\.pt$", re.ASCII)


class StepKey(NamedTuple):
    """A step: its rollout id, and whether it is the eval batch of that id (``eval_N.pt``)."""

    rollout_id: int
    evaluation: bool


def rollout_key(name: str) -> StepKey | None:
    """The step a rollout file's name holds; None for any other name."""
    match = _ROLLOUT_RE.match(name)
    return None if match is None else StepKey(int(match.group(2)), match.group(1) is not None)


def train_key(name: str) -> tuple[int, int] | None:
    """The ``(rollout_id, rank)`` a train shard's name holds; None for any other name."""
    match = _TRAIN_RE.match(name)
    return None if match is None else (int(match.group(1)), int(match.group(2)))


def rollout_name(rollout_id: int, evaluation: bool) -> str:
    """The name miles writes (and reads) a step's rollout file under."""
    return f"{'eval_' if evaluation else ''}{rollout_id}.pt"


def is_canonical(name: str) -> bool:
    """Whether a step file's name is the one miles writes: its numbers without leading zeros."""
    key = rollout_key(name)
    if key is not None:
        return name == rollout_name(*key)
    shard = train_key(name)
    return shard is not None and name == f"{shard[0]}_{shard[1]}.pt"


@dataclass(frozen=True, slots=True)
class FileStat:
    """A dump file as seen by one directory listing.

    Held for every file of a run for as long as the run is followed, so it is small: the folder is one
    ``Path`` shared by the files listed in it and the name a plain string (a ``Path`` per file cost ~500
    bytes); :attr:`path` joins them when asked.
    """

    folder: Path
    """Absolute path of the folder holding the file (shared by the files of one listing)."""
    name: str
    """The file's name in ``folder``."""
    size: int
    """Size in bytes when listed."""
    mtime: float
    """Modification time (seconds since the epoch) when listed."""

    @property
    def path(self) -> Path:
        """Absolute path of the file (built on each call)."""
        return self.folder / self.name


@dataclass(frozen=True, slots=True)
class TrainFile(FileStat):
    """One rank's train shard of one step."""

    rank: int
    """Global rank of the writer, from the file name."""


Signature = tuple[tuple[str, int, float], ...]
"""(name, size, mtime) of each file of a step: equal signatures mean nothing changed on disk."""


def _signature(files: Iterable[FileStat]) -> Signature:
    return tuple((f.name, f.size, f.mtime) for f in files)


@dataclass(frozen=True, slots=True)
class StepFiles:
    """Everything on disk for one step at one instant."""

    rollout_id: int
    """The step id."""
    evaluation: bool
    """Whether this is an evaluation batch (``eval_{rid}.pt``)."""
    rollout: FileStat
    """The rollout file."""
    train: tuple[TrainFile, ...]
    """Train shards, ordered by global rank (empty for eval steps)."""
    ignored: tuple[FileStat, ...] = ()
    """Files whose names claim this step but are not the names miles writes (``00005.pt`` beside ``5.pt``),
    by name: never read, named by the step's summary."""
    signature: Signature = field(init=False, repr=False, compare=False)
    """(name, size, mtime) of every file, the rollout file first: equal signatures mean nothing changed on
    disk. Built once, from the files' own values, so the summary and the bookkeeping that keep it for every
    step of a run share this one tuple."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "signature", _signature((self.rollout, *self.train, *self.ignored)))

    @property
    def key(self) -> StepKey:
        """The step these files are."""
        return StepKey(self.rollout_id, self.evaluation)

    @property
    def newest_mtime(self) -> float:
        """The latest modification time among the step's files."""
        return max([self.rollout.mtime, *(f.mtime for f in self.train)])


@dataclass(frozen=True)
class StepIds:
    """The visible step ids of a run, ascending."""

    train: tuple[int, ...]
    """Visible training steps."""
    evaluation: tuple[int, ...]
    """Visible evaluation steps."""


def _scan(directory: Path) -> Iterator[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as entries:
            yield from entries
    except FileNotFoundError:
        return
    except NotADirectoryError:
        return
    except PermissionError as err:
        raise RunDirError("permission denied: check that this user can read the run directory", directory) from err
    except OSError as err:  # a symbolic link loop, an I/O error: the folder's steps cannot be known
        raise RunDirError(f"cannot list this folder ({err.strerror or err}); fix or remove it", directory) from err


def _stat(entry: os.DirEntry[str]) -> os.stat_result | None:
    """The entry's stat; a name that cannot be followed (a link loop) is listed as the link itself.

    Such an entry stays a step's file, so reading it names the problem (unreadable, not absent);
    only an entry that vanished is left out.
    """
    try:
        return entry.stat()
    except FileNotFoundError:
        return None
    except OSError:
        try:
            return entry.stat(follow_symlinks=False)
        except OSError:
            return None


class RunDir:
    """Read-only access to one run directory."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path).expanduser().absolute()
        if not self.path.exists():
            raise RunDirError("no such run directory: check the path (miles writes it with --dump-details)", self.path)
        if not self.path.is_dir():
            raise RunDirError("not a directory: give the folder miles was started with --dump-details", self.path)
        if not os.access(self.path, os.R_OK | os.X_OK):
            raise RunDirError("permission denied: this user cannot list the run directory", self.path)

    @property
    def rollout_dir(self) -> Path:
        return self.path / "rollout_data"

    @property
    def train_dir(self) -> Path:
        return self.path / "train_data"

    @property
    def tokenizer_dir(self) -> Path:
        return self.path / "tokenizer"

    @property
    def dashboard_dir(self) -> Path:
        return self.path / "dashboard"

    def is_dump_folder(self) -> bool:
        """The spec's test for a ``--dump-details`` folder: it has ``rollout_data/`` or ``dashboard/``."""
        return self.rollout_dir.is_dir() or self.dashboard_dir.is_dir()

    def require_dump_folder(self) -> None:
        """Raise :class:`RunDirError` unless :meth:`is_dump_folder` (headless commands refuse other folders)."""
        if not self.is_dump_folder():
            raise RunDirError(
                "not a --dump-details folder (it has neither rollout_data/ nor dashboard/): "
                "give the directory miles was started with --dump-details",
                self.path,
            )

    def looks_like_a_run(self) -> bool:
        """Whether the folder has any of the directories a miles dump writes."""
        return any((self.path / name).is_dir() for name in ("rollout_data", "train_data", "dashboard", "trajectory"))

    def scan(self) -> dict[StepKey, StepFiles]:
        """Every step that has a rollout file, keyed by (rollout_id, evaluation), visible or not."""
        return self._scan_steps(None)

    def _scan_steps(self, only: StepKey | None) -> dict[StepKey, StepFiles]:
        """:meth:`scan`, or just the step ``only``: other steps' files are listed but never stat'ed."""
        rollouts: dict[StepKey, FileStat] = {}
        ignored: dict[StepKey, list[FileStat]] = {}
        rollout_dir, train_dir = self.rollout_dir, self.train_dir
        for entry in _scan(rollout_dir):
            key = rollout_key(entry.name)
            if key is None:
                continue
            st = _stat(entry) if only is None or key == only else None
            if st is not None:
                file = FileStat(rollout_dir, entry.name, st.st_size, st.st_mtime)
                if is_canonical(entry.name):
                    rollouts[key] = file
                else:
                    ignored.setdefault(key, []).append(file)
        train: dict[int, list[TrainFile]] = {}
        for entry in _scan(train_dir):
            shard = train_key(entry.name)
            if shard is None:
                continue
            rid, rank = shard
            st = _stat(entry) if only is None or only == (rid, False) else None
            if st is not None:
                shard_file = TrainFile(train_dir, entry.name, st.st_size, st.st_mtime, rank)
                if is_canonical(entry.name):
                    train.setdefault(rid, []).append(shard_file)
                else:
                    ignored.setdefault(StepKey(rid, False), []).append(shard_file)
        steps: dict[StepKey, StepFiles] = {}
        for (rid, evaluation), rollout in rollouts.items():
            shards = () if evaluation else tuple(sorted(train.get(rid, ()), key=lambda f: f.rank))
            others = tuple(sorted(ignored.get(StepKey(rid, evaluation), ()), key=lambda f: f.name))
            steps[StepKey(rid, evaluation)] = StepFiles(rid, evaluation, rollout, shards, others)
        return steps

    @staticmethod
    def is_visible(step: StepFiles, now: float) -> bool:
        """The spec's visibility rule for one step at time ``now``."""
        if not step.evaluation and step.train:
            return True
        return now - step.rollout.mtime >= MIN_AGE_SECONDS

    def visible_steps(self, now: float) -> dict[StepKey, StepFiles]:
        """The steps a user may see at ``now``."""
        return {key: step for key, step in self.scan().items() if self.is_visible(step, now)}

    def step_ids(self, now: float) -> StepIds:
        """Visible train and eval step ids, ascending."""
        visible = self.visible_steps(now)
        return StepIds(
            train=tuple(sorted(rid for rid, ev in visible if not ev)),
            evaluation=tuple(sorted(rid for rid, ev in visible if ev)),
        )

    def step_files(self, rollout_id: int, evaluation: bool = False) -> StepFiles | None:
        """The files of one step (visible or not), or None when it has no rollout file.

        Only that step's files are stat'ed, so reading one step of a long run
        costs two directory listings, not a stat of every file of every step.
        """
        key = StepKey(rollout_id, evaluation)
        return self._scan_steps(key).get(key)

    @staticmethod
    def load(file: FileStat, now: float) -> Any:
        """Load a dump file safely, classifying a failure by the file's age at ``now``."""
        from miles_tui.core.dump.pt.pt_archive import load_pt  # numpy: only when a file is really read

        try:
            return load_pt(file.path)
        except UnsafePickleError:
            raise
        except DumpLoadError as err:
            if isinstance(err.__cause__, UnreadableFileError):
                raise  # a FIFO or a link loop is not a file being written: final, whatever its age
            try:
                mtime = file.path.stat().st_mtime
            except OSError:
                mtime = file.mtime
            age = now - mtime
            if age < STILL_WRITING_SECONDS:
                raise StillWritingError(
                    f"still being written ({age:.0f}s old); it will be read again on the next poll",
                    file.path,
                ) from err
            if isinstance(err, CorruptFileError):
                raise
            raise CorruptFileError(err.message, file.path) from err
