"""Follow one append-only JSONL file: the tail rule, as one transaction per poll.

Contract:

- :meth:`TailFile.poll` is one transaction under the file's own
  ``threading.Lock``: take the byte offset, read the bytes after it, cut them
  into newline-terminated lines, decode each line, hand the records to the
  caller's ``consume`` (the append), and only then advance the offset. Two
  polls of one file, from any threads, never hand out the same bytes twice and
  never skip any. If ``consume`` raises, the offset stays where it was.
- Only complete lines (ending in ``\\n``) are consumed. A partial last line
  stays on disk for a later poll, and is not read again until the file grows.
- A complete line that ``json.loads`` rejects, or that the record decoder
  rejects, is a :class:`MalformedLineError` naming the file and the line's
  byte offset: counted, returned, skipped; the lines after it are read as
  usual. Whitespace-only lines carry nothing and are skipped silently.
- A file that shrank, was replaced (another inode), or whose byte before the
  offset is no longer a newline has been rewritten (a resumed run): the offset
  goes back to 0, ``on_reset`` runs before the first new record is consumed,
  and the poll reports a :class:`StreamReset`.
- A poll that finds the file as it was costs one ``stat``; it never opens it.
  A missing file is an empty one.
- Never writes, sleeps or starts threads; never formats values.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from core.errors import StreamError

T = TypeVar("T")

ReadHook = Callable[[Path, int], None]
"""Test seam: called inside the transaction with (path, offset) just before the bytes are read."""

BlockDecoder = Callable[[bytes, int], tuple[Sequence[T], Sequence["MalformedLineError"]]]
"""Decodes complete lines (a block without its final newline, starting at a byte offset) in one call:
(records, malformed lines). Replaces the line-by-line ``decode`` (the metrics stream decodes columns)."""

BLOCK_SIZE = 4 << 20
"""Bytes read per block; records are decoded and consumed block by block, bounding memory."""

_EXCERPT_BYTES = 160
_DECODE_ERRORS = (ValueError, KeyError, TypeError, AttributeError, RecursionError)

ResetReason = Literal["shrank", "replaced", "rewritten"]


class MalformedLineError(StreamError):
    """A complete line that is not a valid record: reported, counted and skipped, never raised by a poll."""

    def __init__(self, path: Path | str, offset: int, reason: str, excerpt: bytes) -> None:
        self.reason = reason
        """What is wrong with the line (``not valid JSON (...)``, ``missing field 'ts'`` ...)."""
        self.excerpt = excerpt
        """The first bytes of the line, as on disk."""
        super().__init__(f"{reason}; the line was skipped", path, offset)


@dataclass(frozen=True)
class StreamReset:
    """A followed file was rewritten, so its records were dropped and it is read again from byte 0."""

    path: Path
    """The file."""
    previous_offset: int
    """Where the reader had got to before the rewrite."""
    size: int
    """The file's size when the rewrite was noticed."""
    reason: ResetReason
    """``shrank`` (smaller than the offset), ``replaced`` (another inode) or ``rewritten``
    (the byte before the offset is no longer a line end)."""


@dataclass(frozen=True)
class TailRead:
    """What one poll of one file did."""

    path: Path
    """The file."""
    start: int
    """The offset the poll read from (0 after a reset)."""
    end: int
    """The offset after the last consumed line: the next poll starts here."""
    records: int
    """How many records were handed to ``consume``."""
    malformed: tuple[MalformedLineError, ...]
    """Complete lines that were skipped, in file order."""
    reset: StreamReset | None
    """Set when the file was found rewritten and read again from 0."""
    size: int | None
    """The file's size at this poll's ``stat``; None when the file does not exist."""
    mtime: float | None
    """The file's modification time at this poll's ``stat``; None when it does not exist."""
    error: StreamError | None = None
    """Set when the file exists but could not be read (permissions, I/O); nothing was consumed."""

    @property
    def changed(self) -> bool:
        """Whether the poll consumed, skipped, reset or failed anything."""
        return self.end != self.start or bool(self.malformed) or self.reset is not None or self.error is not None


def _reason(err: BaseException) -> str:
    if isinstance(err, json.JSONDecodeError):
        return f"not valid JSON ({err.msg}, column {err.colno})"
    if isinstance(err, UnicodeDecodeError):
        return f"not valid UTF-8 (byte {err.start} of the line)"
    if isinstance(err, KeyError):
        return f"missing field {err.args[0]!r}"
    if isinstance(err, RecursionError):
        return "nested too deeply to parse"
    return str(err) or type(err).__name__


class TailFile(Generic[T]):
    """One append-only JSONL file, followed from a byte offset."""

    def __init__(
        self,
        path: Path | str,
        decode: Callable[[Any], T],
        *,
        block_size: int = BLOCK_SIZE,
        read_hook: ReadHook | None = None,
        decode_block: BlockDecoder[T] | None = None,
    ) -> None:
        self.path = Path(path)
        """The followed file."""
        self._decode = decode
        self._block_size = block_size
        self._read_hook = read_hook
        self._decode_lines: BlockDecoder[T] = decode_block or self._decode_block
        self._lock = threading.Lock()
        self._offset = 0
        self._seen = 0  # bytes looked at: offset plus a pending partial line
        self._ino: int | None = None
        self._size: int | None = None
        self._mtime: float | None = None
        self._malformed_count = 0
        self._reset_count = 0

    @property
    def offset(self) -> int:
        """Byte offset after the last consumed line."""
        return self._offset

    @property
    def pending_bytes(self) -> int:
        """Bytes of a partial last line seen but not yet consumed."""
        return self._seen - self._offset

    @property
    def size(self) -> int | None:
        """Size at the last poll's ``stat`` (None: no such file)."""
        return self._size

    @property
    def mtime(self) -> float | None:
        """Modification time at the last poll's ``stat`` (None: no such file)."""
        return self._mtime

    @property
    def malformed_count(self) -> int:
        """Malformed complete lines skipped so far."""
        return self._malformed_count

    @property
    def reset_count(self) -> int:
        """Times the file was found rewritten."""
        return self._reset_count

    def resume(self, offset: int, ino: int) -> None:
        """Follow the file (inode ``ino``) from ``offset``, the end of a line: what is before it was consumed
        elsewhere (a cache of its records). The next poll checks the file as after any poll of its own."""
        with self._lock:
            self._offset = self._seen = offset
            self._ino = ino

    def poll(
        self,
        consume: Callable[[Sequence[T]], object],
        on_reset: Callable[[], object] | None = None,
    ) -> TailRead:
        """Read every new complete line, hand its records to ``consume`` block by block, advance.

        ``on_reset`` runs (inside the transaction) before any record of a rewritten file
        is consumed, so the caller can drop what it had from the old content.
        """
        with self._lock:
            try:
                return self._poll(consume, on_reset)
            except FileNotFoundError:  # removed between stat and open: empty, as if never there
                return TailRead(self.path, self._offset, self._offset, 0, (), None, None, None)
            except OSError as err:
                error = StreamError(f"cannot read ({err.strerror or err}); check permissions", self.path)
                return TailRead(self.path, self._offset, self._offset, 0, (), None, self._size, self._mtime, error)

    def _poll(self, consume: Callable[[Sequence[T]], object], on_reset: Callable[[], object] | None) -> TailRead:
        start = self._offset
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._size = self._mtime = None
            raise
        self._size, self._mtime = st.st_size, st.st_mtime
        reset: StreamReset | None = None
        if self._ino is not None and st.st_ino != self._ino:
            reset = self._reset(st.st_size, "replaced", on_reset)
        elif st.st_size < self._offset:
            reset = self._reset(st.st_size, "shrank", on_reset)
        self._ino = st.st_ino
        if st.st_size <= self._seen and reset is None:
            return TailRead(self.path, start, start, 0, (), None, st.st_size, st.st_mtime)
        if self._read_hook is not None:
            self._read_hook(self.path, self._offset)
        count = 0
        malformed: list[MalformedLineError] = []
        with open(self.path, "rb") as handle:
            if self._offset > 0:
                handle.seek(self._offset - 1)
                if handle.read(1) != b"\n":
                    reset = self._reset(st.st_size, "rewritten", on_reset)
                    handle.seek(0)
            carry = b""
            while True:
                block = handle.read(self._block_size)
                if not block:
                    break
                data = carry + block if carry else block
                cut = data.rfind(b"\n")
                if cut < 0:
                    carry = data  # one line longer than a block: keep reading
                    continue
                records, bad = self._decode_lines(data[:cut], self._offset)
                consume(records)
                self._offset += cut + 1
                count += len(records)
                malformed += bad
                self._malformed_count += len(bad)
                carry = data[cut + 1 :]
            self._seen = self._offset + len(carry)
        begin = 0 if reset is not None else start
        return TailRead(self.path, begin, self._offset, count, tuple(malformed), reset, st.st_size, st.st_mtime)

    def _reset(self, size: int, reason: ResetReason, on_reset: Callable[[], object] | None) -> StreamReset:
        notice = StreamReset(self.path, self._offset, size, reason)
        self._offset = self._seen = 0
        self._reset_count += 1
        if on_reset is not None:
            on_reset()
        return notice

    def _decode_block(self, block: bytes, base: int) -> tuple[Sequence[T], Sequence[MalformedLineError]]:
        records: list[T] = []
        bad: list[MalformedLineError] = []
        decode, append = self._decode, records.append
        lines: list[str] | list[bytes]
        try:
            lines = block.decode("utf-8").split("\n")
            size: Callable[[Any], int] = len if block.isascii() else _utf8_size
        except UnicodeDecodeError:
            lines, size = block.split(b"\n"), len  # each line decoded alone: only the bad ones fail
        position = base
        for line in lines:
            try:
                append(decode(_parse(line)))
            except _DECODE_ERRORS as err:
                if line.strip():
                    raw = line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass")
                    bad.append(MalformedLineError(self.path, position, _reason(err), raw[:_EXCERPT_BYTES]))
            position += size(line) + 1
        return records, bad


# The C scanner json.loads ends up in, without its per-call encoding and whitespace checks.
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _parse(line: str | bytes) -> Any:
    """``json.loads(line)``, through the C scanner directly when the line is one clean value."""
    if isinstance(line, bytes):
        line = line.decode("utf-8")  # JSONL is UTF-8; json.loads would guess UTF-16 from some bytes
    try:
        value, end = _scan_once(line, 0)
    except (StopIteration, ValueError, TypeError, RecursionError):
        return json.loads(line)  # let json.loads accept it (leading space) or say what is wrong
    return value if end == len(line) else json.loads(line)


def _utf8_size(line: str) -> int:
    return len(line.encode("utf-8"))
