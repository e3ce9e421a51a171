"""Where miles-tui keeps its caches, how big they may grow, and the switch that turns them off.

Contract:

- One root for every cache (:func:`cache_root`): ``$MILES_TUI_CACHE_DIR``, else
  ``$XDG_CACHE_HOME/miles-tui``, else ``~/.cache/miles-tui``; never inside a run.
  Each cache keeps its entries in its own folder of the root (``summaries/``,
  ``metrics/`` ...); an entry is one item of such a folder, a file or a folder.
- :func:`enabled` is False after :func:`disable` (``--no-cache``) or with
  ``MILES_TUI_NO_CACHE`` set: caches then neither read nor write.
- A size cap (:func:`max_bytes`): ``MILES_TUI_CACHE_MAX_BYTES`` (``2G``, ``500M``,
  ``123456``), default 2 GB. :func:`trim` deletes whole entries, least recently
  used first, until the root fits; :func:`touch` marks an entry used (its
  mtime), :func:`note_write` trims once enough was written since the last trim.
- Best effort: an unusable cache dir only costs speed; nothing here raises
  ``OSError``. Never follows a symlink out of the root when deleting.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

DEFAULT_MAX_BYTES: Final = 2 * 1000**3
"""The cap without MILES_TUI_CACHE_MAX_BYTES: 2 GB."""

ENV_DIR: Final = "MILES_TUI_CACHE_DIR"
ENV_MAX: Final = "MILES_TUI_CACHE_MAX_BYTES"
ENV_OFF: Final = "MILES_TUI_NO_CACHE"

TRIM_EVERY_FRACTION: Final = 0.01
""":func:`note_write` trims after this share of the cap was written (at most 1 % over the cap between trims)."""

_UNITS: Final = {"": 1, "K": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4}


class _Written:
    """Bytes written since the last trim, for this process (-1: nothing written yet)."""

    lock = threading.Lock()
    bytes = -1


def cache_root() -> Path:
    """The folder every miles-tui cache lives under, for this user."""
    explicit = os.environ.get(ENV_DIR)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "miles-tui"


def enabled() -> bool:
    """Whether caches may be read and written (False under ``--no-cache``)."""
    return not os.environ.get(ENV_OFF)


def disable() -> None:
    """``--no-cache``: no cache is read or written by this process (and the processes it starts)."""
    os.environ[ENV_OFF] = "1"


@contextlib.contextmanager
def configured(*, off: bool = False, cap: int | None = None) -> Iterator[None]:
    """``--no-cache`` (``off``) and ``--cache-max`` (``cap``) for the length of a command; restored after."""
    saved = {name: os.environ.get(name) for name in (ENV_OFF, ENV_MAX)}
    if off:
        disable()
    if cap is not None:
        set_max_bytes(cap)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def parse_size(text: str) -> int:
    """``2G``, ``500M``, ``64K``, ``123456`` (decimal units, an optional ``B``) -> bytes; ValueError otherwise."""
    cleaned = text.strip().upper().removesuffix("B")
    unit = cleaned[-1:] if cleaned[-1:] in _UNITS and cleaned[-1:] else ""
    number = cleaned[: len(cleaned) - len(unit)]
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (try 2G, 500M or a number of bytes)") from None
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"not a size: {text!r} (try 2G, 500M or a number of bytes)")
    return int(value * _UNITS[unit])


def set_max_bytes(size: int) -> None:
    """Set the cap for this process (and the processes it starts)."""
    os.environ[ENV_MAX] = str(int(size))


def max_bytes() -> int:
    """The cap on the root's total size, in bytes (an unreadable setting means the default)."""
    text = os.environ.get(ENV_MAX)
    if not text:
        return DEFAULT_MAX_BYTES
    try:
        return parse_size(text)
    except ValueError:
        return DEFAULT_MAX_BYTES


def touch(path: Path) -> None:
    """Mark an entry as just used: least recently used entries are evicted first."""
    try:
        os.utime(path)
    except OSError:
        return


@dataclass(frozen=True)
class Entry:
    """One cache entry, as :func:`entries` finds it."""

    path: Path
    """The entry: a file, or a folder of files."""
    size: int
    """Bytes it holds."""
    used: float
    """Its mtime: when it was last written or used."""


def _size(path: Path) -> int:
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue
    return total


def entries(root: Path | None = None) -> list[Entry]:
    """Every entry under ``root`` (default: :func:`cache_root`), least recently used first."""
    root = cache_root() if root is None else root
    found: list[Entry] = []
    try:
        kinds = list(os.scandir(root))
    except OSError:
        return []
    for kind in kinds:
        if not kind.is_dir(follow_symlinks=False):
            continue
        try:
            items = list(os.scandir(kind.path))
        except OSError:
            continue
        for item in items:
            try:
                st = item.stat(follow_symlinks=False)
                is_dir = item.is_dir(follow_symlinks=False)
            except OSError:
                continue
            size = _size(Path(item.path)) if is_dir else st.st_size
            found.append(Entry(Path(item.path), size, st.st_mtime))
    found.sort(key=lambda e: (e.used, str(e.path)))
    return found


def _remove(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink()
    except OSError:
        return


def trim(limit: int | None = None, keep: Path | None = None) -> int:
    """Delete least recently used entries until the root holds at most ``limit`` bytes (default: the cap).

    ``keep`` (the entry just written) goes last. Returns the bytes freed.
    """
    limit = max_bytes() if limit is None else limit
    with _Written.lock:
        _Written.bytes = 0
        found = entries()
        if keep is not None:
            found.sort(key=lambda e: e.path == keep)  # stable: LRU order otherwise kept
        total = sum(e.size for e in found)
        freed = 0
        for entry in found:
            if total - freed <= limit:
                break
            _remove(entry.path)
            freed += entry.size
        return freed


def note_write(size: int, entry: Path | None = None) -> None:
    """Account for ``size`` bytes just written (in ``entry``); trims once 1 % of the cap was written since a trim.

    The first write of a process always trims, so a cap lowered since the last run applies at once.
    """
    with _Written.lock:
        first = _Written.bytes < 0
        _Written.bytes = (0 if first else _Written.bytes) + size
        due = first or _Written.bytes >= max_bytes() * TRIM_EVERY_FRACTION
    if due:
        trim(keep=entry)


def forget_writes() -> None:
    """Count writes as if none happened in this process yet (the next write trims)."""
    with _Written.lock:
        _Written.bytes = -1
