"""What one load may cost, checked before the unpickler spends it.

Contract: a :class:`LoadBudget` is the allowance of one load, ``BUDGET_FACTOR``
times the archive's size in bytes plus ``BUDGET_SLACK``. Everything the load
builds whose size is not spelled out byte for byte in the pickle is charged to
it *before* it is allocated: the memo table, every container, object and
record an opcode creates, every tensor or array (by its element count after
strides, so a broadcast view costs what it would cost expanded), every copy a
builtin makes (``bytes(n)``, ``set(...)``, ``range``). Going over refuses the
file with a :class:`CorruptFileError` naming it.

:class:`OpcodeGuard` reads every byte of the pickle before the C unpickler
does (:mod:`miles_tui.core.dump.pt.pt_zip` feeds it the record as it streams) and walks the
opcodes: it refuses a memo index, a length or a frame that the pickle cannot
back with its own bytes, an unknown opcode, or an over-long text argument, and
charges what each opcode creates. What a pickle spells out itself (an int, a
float, a string of its own bytes) is not charged: it is at most a few dozen
bytes of memory per byte of pickle. It never looks at values, never raises
after ``STOP`` and never holds a view of the buffer it is fed.
"""

from __future__ import annotations

import re
import struct
import sys
from pathlib import Path
from typing import Final

from miles_tui.core.base.errors import CorruptFileError
from miles_tui.core.dump.pt.pt_depth import NestingModel

BUDGET_FACTOR: Final = 8
"""Bytes a load may allocate per byte of its archive, beyond what the pickle spells out."""
BUDGET_SLACK: Final = 32 << 20
"""Bytes any load may allocate, however small the archive (a tiny file with a few arrays)."""

_MAX_LINE: Final = 4096
"""Longest text argument (a GLOBAL's module or name, a protocol-0 number or memo index)."""
_MEMO_SLOT: Final = 8
"""Bytes per memo slot of the C unpickler (it grows the table to twice the index asked for)."""


class LoadBudget:
    """The allowance of one load, in bytes; :meth:`charge` refuses the file once it is spent."""

    __slots__ = ("limit", "path", "used")

    def __init__(self, archive_size: int, path: Path) -> None:
        self.limit = BUDGET_FACTOR * max(archive_size, 0) + BUDGET_SLACK
        self.path = path
        self.used = 0

    def charge(self, nbytes: int, what: str) -> None:
        """Account for ``nbytes`` about to be allocated for ``what``; refuse the file past the limit."""
        self.used += max(int(nbytes), 0)
        if self.used > self.limit:
            raise CorruptFileError(
                f"refused: {what} would take the load past its allowance of {self.limit:,} bytes "
                f"({BUDGET_FACTOR} x the file's size + {BUDGET_SLACK >> 20} MiB); "
                "the file is corrupt or hostile, nothing more was allocated",
                self.path,
            )

    def refuse(self, reason: str) -> CorruptFileError:
        """The error for a pickle the guard will not let the unpickler see."""
        return CorruptFileError(f"refused: {reason}; the file is corrupt or hostile", self.path)


# --- the opcode table ------------------------------------------------------------------------------
#
# Kinds of argument: a fixed number of bytes, a length-prefixed run (1, 4 or 8 byte length), or
# newline-terminated text (capped, or skipped to its newline for protocol-0 strings).

_FIXED, _LEN, _LINE, _LONG_LINE = 0, 1, 2, 3

# opcode: (kind, size: fixed bytes / length bytes / lines, charge in bytes)
_OPS: dict[int, tuple[int, int, int]] = {
    **dict.fromkeys(b"()012Naesu\x88\x89\x90\x93\x97\x98.QRtb\x81\x92\x85\x86\x87", (_FIXED, 0, 0)),
    ord("J"): (_FIXED, 4, 0),
    ord("K"): (_FIXED, 1, 0),
    ord("M"): (_FIXED, 2, 0),
    ord("G"): (_FIXED, 8, 0),
    ord("h"): (_FIXED, 1, 0),
    ord("j"): (_FIXED, 4, 0),
    ord("q"): (_FIXED, 1, 0),
    ord("r"): (_FIXED, 4, 0),  # LONG_BINPUT: memo index checked
    0x80: (_FIXED, 1, 0),  # PROTO
    0x95: (_FIXED, 8, 0),  # FRAME: length checked
    0x82: (_FIXED, 1, 64),  # EXT1, EXT2, EXT4
    0x83: (_FIXED, 2, 64),
    0x84: (_FIXED, 4, 64),
    0x94: (_FIXED, 0, 0),  # MEMOIZE: memo index checked
    # One byte for an empty container: charged. (A tuple, or an object a builder makes, costs no
    # more than ~16 bytes per byte of the pickle that fills it; builders charge what varies.)
    ord("]"): (_FIXED, 0, 56),  # EMPTY_LIST, EMPTY_DICT, EMPTY_SET
    ord("}"): (_FIXED, 0, 64),
    0x8F: (_FIXED, 0, 216),
    ord("l"): (_FIXED, 0, 56),  # LIST, DICT, FROZENSET (from a mark)
    ord("d"): (_FIXED, 0, 64),
    0x91: (_FIXED, 0, 216),
    ord("o"): (_FIXED, 0, 160),  # OBJ
    ord("T"): (_LEN, 4, 0),  # BINSTRING
    ord("U"): (_LEN, 1, 0),  # SHORT_BINSTRING
    ord("X"): (_LEN, 4, 0),  # BINUNICODE
    ord("B"): (_LEN, 4, 0),  # BINBYTES
    ord("C"): (_LEN, 1, 0),  # SHORT_BINBYTES
    0x8A: (_LEN, 1, 0),  # LONG1
    0x8B: (_LEN, 4, 0),  # LONG4
    0x8C: (_LEN, 1, 0),  # SHORT_BINUNICODE
    0x8D: (_LEN, 8, 0),  # BINUNICODE8
    0x8E: (_LEN, 8, 0),  # BINBYTES8
    0x96: (_LEN, 8, 0),  # BYTEARRAY8
    ord("F"): (_LINE, 1, 0),  # FLOAT, INT, LONG, PERSID, GET, PUT
    ord("I"): (_LINE, 1, 0),
    ord("L"): (_LINE, 1, 0),
    ord("P"): (_LINE, 1, 0),
    ord("g"): (_LINE, 1, 0),
    ord("p"): (_LINE, 1, 0),
    ord("c"): (_LINE, 2, 0),  # GLOBAL
    ord("i"): (_LINE, 2, 160),  # INST
    ord("S"): (_LONG_LINE, 1, 0),  # STRING, UNICODE: as long as the pickle
    ord("V"): (_LONG_LINE, 1, 0),
}
_STOP = ord(".")
_BINFLOAT = ord("G")
_BINUNICODE = ord("X")
_SHORT_BINUNICODE = 0x8C
_STRINGS = frozenset({_BINUNICODE, _SHORT_BINUNICODE})
_SIGNED_LENGTHS = frozenset({ord("T"), 0x8B})

_SCALARS = rb"J....|M..|K.|[N\x88\x89)]"
# Possessive (Python >= 3.11): no backtracking state is kept per opcode, which makes the walk ~4x faster.
_FAST = re.compile(rb"(?:" + _SCALARS + (rb")*+" if sys.version_info >= (3, 11) else rb")*"), re.DOTALL)
"""Runs of opcodes that push a plain scalar (the bulk of a rollout file): skipped at regex speed."""
_MEMO_OPS = frozenset(b"pqr\x94ghj")
_BARE = frozenset(b"()012aesutRb\x81\x92\x85\x86\x87Q\x90\x93\x97\x98")
"""Argument-free opcodes with nothing to charge or check: only their effect on the nesting model."""
_GETS = frozenset(b"hj")
_BINGET = ord("h")
_PUTS = frozenset(b"pqr\x94")


class OpcodeGuard:
    """Walks a pickle's opcodes as its bytes stream past, charging and refusing before the unpickler sees them."""

    def __init__(self, budget: LoadBudget, length: int) -> None:
        self._budget = budget
        self._length = length
        """Bytes of the whole pickle record: no argument may run past them."""
        self._pos = 0
        """Offset in the record of the first byte not yet walked."""
        self._carry = b""
        """The start of an opcode whose argument is still to come."""
        self._skip = 0
        """Bytes of a long argument still to pass."""
        self._skip_line = False
        """Passing a protocol-0 string up to its newline."""
        self._memo_size = 32
        self._memo_used = bytearray()
        """One bit per memo index stored: MEMOIZE stores at the count of them, as the unpickler does."""
        self._memo_len = 0
        self._nest = NestingModel(self._budget)
        self._stopped = False

    @property
    def shared(self) -> bool:
        """The pickle referenced a container twice: its value may expand past what it spells out."""
        return self._nest.shared

    @property
    def done(self) -> bool:
        """STOP was seen: the unpickler executes nothing after it."""
        return self._stopped

    def skip(self, available: int) -> int:
        """Consume up to ``available`` bytes of a long argument without looking at them; how many."""
        if self.done:
            return available
        taken = min(self._skip, available)
        self._skip -= taken
        self._pos += taken
        return taken

    def feed(self, data: bytes) -> None:
        """Walk the next bytes of the pickle (after what :meth:`skip` consumed); raise to refuse it."""
        if self.done or not data:
            return
        if self._carry:
            data = self._carry + data
            self._carry = b""
        i, end = 0, len(data)
        match, nest = _FAST.match, self._nest
        while i < end:
            if self._skip:
                taken = min(self._skip, end - i)
                self._skip -= taken
                i += taken
                continue
            if self._skip_line:
                newline = data.find(b"\n", i)
                if newline < 0:
                    i = end
                    continue
                self._skip_line = False
                i = newline + 1
                continue
            scalars_end = match(data, i).end()  # type: ignore[union-attr]
            if scalars_end > i:
                nest.scalars(data, i, scalars_end)
                i = scalars_end
            if i >= end:
                break
            op = data[i]
            if op == _BINFLOAT:  # floats come in lists: a run of them at C speed
                step = self._floats(data, i)
                if step > 0:
                    nest.scalars(data, i, i + step)
            elif op in _BARE:  # one byte that only moves values on the stack: the common case, inline
                nest.apply(op)
                step = 1
            elif op in _GETS and i + 5 <= end:
                step = 2 if op == _BINGET else 5
                nest.apply(op, int.from_bytes(data[i + 1 : i + step], "little"))
            elif op in _STRINGS and i + 5 <= end:
                width = 4 if op == _BINUNICODE else 1
                length = int.from_bytes(data[i + 1 : i + 1 + width], "little")
                if self._pos + i + 1 + width + length > self._length:
                    raise self._budget.refuse(
                        f"a string at pickle byte {self._pos + i} runs past the end of the pickle"
                    )
                step = min(1 + width + length, end - i)
                self._skip = 1 + width + length - step
                nest.scalar()
            else:
                step = self._opcode(data, i)
            if step < 0:  # the opcode's argument is not all here yet
                self._carry = data[i:]
                self._pos += i
                return
            i += step
            if op == _STOP:
                break
        self._pos += i

    @staticmethod
    def _floats(data: bytes, i: int) -> int:
        """Bytes spanned by the BINFLOATs in a row from ``data[i]`` (-1: the first is incomplete)."""
        whole = (len(data) - i) // 9  # complete BINFLOATs that fit
        count, window = 0, 64
        while count < whole:
            # Every 9th byte from the run's start: an opcode byte as long as the run lasts.
            ops = data[i + 9 * count : i + 9 * min(count + window, whole) : 9]
            run = len(ops) - len(ops.lstrip(b"G"))
            count += run
            if run < len(ops):
                break
            window *= 4
        return 9 * count if count else -1

    def _opcode(self, data: bytes, i: int) -> int:
        """Check one opcode at ``data[i]``: bytes it spans here, -1 when its argument is incomplete."""
        op = data[i]
        spec = _OPS.get(op)
        at = self._pos + i
        if spec is None:
            raise self._budget.refuse(f"not a pickle (unknown opcode 0x{op:02x} at byte {at})")
        kind, size, charge = spec
        index = 0
        if kind == _FIXED:
            if i + 1 + size > len(data):
                return -1
            index = self._fixed(op, data[i + 1 : i + 1 + size], at)
            step = 1 + size
        elif kind == _LEN:
            if i + 1 + size > len(data):
                return -1
            length = int.from_bytes(data[i + 1 : i + 1 + size], "little", signed=op in _SIGNED_LENGTHS)
            if length < 0 or at + 1 + size + length > self._length:
                raise self._budget.refuse(
                    f"a length of {length:,} bytes at pickle byte {at} runs past the end of the pickle"
                )
            available = min(length, len(data) - (i + 1 + size))
            self._skip = length - available
            step = 1 + size + available
        elif kind == _LONG_LINE:
            self._skip_line = True
            step = 1
        else:
            step, line = self._lines(data, i, size, at)
            if step < 0:
                return -1
            if op in _MEMO_OPS:
                index = self._index(line, at)
        if charge:
            self._budget.charge(charge, f"the object made at pickle byte {at}")
        if op in _PUTS:
            self._memo(index, at)
        self._nest.apply(op, index)
        return step

    def _lines(self, data: bytes, i: int, count: int, at: int) -> tuple[int, bytes]:
        """Bytes spanned by ``count`` newline-terminated arguments and the last of them (-1: incomplete)."""
        cursor = i + 1
        line = b""
        for _ in range(count):
            newline = data.find(b"\n", cursor, cursor + _MAX_LINE + 1)
            if newline < 0:
                if len(data) - cursor > _MAX_LINE:
                    raise self._budget.refuse(f"a text argument longer than {_MAX_LINE} bytes at pickle byte {at}")
                return -1, b""
            line = data[cursor:newline]
            cursor = newline + 1
        return cursor - i, line

    def _index(self, line: bytes, at: int) -> int:
        try:
            return int(line)
        except ValueError:
            raise self._budget.refuse(f"a bad memo index at pickle byte {at}") from None

    def _fixed(self, op: int, arg: bytes, at: int) -> int:
        """Check a fixed-size argument; the memo index it names (0 if none)."""
        if op == 0x94:  # MEMOIZE: the next index, as the unpickler counts them
            return self._memo_len
        if op in _MEMO_OPS:
            return int.from_bytes(arg, "little")
        if op == 0x95:
            (frame,) = struct.unpack("<Q", arg)
            if at + 9 + frame > self._length:
                raise self._budget.refuse(f"a frame of {frame:,} bytes at pickle byte {at} runs past the end")
        elif op == _STOP:
            self._stopped = True
        return 0

    def _memo(self, index: int, at: int) -> None:
        """A memo store at ``index``: it may not exceed the stores this pickle could have made."""
        if index < 0 or index > self._length:
            raise self._budget.refuse(
                f"a memo index of {index:,} at pickle byte {at}, more than a pickle of {self._length:,} bytes can use"
            )
        if index >= self._memo_size:
            grown = index * 2
            self._budget.charge((grown - self._memo_size) * _MEMO_SLOT, f"the memo table (index {index:,})")
            self._memo_size = grown
        byte, bit = divmod(index, 8)
        if byte >= len(self._memo_used):
            self._memo_used.extend(bytes(byte + 1 - len(self._memo_used)))
        if not self._memo_used[byte] & (1 << bit):
            self._memo_used[byte] |= 1 << bit
            self._memo_len += 1
