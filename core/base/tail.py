"""Follow one append-only JSONL file: the tail rule, as one transaction per poll.

Contract:

- :meth:`TailFile.poll` is one transaction under the file's own
  ``threading.Lock``: take the byte offset, read the bytes after it, cut them
  into newline-terminated lines, decode each line, hand the records to the
  caller's ``consume`` (the append), and only then advance the offset. Two
  polls of one file, from any threads, never hand out the same bytes twice and
  never skip any. If ``consume`` raises, the offset stays where it was. A poll
  reads up to the size its ``stat`` saw: what a writer appends meanwhile is the
  next poll's, so one poll's work is bounded even while the file grows.
- Only complete lines (ending in ``\\n``) are consumed. A partial last line
  stays on disk for a later poll; later polls read only the bytes appended
  after it (growing an unterminated tail costs O(new bytes), not O(tail)), and
  the line itself is read once, when its newline arrives.
- A line longer than ``max_line`` bytes (:data:`MAX_LINE_BYTES` unless told)
  is malformed: it is skipped up to its newline without ever being held in
  memory, and reported with its offset. Memory stays about ``max_line`` plus a
  block, whatever the file holds.
- A complete line that ``json.loads`` rejects, that nests too deeply to parse,
  that holds an integer no float can hold, or that the record decoder rejects,
  is a :class:`MalformedLineError` naming the file and the line's byte offset:
  counted, returned, skipped; the lines after it are read as usual.
  Whitespace-only lines carry nothing and are skipped silently.
- The file is known by its identity (``st_dev``, ``st_ino``) and by a
  fingerprint of the bytes already consumed (their first and last
  :data:`FINGERPRINT_BYTES`, kept per file). A file that was replaced (another identity),
  shrank below the offset, or whose fingerprint changed (rewritten in place,
  even to the same length) has been rewritten: the offset goes back to 0,
  ``on_reset`` runs before the first new record is consumed, and the poll
  reports a :class:`StreamReset`. A followed file that disappears drops its
  records the same way (reason ``removed``).
- A poll that finds the file as it was (identity, size, mtime and ctime) costs one
  ``stat``; it never opens it. One that finds it changed re-reads the two
  fingerprint windows (two small ``pread``) before reading on. A missing file
  is an empty one.
- Only regular files are read (:func:`miles_tui.core.base.run_files.open_regular`): a FIFO,
  device or symbolic link loop is the poll's ``error``, reported once until it
  changes, and never blocks a poll.
- Never writes, sleeps or starts threads; never formats values.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, Generic, Literal, TypeVar

from miles_tui.core.base.errors import MilesTuiError, StreamError, UnreadableFileError
from miles_tui.core.base.run_files import checked_int, open_regular_fd, refusal, refusal_for

T = TypeVar("T")

ReadHook = Callable[[Path, int], None]
"""Test seam: called inside the transaction with (path, offset) just before the bytes are read."""

BlockDecoder = Callable[[bytes, int], tuple[Sequence[T], Sequence["MalformedLineError"]]]
"""Decodes complete lines (a block without its final newline, starting at a byte offset) in one call:
(records, malformed lines). Replaces the line-by-line ``decode`` (the metrics stream decodes columns)."""

PrefixDecoder = Callable[[bytes, int, int], tuple[Sequence[T], Sequence["MalformedLineError"]]]
"""``decode_prefix(data, end, base)``: a :data:`BlockDecoder` of ``data[:end]`` that needs no copy of it. A block
decoder with such a method (an attribute ``decode_prefix``) is called through it."""

BLOCK_SIZE: Final = 4 << 20
"""Bytes read per block; records are decoded and consumed block by block, bounding memory."""

MAX_LINE_BYTES: Final = 64 << 20
"""The longest line a stream may hold; a longer one is malformed (skipped, never held in memory)."""

FINGERPRINT_BYTES: Final = 1024
"""Size of each of the two windows (first and last bytes consumed) kept to tell a rewrite."""

_EXCERPT_BYTES = 160
_DECODE_ERRORS = (ValueError, KeyError, TypeError, AttributeError, RecursionError, OverflowError)

_FLOAT_DIGITS = 309
"""An integer literal needs at least this many digits to be beyond any float."""
_DIGIT_MAP = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_DIGIT_RUN = b"0" * _FLOAT_DIGITS

ResetReason = Literal["shrank", "replaced", "rewritten", "removed"]


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
    """``shrank`` (smaller than the offset), ``replaced`` (another file: device or inode),
    ``rewritten`` (the bytes already read changed) or ``removed`` (the file is gone)."""


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
    """Set when the file exists but could not be read (not a regular file, permissions, I/O);
    nothing was consumed. Reported by the first poll that meets it, not again until it changes."""

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
        max_line: int = MAX_LINE_BYTES,
        read_hook: ReadHook | None = None,
        decode_block: BlockDecoder[T] | None = None,
    ) -> None:
        self.path = Path(path)
        """The followed file."""
        self.max_line = max_line
        """Lines longer than this many bytes are malformed."""
        self._decode = decode
        self._block_size = max(1, min(block_size, max_line))  # a line inside one block is never over the cap
        self._read_hook = read_hook
        self._decode_lines: BlockDecoder[T] = decode_block or self._decode_block
        self._decode_prefix: PrefixDecoder[T] | None = getattr(decode_block, "decode_prefix", None)
        self._lock = threading.Lock()
        self._offset = 0
        self._seen = 0  # bytes looked at: [offset, seen) is a partial line without a newline
        self._skipping = False  # that partial line is already longer than max_line
        self._ident: tuple[int, int] | None = None
        self._print: bytes | None = None  # fingerprint of the bytes before the offset (<= 2 KiB)
        self._size: int | None = None
        self._mtime: float | None = None
        self._change: tuple[int, int] | None = None  # (mtime, ctime) in ns at the last stat
        self._malformed_count = 0
        self._reset_count = 0
        self._last_reset: StreamReset | None = None
        self._last_error: str | None = None

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
        elsewhere (a cache of its records, whose own fingerprint matched the file). The bytes before the
        offset are fingerprinted now, so a later rewrite is caught as after any poll; a file that is no
        longer that inode, or shorter, is not resumed (the next poll reads it from the start)."""
        with self._lock:
            try:
                st = os.stat(self.path)
                fd = open_regular_fd(self.path, st)
            except (OSError, MilesTuiError):
                return
            try:
                if st.st_ino != ino or st.st_size < offset:
                    return
                self._print = _fingerprint(fd, offset)
            finally:
                os.close(fd)
            self._offset = self._seen = offset
            self._ident = (st.st_dev, st.st_ino)
            # As after a poll of its own: an unchanged file is not read again.
            self._size, self._mtime, self._change = st.st_size, st.st_mtime, (st.st_mtime_ns, st.st_ctime_ns)

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
            self._last_reset = None
            try:
                return self._poll(consume, on_reset)
            except FileNotFoundError:  # removed between stat and open: the next poll says so
                return self._read_result(self._offset, 0, (), self._size, self._mtime)
            except UnreadableFileError as err:
                return self._failed(err.message)
            except OSError as err:
                return self._failed(f"cannot read ({err.strerror or err}); check permissions")

    def _read_result(
        self, start: int, count: int, malformed: Sequence[MalformedLineError], size: int | None, mtime: float | None
    ) -> TailRead:
        reset = self._last_reset
        begin = 0 if reset is not None else start
        return TailRead(self.path, begin, self._offset, count, tuple(malformed), reset, size, mtime)

    def _failed(self, message: str) -> TailRead:
        """Nothing read; the error is reported once, until it changes or the file reads again."""
        read = self._read_result(self._offset, 0, (), self._size, self._mtime)
        if message == self._last_error:
            return read
        self._last_error = message
        return replace(read, error=StreamError(message, self.path))

    def _poll(self, consume: Callable[[Sequence[T]], object], on_reset: Callable[[], object] | None) -> TailRead:
        start = self._offset
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._size = self._mtime = self._change = None
            if self._ident is not None and self._offset > 0:
                self._reset(0, "removed", on_reset)
            self._ident, self._seen, self._skipping, self._print = None, 0, False, None
            return self._read_result(start, 0, (), None, None)
        except OSError as err:
            raise refusal_for(self.path, err) from err
        ident = (st.st_dev, st.st_ino)
        if self._ident is not None and ident != self._ident and self._offset > 0:
            self._reset(st.st_size, "replaced", on_reset)
        elif self._ident is not None and ident != self._ident:  # nothing consumed: nothing to drop or say
            self._seen, self._skipping, self._print = 0, False, None
        elif st.st_size < self._offset:
            self._reset(st.st_size, "shrank", on_reset)
        self._ident = ident
        change = (st.st_mtime_ns, st.st_ctime_ns)  # ctime: a rewrite cannot hide by restoring the mtime
        touched = change != self._change
        self._size, self._mtime, self._change = st.st_size, st.st_mtime, change
        if not stat.S_ISREG(st.st_mode):
            raise refusal(self.path, st.st_mode)
        if self._last_reset is None and st.st_size <= self._seen and not touched:
            return self._read_result(start, 0, (), st.st_size, st.st_mtime)
        if st.st_size <= self._seen:  # changed without growing: look at the partial line again
            self._seen, self._skipping = self._offset, False
        if self._read_hook is not None:
            self._read_hook(self.path, self._offset)
        fd = open_regular_fd(self.path, st)
        try:
            if self._last_reset is None and self._offset > 0 and _fingerprint(fd, self._offset) != self._print:
                self._reset(st.st_size, "rewritten", on_reset)
            before = self._offset
            try:
                count, malformed = self._read(fd, st.st_size, consume)
            except BaseException:
                self._seen, self._skipping = self._offset, False
                raise
            finally:
                if self._offset != before or self._print is None:
                    self._print = _fingerprint(fd, self._offset)
        finally:
            os.close(fd)
        self._last_error = None
        return self._read_result(start, count, malformed, st.st_size, st.st_mtime)

    def _read(
        self, fd: int, size: int, consume: Callable[[Sequence[T]], object]
    ) -> tuple[int, list[MalformedLineError]]:
        """Read from ``_seen`` to ``size`` (the poll's ``stat``; what is appended after is the next
        poll's): consume complete lines, skip overlong ones, leave the partial one."""
        count = 0
        malformed: list[MalformedLineError] = []
        pos = self._seen
        # The partial line's bytes read by this poll; None: they were read by an earlier poll (on disk only).
        chunks: list[bytes] | None = [] if pos == self._offset else None
        while pos < size and (block := os.pread(fd, min(self._block_size, size - pos), pos)):
            end = pos + len(block)
            first = block.find(b"\n")
            if first < 0:  # the partial line goes on
                if not self._skipping and end - self._offset > self.max_line:
                    self._skipping, chunks = True, []
                elif not self._skipping and chunks is not None:
                    chunks.append(block)
                pos = self._seen = end
                continue
            if self._skipping or pos + first - self._offset > self.max_line:
                malformed.append(self._too_long(fd, pos + first))
                self._offset, self._skipping = pos + first + 1, False
                data = block[first + 1 :]
            elif self._offset < pos:  # the partial line ends in this block: read it whole, once
                pending = pos - self._offset
                head = b"".join(chunks) if chunks is not None else os.pread(fd, pending, self._offset)
                if len(head) != pending:
                    break  # the file changed under the poll: the next poll sees how
                data = head + block
            else:
                data = block
            cut = data.rfind(b"\n")
            if cut >= 0:
                if self._decode_prefix is not None:  # the decoder reads data[:cut] where it lies
                    records, bad = self._decode_prefix(data, cut, self._offset)
                else:
                    records, bad = self._decode_lines(data[:cut], self._offset)
                consume(records)
                self._offset += cut + 1
                count += len(records)
                malformed += bad
                self._malformed_count += len(bad)
            rest = len(data) - cut - 1
            if 0 < rest <= self._block_size // 8:  # the next read starts at the partial line: nothing to join
                chunks, pos = [], end - rest
            else:
                chunks, pos = ([data[cut + 1 :]] if rest else []), end
            self._seen = pos
        return count, malformed

    def _too_long(self, fd: int, newline: int) -> MalformedLineError:
        self._malformed_count += 1
        excerpt = os.pread(fd, _EXCERPT_BYTES, self._offset)
        reason = f"a line of {newline - self._offset} bytes, longer than the {self.max_line}-byte cap"
        return MalformedLineError(self.path, self._offset, reason, excerpt)

    def _reset(self, size: int, reason: ResetReason, on_reset: Callable[[], object] | None) -> StreamReset:
        notice = StreamReset(self.path, self._offset, size, reason)
        self._offset = self._seen = 0
        self._skipping, self._print = False, None
        self._reset_count += 1
        self._last_reset = notice
        if on_reset is not None:
            on_reset()
        return notice

    def _decode_block(self, block: bytes, base: int) -> tuple[Sequence[T], Sequence[MalformedLineError]]:
        records: list[T] = []
        bad: list[MalformedLineError] = []
        decode, append = self._decode, records.append
        parse = _parse_checked if _has_float_overflow_digits(block) else _parse
        lines: list[str] | list[bytes]
        try:
            lines = block.decode("utf-8").split("\n")
            size: Callable[[Any], int] = len if block.isascii() else _utf8_size
        except UnicodeDecodeError:
            lines, size = block.split(b"\n"), len  # each line decoded alone: only the bad ones fail
        position = base
        for line in lines:
            try:
                append(decode(parse(line)))
            except _DECODE_ERRORS as err:
                if line.strip():
                    raw = line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass")
                    bad.append(MalformedLineError(self.path, position, _reason(err), raw[:_EXCERPT_BYTES]))
            position += size(line) + 1
        return records, bad


def _fingerprint(fd: int, end: int) -> bytes:
    """The first and last :data:`FINGERPRINT_BYTES` of ``[0, end)``, kept as they are (comparing
    2 KiB is cheaper than hashing them, and exact)."""
    if end <= 2 * FINGERPRINT_BYTES:
        return os.pread(fd, end, 0)
    return os.pread(fd, FINGERPRINT_BYTES, 0) + os.pread(fd, FINGERPRINT_BYTES, end - FINGERPRINT_BYTES)


def _has_float_overflow_digits(block: bytes) -> bool:
    """Whether the block has a run of digits long enough to be an integer beyond any float (rare: then
    its lines are parsed with the integer check; a run inside a string passes that check)."""
    return len(block) >= _FLOAT_DIGITS and _DIGIT_RUN in block.translate(_DIGIT_MAP)


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


def _parse_checked(line: str | bytes) -> Any:
    """``json.loads(line)`` refusing integers no float can hold (they would break later, far from the line)."""
    if isinstance(line, bytes):
        line = line.decode("utf-8")
    return json.loads(line, parse_int=checked_int)


def parse_line(line: str | bytes, *, checked: bool = False) -> Any:
    """One line as the tail parses it: ``json.loads``, refusing integers no float can hold when ``checked``
    (for a block :func:`needs_checked_parse` says may hold one)."""
    return _parse_checked(line) if checked else _parse(line)


def needs_checked_parse(block: bytes) -> bool:
    """Whether a block's lines must be parsed with the integer check (see :func:`parse_line`)."""
    return _has_float_overflow_digits(block)


def is_utf8(block: bytes) -> bool:
    """Whether a block is UTF-8, as every line must be (msgspec skips a member the shape does not name without
    checking its bytes: a decoder that takes a block in one call asks this first)."""
    if block.isascii():
        return True
    try:
        block.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def malformed_reason(err: BaseException) -> str:
    """What a decoding error says about a line (``not valid JSON (...)``, ``missing field 'ts'`` ...)."""
    return _reason(err)


DECODE_ERRORS: Final = _DECODE_ERRORS
"""The errors a line's parse or decoder may raise that make it malformed."""

EXCERPT_BYTES: Final = _EXCERPT_BYTES
"""Bytes of a malformed line kept in its error."""


def _utf8_size(line: str) -> int:
    return len(line.encode("utf-8"))
