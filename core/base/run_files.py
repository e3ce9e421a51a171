"""Opening the files of an untrusted run directory: regular files only, never blocking, reads bounded.

Contract:

- :func:`open_regular` (:func:`open_regular_fd` for a bare descriptor) opens a
  run's file for reading only if it is a regular
  file. It ``stat``s the path first and refuses anything else without opening
  it (opening a device can have effects), then opens with ``O_NONBLOCK`` (a FIFO
  swapped in after the ``stat`` cannot block the open) and ``O_NOCTTY``, and
  ``fstat``s the opened descriptor: what was opened, not what was looked at,
  must be a regular file. The descriptor stays non-blocking: a file on disk
  never blocks a read anyway, and a pseudo-file that passes for a regular one
  (``/proc/kmsg``: size 0, its read waits for the kernel) fails with ``EAGAIN``
  instead of hanging the reader. A symbolic link loop, a FIFO, socket, device or
  directory is an :class:`~miles_tui.core.base.errors.UnreadableFileError` naming the file.
  A missing file stays ``FileNotFoundError`` (absent is the caller's call);
  other ``OSError`` (permissions, I/O) pass through.
- :func:`read_capped` reads a file that should be small, never more than
  ``cap + 1`` bytes of it: a bigger one is refused, not truncated. A read that
  would block (a pseudo-file with no data now) is refused at once, never waited
  on, and the whole read has a deadline (:data:`READ_SECONDS`): a file that
  keeps producing data slowly is refused when it passes.
- :func:`parse_json` turns the bytes of a small JSON file into a value, or an
  ``UnreadableFileError`` naming the file: invalid UTF-8 or JSON, nesting deeper
  than :data:`MAX_JSON_DEPTH`, an integer no float can hold.
- :func:`too_deep` is the nesting check, for values parsed elsewhere (a sidecar line).
- Never writes; never reads without a bound; starts no threads.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import time
from pathlib import Path
from typing import IO, Any, Final

from miles_tui.core.base.errors import UnreadableFileError

MAX_JSON_DEPTH: Final = 64
"""Nesting a JSON document of the run may have (miles writes a handful of levels); deeper is malformed."""

META_MAX_BYTES: Final = 4 << 20
"""``dashboard/meta.json``: the run's name and arguments, a few KB in practice."""

TOKENIZER_MAX_BYTES: Final = 128 << 20
"""``tokenizer/tokenizer.json``: the largest vocabularies in use take about 40 MB."""

READ_SECONDS: Final = 30.0
"""The longest :func:`read_capped` reads one file: a small file on the slowest NFS takes well under a second."""

_OPEN_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC

_KINDS: Final = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words (``a FIFO (named pipe)``, ``a directory`` ...)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def refusal(path: Path | str, mode: int) -> UnreadableFileError:
    """The error for a path that is not a regular file."""
    return UnreadableFileError(
        f"{kind_of(mode)} where a file should be, so it was not read: miles writes regular files (remove or rename it)",
        path,
    )


def refusal_for(path: Path | str, err: OSError) -> UnreadableFileError:
    """The refusal for an ``OSError`` that means the path is no file to read (a link loop); re-raises any other."""
    if err.errno == errno.ELOOP:
        return UnreadableFileError("a symbolic link loop, so it was not read (fix or remove the link)", path)
    if err.errno == errno.ENAMETOOLONG:
        return UnreadableFileError("a path too long to open (symbolic links?), so it was not read", path)
    if err.errno == errno.ENXIO:
        return UnreadableFileError("a socket or device where a file should be, so it was not read", path)
    raise err


def os_error_message(path: Path | str, err: OSError) -> str:
    """What an ``OSError`` met on a run's path means, for a message (a link loop, permissions, I/O)."""
    try:
        return refusal_for(path, err).message
    except OSError:
        if isinstance(err, PermissionError):
            return "permission denied: check that this user can read it"
        return f"cannot read ({err.strerror or err})"


def stat_regular(path: Path | str) -> os.stat_result:
    """``os.stat`` of a file that must be regular; refusals as for :func:`open_regular`."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise
    except OSError as err:
        raise refusal_for(path, err) from err
    if not stat.S_ISREG(st.st_mode):
        raise refusal(path, st.st_mode)
    return st


def open_regular_fd(path: Path | str, checked: os.stat_result | None = None) -> int:
    """A read-only descriptor of the file, if it is a regular file (see the module contract); the caller closes it.

    ``checked`` is a ``stat`` of the path the caller already made and found regular
    (it saves one ``stat``); the opened descriptor is checked regardless.
    """
    if checked is None or not stat.S_ISREG(checked.st_mode):
        stat_regular(path)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise
    except OSError as err:
        raise refusal_for(path, err) from err
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise refusal(path, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: Path | str, checked: os.stat_result | None = None) -> IO[bytes]:
    """:func:`open_regular_fd` as a binary file object."""
    fd = open_regular_fd(path, checked)
    try:
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _size_text(size: int) -> str:
    return f"{size / 2**20:.0f} MiB" if size >= 2**20 else f"{size} bytes"


def read_capped(path: Path | str, cap: int, what: str) -> bytes:
    """The whole file, refused (``UnreadableFileError``) when it holds more than ``cap`` bytes.

    ``what`` names the file's role for the message (``meta.json``, ``tokenizer file``).
    """
    fd = open_regular_fd(path)
    try:
        size = os.fstat(fd).st_size
        data = _read_until(fd, path, size, cap, time.monotonic() + READ_SECONDS) if size <= cap else b""
    finally:
        os.close(fd)
    if size > cap or len(data) > cap:
        raise UnreadableFileError(
            f"larger than a {what} can be ({_size_text(max(size, len(data)))}, the cap is {_size_text(cap)}),"
            " so it was not read",
            path,
        )
    return data


def _read_until(fd: int, path: Path | str, size: int, cap: int, deadline: float) -> bytes:
    """At most ``cap + 1`` bytes of a non-blocking descriptor, first asking for what ``fstat`` said it holds
    (``os.read(n)`` allocates n bytes up front); refused when a read would block or the deadline passes."""
    chunks: list[bytes] = []
    total = 0
    want = size + 1
    while total <= cap:
        try:
            chunk = os.read(fd, min(want, cap + 1 - total))
        except BlockingIOError:
            raise UnreadableFileError(
                f"its read would block ({total} bytes read, {size} on disk): a special file such as /proc/kmsg "
                "that passes for a regular one, so it was not read",
                path,
            ) from None
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        want = 1 << 20  # it grew since the fstat (or is a pseudo-file): read on, still within the cap
        if time.monotonic() > deadline:
            raise UnreadableFileError(
                f"still returning data after {READ_SECONDS:g} s ({total} bytes): not a file on disk,"
                " so it was not read",
                path,
            )
    return b"".join(chunks)


def checked_int(text: str) -> int:
    """``int(text)`` for a JSON integer literal; ValueError when no float can hold it (it would break later)."""
    value = int(text)
    try:
        float(value)
    except OverflowError:
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits, too large for any number") from None
    return value


def too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether a parsed JSON value nests lists/objects more than ``limit`` deep (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def parse_json(data: bytes, path: Path | str) -> Any:
    """The JSON value of a small file's bytes; pathological or malformed input is an ``UnreadableFileError``."""
    try:
        value = json.loads(data.decode("utf-8"), parse_int=checked_int)
    except UnicodeDecodeError as err:
        raise UnreadableFileError(f"not valid UTF-8 (byte {err.start})", path) from err
    except RecursionError as err:
        raise UnreadableFileError("JSON nested too deeply to parse", path) from err
    except json.JSONDecodeError as err:
        raise UnreadableFileError(f"not valid JSON ({err.msg}, byte {err.pos})", path) from err
    except ValueError as err:
        raise UnreadableFileError(f"not usable JSON ({err})", path) from err
    if isinstance(value, dict | list) and too_deep(value):
        raise UnreadableFileError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep", path)
    return value


def read_json(path: Path | str, cap: int, what: str) -> Any:
    """:func:`read_capped` then :func:`parse_json`."""
    return parse_json(read_capped(path, cap, what), path)
