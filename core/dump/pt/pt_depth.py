"""How deep and how wide-when-hashed the values a pickle builds are, followed opcode by opcode.

Contract: hashing a tuple recurses in C through every tuple inside it, with no
recursion check and no memory of what it has hashed (CPython 3.11). So a pickle
that nests a tuple a few hundred thousand deep and uses it as a dict key kills
the process with SIGSEGV, and ``x = (x, x)`` repeated 100 times (200 bytes)
used as a key hashes 2**100 tuples: the process never returns. Either would
also strike whoever hashes such a value later. :class:`NestingModel` mirrors
the unpickler's stack and memo with, per value, an upper bound on its tuple
and record nesting (``depth``) and on the work of hashing it (``cost``: the
tuples and records it expands to). Tuples are immutable, so a bound taken when
one is made stays true; lists, dicts and sets cannot be hashed (cost 1, depth
0). It refuses a value nested deeper than :data:`MAX_NESTING`, charges the
load's budget for every hash the unpickler will compute (dict keys, set items),
and notes when a container is referenced twice (:attr:`NestingModel.shared`),
which is the only way a value can expand to more than the pickle spells out.
A run of plain scalars is one entry, counted (with a regex) only when an opcode
pops its items one by one. It never looks at values, and stores a few machine
words per opcode.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from miles_tui.core.dump.pt.pt_guard import LoadBudget

MAX_NESTING: Final = 500
"""Deepest tuple/record nesting a pickle may build (a dump's values nest fewer than ten deep)."""
_HASH_VISIT = 8
"""Bytes of allowance charged per tuple or scalar a hash will visit (it costs time, not memory)."""
_DEPTH_BITS = 10
_DEPTH_MASK = (1 << _DEPTH_BITS) - 1
_COST_CAP = 1 << 62
"""Hash costs saturate here (a DAG of tuples can spell 2**100 of them in 200 bytes)."""

_SCALAR = re.compile(rb"J....|M..|K.|G.{8}|[N\x88\x89)]", re.DOTALL)
"""One opcode pushing a plain scalar: how a run of them is counted."""

_MARK: Final = None
_MARK_OP = ord("(")
_TUPLE = ord("t")
_TO_MARK = frozenset(b"1e")  # POP_MARK, APPENDS: items leave without being hashed
_HASHED_TO_MARK = frozenset(b"u\x90")  # SETITEMS, ADDITEMS: every item hashed (keys and values: a bound)
_TUPLE_N = {0x85: 1, 0x86: 2, 0x87: 3}  # TUPLE1..3
_EMPTY_CONTAINERS = frozenset(b"]}\x8f")  # EMPTY_LIST, EMPTY_DICT, EMPTY_SET
_MARK_TO_CONTAINER = frozenset(b"ld")  # LIST, DICT
_MARK_TO_OBJECT = frozenset(b"oi")  # OBJ, INST: a record holding the items
_CALLS = {ord("R"): 2, 0x81: 2, 0x92: 3}  # REDUCE, NEWOBJ, NEWOBJ_EX: a record holding the arguments
_PUTS = frozenset(b"pqr\x94")
_GETS = frozenset(b"ghj")
_QUIET = frozenset(b"\x80\x95.\x98")  # PROTO, FRAME, STOP, READONLY_BUFFER


class _Run:
    """A run of plain-scalar opcodes, ``data[start:end]``, not counted yet."""

    __slots__ = ("data", "end", "start")

    def __init__(self, data: bytes, start: int, end: int) -> None:
        self.data, self.start, self.end = data, start, end

    def count(self) -> int:
        return _SCALAR.subn(b"", self.data[self.start : self.end])[1]


def _value(cost: int, depth: int) -> int:
    return (min(cost, _COST_CAP) << _DEPTH_BITS) | depth


class NestingModel:
    """The unpickler's stack: ints >= 0 one container each (cost << 10 | depth), ints < 0 that many scalars."""

    def __init__(self, budget: LoadBudget) -> None:
        self._budget = budget
        self._stack: list[Any] = []
        """Per entry: a container (an int >= 0), -n for n scalars, a :class:`_Run`, or None for a MARK."""
        self._memo: dict[int, int] = {}
        """Memo indices holding a container."""
        self.shared = False
        """A container was pushed a second time (memo GET, DUP): values may expand past the pickle."""

    def scalars(self, data: bytes, start: int, end: int) -> None:
        """A run of plain-scalar opcodes ``data[start:end]`` (counted only if it is popped item by item)."""
        self._stack.append(_Run(data, start, end))

    def scalar(self) -> None:
        """One plain value (a number, a string, a class)."""
        stack = self._stack
        if stack and type(stack[-1]) is int and stack[-1] < 0:
            stack[-1] -= 1
        else:
            stack.append(-1)

    def _push(self, cost: int, depth: int) -> None:
        if depth > MAX_NESTING:
            raise self._budget.refuse(f"values nested more than {MAX_NESTING} tuples deep (hashing one would crash)")
        self._stack.append(_value(cost, depth))

    def apply(self, op: int, index: int = 0) -> None:
        """The stack effect of opcode ``op`` (``index``: its memo index, for PUT and GET)."""
        if op == _MARK_OP:
            self._stack.append(_MARK)
        elif op == _TUPLE:
            cost, depth = self._to_mark()
            self._push(cost + 1, depth + 1)
        elif op in _GETS:
            found = self._memo.get(index)
            if found is None:
                self.scalar()
            else:
                self.shared = True
                self._stack.append(found)
        elif op in _CALLS:
            cost, depth = self._pop(_CALLS[op])
            self._push(cost + 1, depth + 1)
        elif op in _TO_MARK:
            self._to_mark()
        elif op in _HASHED_TO_MARK:
            self._hash(self._to_mark()[0])
        elif op in _PUTS:
            top = self._stack[-1] if self._stack else _MARK
            if type(top) is int and top >= 0:
                self._memo[index] = top
            else:
                self._memo.pop(index, None)
        elif op in _TUPLE_N:
            cost, depth = self._pop(_TUPLE_N[op])
            self._push(cost + 1, depth + 1)
        else:
            self._other(op)

    def _other(self, op: int) -> None:
        if op in _EMPTY_CONTAINERS:
            self._push(1, 0)
        elif op in _MARK_TO_CONTAINER:
            self._to_mark()
            self._push(1, 0)
        elif op == 0x91:  # FROZENSET: its items are hashed once, then its hash is cached
            self._hash(self._to_mark()[0])
            self._push(1, 0)
        elif op in _MARK_TO_OBJECT:
            cost, depth = self._to_mark()
            self._push(cost + 1, depth + 1)
        elif op == ord("0"):  # POP: the top value, or the MARK when the frame is empty (as the unpickler does)
            if self._stack and self._stack[-1] is _MARK:
                self._stack.pop()
            else:
                self._pop(1)
        elif op == ord("2"):  # DUP
            top = self._stack[-1] if self._stack else _MARK
            if type(top) is int and top >= 0:
                self.shared = True
                self._stack.append(top)
            else:
                self.scalar()
        elif op in (ord("a"), ord("b")):  # APPEND, BUILD: the top goes into the value below
            self._pop(1)
        elif op == ord("s"):  # SETITEM: the key is hashed
            self._hash(self._pop(2)[0])
        elif op == 0x93:  # STACK_GLOBAL
            self._pop(2)
            self.scalar()
        elif op == ord("Q"):  # BINPERSID: a storage record (a small named tuple)
            self._pop(1)
            self._push(3, 2)
        elif op not in _QUIET:
            self.scalar()

    def _hash(self, cost: int) -> None:
        more = "+" if cost >= _COST_CAP else ""
        self._budget.charge(_HASH_VISIT * cost, f"hashing keys that expand to {cost:,}{more} values")

    def _pop(self, count: int) -> tuple[int, int]:
        """Pop ``count`` values (never past a MARK); their total hash cost and deepest nesting."""
        stack, cost, depth = self._stack, 0, 0
        while count > 0 and stack and stack[-1] is not _MARK:
            top = stack[-1]
            if type(top) is _Run:
                top = stack[-1] = -top.count()
            if top < 0:
                taken = min(count, -top)
                count -= taken
                cost += taken
                if taken == -top:
                    stack.pop()
                else:
                    stack[-1] = top + taken
            else:
                cost += top >> _DEPTH_BITS
                depth = max(depth, top & _DEPTH_MASK)
                stack.pop()
                count -= 1
        return cost, depth

    def _to_mark(self) -> tuple[int, int]:
        """Pop everything down to the last MARK and the MARK; total hash cost (a bound) and deepest nesting."""
        stack, cost, depth = self._stack, 0, 0
        while stack:
            top = stack.pop()
            if top is _MARK:
                break
            if type(top) is _Run:
                cost += top.end - top.start  # at least one byte per scalar: a bound, without counting
            elif top < 0:
                cost -= top
            else:
                cost += top >> _DEPTH_BITS
                depth = max(depth, top & _DEPTH_MASK)
        return cost, depth
