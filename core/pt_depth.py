"""How deep the values a pickle builds nest, followed opcode by opcode without building them.

Contract: hashing a tuple recurses in C through every tuple inside it with no
recursion check (CPython 3.11), so a pickle that nests a tuple a few hundred
thousand levels deep and then uses it as a dict key or set element kills the
process with SIGSEGV, while it is loading or later, wherever the value is
hashed. :class:`NestingModel` mirrors the unpickler's stack and memo with one
number per value: an upper bound on how many tuples and records (whose hash
hashes their arguments) it nests. Tuples are immutable, so a bound taken when
one is made stays true; lists, dicts and sets cannot be hashed and count as 0.
A run of plain scalars is one entry, counted (with a regex) only when an
opcode pops its items one by one. :meth:`NestingModel.push` refuses a value
nested deeper than :data:`MAX_NESTING`, which needs far less C stack than any
thread has. The model never looks at values and never allocates more than a
few machine words per opcode.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

MAX_NESTING: Final = 500
"""Deepest tuple/record nesting a pickle may build (a dump's values nest fewer than ten deep)."""

_SCALAR = re.compile(rb"J....|M..|K.|G.{8}|[N\x88\x89)]", re.DOTALL)
"""One opcode pushing a plain scalar: how a run of them is counted."""

_MARK: Final = None
_MARK_OP = ord("(")
_TUPLE = ord("t")

# What each opcode does to the stack (other than pushing one plain value).
_TO_MARK = frozenset(b"eu\x901")  # APPENDS, SETITEMS, ADDITEMS, POP_MARK
_TUPLE_N = {0x85: 1, 0x86: 2, 0x87: 3}  # TUPLE1..3
_MARK_TO_CONTAINER = frozenset(b"ld\x91")  # LIST, DICT, FROZENSET: unhashable or hash-cached
_MARK_TO_OBJECT = frozenset(b"oi")  # OBJ, INST: a record holding the items
_CALLS = {ord("R"): 2, 0x81: 2, 0x92: 3}  # REDUCE, NEWOBJ, NEWOBJ_EX: a record holding the arguments
_PUTS = frozenset(b"pqr\x94")
_GETS = frozenset(b"ghj")
_QUIET = frozenset(b"\x80\x95.\x98")  # PROTO, FRAME, STOP, READONLY_BUFFER


class NestingModel:
    """The unpickler's stack as nesting depths: ints >= 0 one value each, ints < 0 that many scalars."""

    def __init__(self, refuse: Callable[[str], Exception]) -> None:
        self._refuse = refuse
        self._stack: list[Any] = []
        """Per entry: a depth (>= 0), -n for n scalars, (data, start, end) for a run of scalars not yet
        counted, or None for a MARK."""
        self._memo: dict[int, int] = {}
        """Memo indices holding a value deeper than 0."""

    def scalars(self, data: bytes, start: int, end: int) -> None:
        """A run of plain-scalar opcodes ``data[start:end]`` (counted only if it is popped item by item)."""
        if end > start:
            self._stack.append((data, start, end))

    def push(self, depth: int = 0) -> None:
        """One value nesting ``depth`` deep; refuse it past :data:`MAX_NESTING`."""
        stack = self._stack
        if depth == 0:
            if stack and type(stack[-1]) is int and stack[-1] < 0:
                stack[-1] -= 1
            else:
                stack.append(-1)
            return
        if depth > MAX_NESTING:
            raise self._refuse(f"values nested more than {MAX_NESTING} tuples deep (hashing one would crash)")
        stack.append(depth)

    def apply(self, op: int, index: int = 0) -> None:
        """The stack effect of opcode ``op`` (``index``: its memo index, for PUT and GET)."""
        if op == _MARK_OP:
            self._stack.append(_MARK)
        elif op == _TUPLE:
            self.push(self._to_mark() + 1)
        elif op in _GETS:
            self.push(self._memo.get(index, 0))
        elif op in _CALLS:
            self.push(self._pop(_CALLS[op]) + 1)
        elif op in _TO_MARK:
            self._to_mark()
        elif op in _PUTS:
            depth = self._top()
            if depth:
                self._memo[index] = depth
            else:
                self._memo.pop(index, None)
        elif op in _TUPLE_N:
            self.push(self._pop(_TUPLE_N[op]) + 1)
        elif op in _MARK_TO_OBJECT:
            self.push(self._to_mark() + 1)
        elif op in _MARK_TO_CONTAINER:
            self._to_mark()
            self.push(0)
        else:
            self._simple(op)

    def _simple(self, op: int) -> None:
        if op == ord("0"):  # POP: the top value, or the MARK when the frame is empty (as the unpickler does)
            if self._stack and self._stack[-1] is _MARK:
                self._stack.pop()
            else:
                self._pop(1)
        elif op == ord("2"):  # DUP
            self.push(self._top())
        elif op in (ord("a"), ord("b")):  # APPEND, BUILD: the top goes into the value below
            self._pop(1)
        elif op == ord("s"):  # SETITEM
            self._pop(2)
        elif op == 0x93:  # STACK_GLOBAL
            self._pop(2)
            self.push(0)
        elif op == ord("Q"):  # BINPERSID: a storage record (a small named tuple)
            self._pop(1)
            self.push(2)
        elif op not in _QUIET:
            self.push(0)

    def _top(self) -> int:
        top = self._stack[-1] if self._stack else _MARK
        return top if type(top) is int and top > 0 else 0

    def _pop(self, count: int) -> int:
        """Pop ``count`` values (never past a MARK); the deepest of them."""
        stack, deepest = self._stack, 0
        while count > 0 and stack and stack[-1] is not _MARK:
            top = stack[-1]
            if type(top) is tuple:
                data, start, end = top
                top = stack[-1] = -_SCALAR.subn(b"", data[start:end])[1]
            if top < 0:
                taken = min(count, -top)
                count -= taken
                if taken == -top:
                    stack.pop()
                else:
                    stack[-1] = top + taken
            else:
                deepest = max(deepest, top)
                stack.pop()
                count -= 1
        return deepest

    def _to_mark(self) -> int:
        """Pop everything down to the last MARK and the MARK; the deepest value popped."""
        stack, deepest = self._stack, 0
        while stack:
            top = stack.pop()
            if top is _MARK:
                break
            if type(top) is int and top > deepest:
                deepest = top
        return deepest
