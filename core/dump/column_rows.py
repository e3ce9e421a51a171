"""Rows of a frozen dataclass kept as compact columns: what a step keeps for the whole run.

Contract:
- :class:`ColumnRows` is an immutable ``Sequence`` of rows that compares equal
  to the tuple of rows it was built from, value for value and type for type:
  an int stays an int, a bool a bool, None stays None, a float keeps its exact
  bits (-0.0, NaN, 1e308). Each column is stored in the narrowest exact form:
  one value for a constant column, 1/2/4/8-byte integers, float32 when every
  value survives the round trip bit for bit, integral floats as integers,
  strings as a small dictionary plus codes, and plain JSON for anything else.
- The same bytes are the summary cache's on-disk form: :meth:`ColumnRows.to_bytes`
  and :meth:`ColumnRows.from_bytes` never pickle, and ``from_bytes`` refuses
  (``ValueError``) any header or length that does not add up.
- Rows are built on first access; the rows of the few tables used last are
  kept built (:data:`BUILT_TABLES`, shared by all tables), so a screen that
  walks a step's rows pays once, and a run of thousands of steps keeps only
  bytes. Thread-safe. Pure Python (``array``, ``json``): serving a cached
  summary imports neither numpy nor the dump reader.
"""

from __future__ import annotations

import itertools
import json
import math
import struct
import sys
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import fields
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")

MAX_ROWS = 1 << 26
"""More rows than any step holds: a header claiming more is refused (constant columns cost no bytes)."""

BUILT_TABLES = 8
"""Tables whose rows stay built (a step screen, the compare screen's two steps, the newest step)."""

_INT_CODES = (("b", 1), ("h", 2), ("i", 4), ("q", 8))
_SIZES = {"b": 1, "h": 2, "i": 4, "q": 8, "f": 4, "d": 8, "B": 1}
_LITTLE = sys.byteorder == "little"
_HEADER = struct.Struct("<I")

_serial = itertools.count()
_built: OrderedDict[int, tuple[Any, ...]] = OrderedDict()
_built_lock = threading.Lock()


def _pack(code: str, values: Sequence[Any]) -> bytes:
    packed = array(code, values)
    if not _LITTLE:
        packed.byteswap()
    return packed.tobytes()


def _unpack(code: str, raw: bytes | memoryview) -> list[Any]:
    unpacked = array(code)
    unpacked.frombytes(raw)
    if not _LITTLE:
        unpacked.byteswap()
    return unpacked.tolist()


def _int_code(values: Sequence[int]) -> str | None:
    low, high = min(values), max(values)
    for code, size in _INT_CODES:
        bound = 1 << (8 * size - 1)
        if -bound <= low and high < bound:
            return code
    return None


def _same_bits(a: Sequence[float], b: Sequence[float]) -> bool:
    return array("d", a).tobytes() == array("d", b).tobytes()


def _kind(values: Sequence[Any]) -> str | None:
    """bool, int, float or str when every present value is exactly that type; else None."""
    kinds = {type(v) for v in values if v is not None}
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    if kind is float or (issubclass(kind, float) and kind.__module__ == "numpy"):
        return "float"
    return {bool: "bool", int: "int", str: "str"}.get(kind)


def _json_value(value: Any) -> Any:
    """A JSON-able form of a scalar (numpy scalars become Python scalars)."""
    item = getattr(value, "item", None)
    return item() if callable(item) and not isinstance(value, bool | int | float | str) else value


Spec = tuple[Any, ...]
"""How one column is stored: ("const", value) | ("num", kind, code, masked) | ("str", dictionary, code) |
("json", values)."""

_interned: dict[tuple[type, Spec], Spec] = {}
_INTERNED_MAX = 4096


def _intern(spec: Spec) -> Spec:
    """One shared object per distinct spec: thousands of steps store the same few.

    Keyed with the constant's type too: ("const", 1), ("const", 1.0) and ("const", True) are equal tuples.
    """
    if spec[0] == "json":
        return spec
    key = (type(spec[1]), spec)
    try:
        return _interned.setdefault(key, spec) if len(_interned) < _INTERNED_MAX else _interned.get(key, spec)
    except TypeError:  # an unhashable constant
        return spec


def _encode_column(values: list[Any]) -> tuple[Spec, bytes]:
    """(spec, payload) of one column."""
    first = values[0]
    if all(type(v) is type(first) and (v == first or v is first) for v in values) and not (
        isinstance(first, float) and (math.isnan(first) or first == 0.0)
    ):
        return ("const", _json_value(first)), b""
    present = [v for v in values if v is not None]
    if not present:
        return ("const", None), b""
    kind = _kind(values)
    masked = len(present) != len(values)
    mask = bytes(v is None for v in values) if masked else b""
    if kind == "str":
        dictionary = sorted(set(present))
        lookup = {s: i for i, s in enumerate(dictionary)}
        codes = [len(dictionary) if v is None else lookup[v] for v in values]
        code = _int_code([*codes, len(dictionary)])
        assert code is not None  # a dictionary never holds 2**63 strings
        return ("str", (*dictionary, None), code), _pack(code, codes)
    if kind in ("bool", "int"):
        whole = [0 if v is None else int(v) for v in values]
        code = _int_code(whole)
        if code is not None:
            return ("num", kind, code, masked), mask + _pack(code, whole)
    if kind == "float":
        filled: list[float] = [0.0 if v is None else float(v) for v in values]
        if all(v.is_integer() for v in filled):
            integers = [int(v) for v in filled]
            code = _int_code(integers)
            if code is not None and _same_bits(integers, filled):  # -0.0 is not integral here
                return ("num", "float", code, masked), mask + _pack(code, integers)
        if _same_bits(array("f", filled), filled):
            return ("num", "float", "f", masked), mask + _pack("f", filled)
        return ("num", "float", "d", masked), mask + _pack("d", filled)
    return ("json", tuple(_json_value(v) for v in values)), b""


def _decode_column(spec: Spec, payload: bytes, n: int) -> list[Any]:
    form = spec[0]
    if form == "const":
        return [spec[1]] * n
    if form == "json":
        return list(spec[1])
    if form == "str":
        dictionary = spec[1]
        return [dictionary[i] for i in _unpack(spec[2], payload)]
    kind, code, masked = spec[1], spec[2], spec[3]
    values = _unpack(code, payload[n:] if masked else payload)
    if kind == "bool":
        values = [bool(v) for v in values]
    elif kind == "float" and code not in ("f", "d"):
        values = [float(v) for v in values]
    if masked:
        values = [None if m else v for m, v in zip(payload[:n], values, strict=True)]
    return values


def _payload_size(spec: Spec, n: int) -> int:
    form = spec[0]
    if form == "str":
        return n * _SIZES[spec[2]]
    if form == "num":
        return n * _SIZES[spec[2]] + (n if spec[3] else 0)
    return 0


_SCALARS = (type(None), bool, int, float, str)
_INTEGERS = ("b", "h", "i", "q")


def _scalar(value: Any) -> Any:
    if not isinstance(value, _SCALARS):
        raise ValueError("a column value that is not a scalar")
    return value


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("a dictionary entry that is not a string")
    return value


def _checked_spec(raw: Any, n: int) -> Spec:
    """A spec read from a file, as a tuple, or ValueError when it is not one this module writes."""
    if not isinstance(raw, list) or not raw:
        raise ValueError("malformed column spec")
    form = raw[0]
    if form == "const" and len(raw) == 2 and isinstance(raw[1], _SCALARS):
        return _intern(("const", raw[1]))
    values = raw[1] if len(raw) > 1 and isinstance(raw[1], list) else None
    if form == "json" and len(raw) == 2 and values is not None and len(values) == n:
        return ("json", tuple(_scalar(v) for v in values))
    if form == "str" and len(raw) == 3 and values is not None and raw[2] in _INTEGERS:
        return _intern(("str", tuple(v if v is None else _string(v) for v in values), raw[2]))
    integral = raw[2] in _INTEGERS or (raw[1] == "float" and raw[2] in ("f", "d")) if len(raw) == 4 else False
    if form == "num" and integral and raw[1] in ("bool", "int", "float") and isinstance(raw[3], bool):
        return _intern(("num", raw[1], raw[2], raw[3]))
    raise ValueError(f"unknown or malformed column spec {str(raw)[:80]}")


def _construct(row_type: type[T], columns: list[list[Any]], n: int) -> tuple[T, ...]:
    """The rows, column by column: a slotted frozen dataclass's fields are set through their slots (what its
    ``__init__`` does one ``object.__setattr__`` at a time; 8,192 rows in ~15 ms, not ~60)."""
    if not n:
        return ()
    names = [f.name for f in fields(row_type)]  # type: ignore[arg-type]
    slots = [getattr(row_type, name, None) for name in names]
    if hasattr(row_type, "__post_init__") or not all(type(slot).__name__ == "member_descriptor" for slot in slots):
        return tuple(row_type(*values) for values in zip(*columns, strict=True))
    new = object.__new__
    rows = [new(row_type) for _ in range(n)]
    for slot, column in zip(slots, columns, strict=True):
        setter = slot.__set__  # type: ignore[union-attr]
        for row, value in zip(rows, column, strict=True):
            setter(row, value)
    return tuple(rows)


class ColumnRows(Sequence[T], Generic[T]):
    """An immutable sequence of ``row_type`` instances stored as columns."""

    __slots__ = ("_block", "_n", "_row_type", "_serial", "_specs")

    def __init__(self, row_type: type[T], n: int, specs: tuple[Spec, ...], block: bytes) -> None:
        self._row_type = row_type
        self._n = n
        self._specs = specs
        self._block = block
        self._serial = next(_serial)

    @classmethod
    def build(cls, row_type: type[T], rows: Sequence[T]) -> ColumnRows[T]:
        """The columns of ``rows`` (all of ``row_type``); the rows given stay built for a while."""
        names = [f.name for f in fields(row_type)]  # type: ignore[arg-type]
        specs: list[Spec] = []
        payloads: list[bytes] = []
        if rows:
            for name in names:
                spec, payload = _encode_column([getattr(row, name) for row in rows])
                specs.append(_intern(spec))
                payloads.append(payload)
        table = cls(row_type, len(rows), tuple(specs), b"".join(payloads))
        table._remember(tuple(rows))
        return table

    # -- bytes -------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """Header (JSON: row count and column specs) and the column payloads; no pickle."""
        header = json.dumps({"n": self._n, "columns": self._specs}, separators=(",", ":")).encode()
        return _HEADER.pack(len(header)) + header + self._block

    @classmethod
    def from_bytes(cls, row_type: type[T], data: bytes | memoryview) -> ColumnRows[T]:
        """The table :meth:`to_bytes` wrote; ValueError when anything does not add up."""
        try:
            (length,) = _HEADER.unpack_from(data)
            header = json.loads(bytes(data[4 : 4 + length]))
        except (struct.error, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ValueError(f"unreadable column header: {err}") from err
        if not isinstance(header, dict):
            raise ValueError("column header is not an object")
        n, raw_specs = header.get("n"), header.get("columns")
        if type(n) is not int or not 0 <= n <= MAX_ROWS or not isinstance(raw_specs, list):
            raise ValueError("column header without a row count and columns")
        names = [f.name for f in fields(row_type)]  # type: ignore[arg-type]
        if len(raw_specs) != (len(names) if n else 0):
            raise ValueError(f"{len(raw_specs)} columns for {len(names)} fields")
        specs = tuple(_checked_spec(raw, n) for raw in raw_specs)
        block = bytes(data[4 + length :])
        if sum(_payload_size(s, n) for s in specs) != len(block):
            raise ValueError("column payloads do not match their specs")
        offset = 0
        for spec in specs:
            size = _payload_size(spec, n)
            if spec[0] == "str" and n:
                codes = _unpack(spec[2], block[offset : offset + size])
                if min(codes) < 0 or max(codes) >= len(spec[1]):
                    raise ValueError("string code outside its dictionary")
            offset += size
        return cls(row_type, n, specs, block)

    # -- rows --------------------------------------------------------------------------

    def _remember(self, rows: tuple[T, ...]) -> None:
        with _built_lock:
            _built[self._serial] = rows
            _built.move_to_end(self._serial)
            while len(_built) > BUILT_TABLES:
                _built.popitem(last=False)

    def _rows(self) -> tuple[T, ...]:
        with _built_lock:
            rows = _built.get(self._serial)
            if rows is not None:
                _built.move_to_end(self._serial)
                return rows
        columns: list[list[Any]] = []
        offset = 0
        for spec in self._specs:
            size = _payload_size(spec, self._n)
            columns.append(_decode_column(spec, self._block[offset : offset + size], self._n))
            offset += size
        built = _construct(self._row_type, columns, self._n)
        self._remember(built)
        return built

    def build_now(self) -> None:
        """Build the rows now (in a worker thread, say), so the next reader finds them built."""
        self._rows()

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        return self._rows()[index]

    def __iter__(self) -> Iterator[T]:
        return iter(self._rows())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ColumnRows):
            if self._block == other._block and self._specs == other._specs:
                return self._row_type is other._row_type and self._n == other._n
            return self._rows() == other._rows()
        if isinstance(other, tuple | list):
            return self._rows() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._rows())

    def __repr__(self) -> str:
        return f"ColumnRows({self._row_type.__name__}, n={self._n}, {len(self._block)} bytes)"

    @property
    def nbytes(self) -> int:
        """Bytes of column payload held (headers excluded)."""
        return len(self._block)
