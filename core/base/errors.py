"""Every error core raises, in one hierarchy.

    MilesTuiError                 anything core refuses; always names a file
    ├── RunDirError               RUN_DIR missing, not a directory, unreadable
    ├── UnreadableFileError       a run file refused as it is: not a regular file, a symlink
    │                             loop, over its size cap, or pathological JSON
    ├── DumpLoadError             a .pt that could not be read
    │   ├── StillWritingError     ... and is young enough to be mid-write (retry)
    │   ├── CorruptFileError      ... and is old: truncated, garbage, wrong shape
    │   └── UnsafePickleError     ... because it reaches for code (never executed)
    ├── InconsistentDumpError     files that contradict each other (lengths, ids)
    ├── StepNotFoundError         a step or sample id the run does not have
    ├── MetricNotFoundError       a metric or step key the run never logged
    ├── CpLayoutError             CP slices that cannot be placed (partial group)
    └── StreamError               a telemetry JSONL line that does not parse

Each error carries the path it is about (and a byte offset where one applies)
and says what the user can do, so a caller can print ``str(err)`` as the one
line a user sees: it is made inert (:func:`miles_tui.core.base.inert_text.inert`), since file
names and quoted values come from the run. Core never prints; the CLI and the app decide how to show it.
"""

from __future__ import annotations

from pathlib import Path

from miles_tui.core.base.inert_text import inert


class MilesTuiError(Exception):
    """Base class: a message for a person, plus the file it is about."""

    def __init__(self, message: str, path: Path | str | None = None, offset: int | None = None) -> None:
        self.path = Path(path) if path is not None else None
        """The file (or directory) the error is about."""
        self.offset = offset
        """Byte offset inside ``path`` where the problem starts, when known."""
        self.message = message
        """What went wrong and what to do, without the location."""
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.path is not None:
            where = f"{self.path}"
            if self.offset is not None:
                where += f" (byte {self.offset})"
            where += ": "
        return inert(f"{where}{self.message}")


class RunDirError(MilesTuiError):
    """The run directory itself cannot be used."""


class UnreadableFileError(MilesTuiError):
    """A file of the run refused without (fully) reading it: a FIFO, device, socket or directory
    where a file should be, a symbolic link loop, a file over its size cap, or JSON that is
    malformed or pathological (nested too deeply, integers no float can hold)."""


class DumpLoadError(MilesTuiError):
    """A dump file could not be loaded."""


class StillWritingError(DumpLoadError):
    """The file failed to load but is younger than the still-writing window: retry later."""


class CorruptFileError(DumpLoadError):
    """The file is old enough to be complete and still does not load."""


class UnsafePickleError(DumpLoadError):
    """The pickle asks for a callable that could run code; nothing was executed."""


class InconsistentDumpError(MilesTuiError):
    """Two files of one step disagree (lengths, sample ids, rollout ids)."""


class StepNotFoundError(MilesTuiError):
    """The requested step or sample does not exist in this run."""


class MetricNotFoundError(MilesTuiError):
    """A metric (or step key) asked for by name that the run's metrics.jsonl never logged."""


class CpLayoutError(MilesTuiError):
    """Context-parallel slices that do not form a complete, consistent group."""


class StreamError(MilesTuiError):
    """A telemetry stream line that is complete but not valid JSON."""
