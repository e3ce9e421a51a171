"""The builtins a pickle may call, each with its argument checked and its result charged first.

Contract: a pickle names ``builtins.set``, ``bytes``, ``range`` ... to rebuild
plain values (protocol 2 spells a set as ``set([...])`` and bytes as
``_codecs.encode(text, "latin1")``). The real callables take sizes and lazy
iterables (``bytearray(3_000_000_000)``, ``set(range(50_000_000))``), so the
pickle gets these stand-ins instead: containers are built only from containers
that already exist (whose size the pickle paid for), sizes and copies are
charged to the load's budget *before* anything is allocated, and ``str`` only
converts scalars. Each stand-in is reached through a :class:`Builder`, an
immutable callable, so a pickle's BUILD opcode can neither change it nor
reach the function behind it.
"""

from __future__ import annotations

import codecs
import collections
import functools
import pickle
from collections.abc import Callable
from typing import Any

from miles_tui.core.dump.pt.pt_numpy import LoadContext, describe

_MATERIAL = (list, tuple, set, frozenset, dict, str, bytes, bytearray, range)
"""Arguments a container may be built from: they exist already, so their length is paid for."""
_SCALARS = (int, float, complex, bool, str, bytes, bytearray, type(None))
_CODECS = frozenset({"latin1", "latin-1", "utf-8", "utf8", "ascii"})
_SLOT = 8
"""Bytes a container spends per element (a pointer), before the element itself."""
_ENTRY = 48
"""Bytes a set or dict spends per element (hash table slot, load factor, the element's own int)."""
_HASH_VISIT = 8
"""Bytes of allowance charged per value a hash visits (as :mod:`.pt_depth` charges the unpickler's)."""


class Builder:
    """An allow-listed callable as the pickle sees it: callable, immutable, not a type, not picklable."""

    __slots__ = ("_call", "name")
    _call: Callable[..., Any]
    name: str

    def __init__(self, name: str, call: Callable[..., Any]) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "_call", call)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{self.name} cannot be changed by a pickle")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{self.name} cannot be changed by a pickle")

    def __reduce__(self) -> Any:
        raise TypeError(f"{self.name} cannot be pickled")

    def __repr__(self) -> str:
        return f"<allowed {self.name}>"


def bind(ctx: LoadContext, name: str, function: Callable[..., Any]) -> Builder:
    """``function`` with this load's context as its first argument, as a :class:`Builder`."""
    return Builder(name, functools.partial(function, ctx))


def _length(value: Any, what: str) -> int:
    """The length of an existing container; a lazy iterable (zip, map, a generator) is refused."""
    if not isinstance(value, _MATERIAL):
        raise pickle.UnpicklingError(f"{what} of a {type(value).__name__} is not allowed")
    return len(value)


def hash_cost(items: Any, limit: int) -> int:
    """How many tuples and scalars hashing each of ``items`` visits (past ``limit``: some number beyond it).

    A tuple's hash recurses through the tuples inside it and remembers nothing,
    so ``x = (x, x)`` nested 100 times costs 2**100; this counts it by the
    distinct tuples (and inert records, which hash their arguments) it holds.
    """
    memo: dict[int, int] = {}
    total = 0
    for item in items:
        total += _expanded(item, memo, limit)
        if total > limit:
            break
    return total


def _hash_children(node: Any) -> Any:
    if type(node) is tuple:
        return node
    if getattr(type(node), "type_name", None) is not None and isinstance(getattr(node, "args", None), tuple):
        return node.args  # an inert record: hashes (name, args)
    return None


def _expanded(root: Any, memo: dict[int, int], limit: int) -> int:
    if _hash_children(root) is None:
        return 1
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if id(node) in memo:
            continue
        children = _hash_children(node)
        if not ready:
            stack.append((node, True))
            stack.extend((c, False) for c in children if _hash_children(c) is not None and id(c) not in memo)
            continue
        memo[id(node)] = min(1 + sum(memo.get(id(c), 1) for c in children), limit + 1)
    return memo[id(root)]


def _container(kind: type, per_element: int, hashed: bool) -> Callable[..., Any]:
    def build(ctx: LoadContext, iterable: Any = ()) -> Any:
        count = _length(iterable, kind.__name__)
        ctx.budget.charge(64 + per_element * count, f"{kind.__name__}() of {count:,} elements")
        if hashed:
            _charge_hashing(ctx, iterable)
        return kind(iterable)

    build.__name__ = kind.__name__
    return build


def _charge_hashing(ctx: LoadContext, items: Any) -> None:
    """Charge the hashing of ``items`` (set elements, dict keys) before it happens."""
    if isinstance(items, str | bytes | bytearray | range):
        return
    cost = hash_cost(items, ctx.budget.limit)
    ctx.budget.charge(_HASH_VISIT * cost, f"hashing values that expand to {cost:,} items")


make_set = _container(set, _ENTRY, hashed=True)
make_frozenset = _container(frozenset, _ENTRY, hashed=True)
make_list = _container(list, _SLOT, hashed=False)


def make_tuple(ctx: LoadContext, iterable: Any = ()) -> tuple[Any, ...]:
    """``tuple()`` of plain scalars only: a tuple of containers would nest past what the guard follows
    (:mod:`miles_tui.core.dump.pt.pt_depth`); a pickle spells its tuples with opcodes, never with this call."""
    count = _length(iterable, "tuple")
    ctx.budget.charge(64 + _SLOT * count, f"tuple() of {count:,} elements")
    if not all(isinstance(item, _SCALARS) for item in iterable):
        raise pickle.UnpicklingError("tuple() of anything but plain scalars")
    return tuple(iterable)


def _mapping(kind: type, ctx: LoadContext, *args: Any, **kwargs: Any) -> Any:
    if len(args) > 1:
        raise pickle.UnpicklingError(f"{kind.__name__}() with {len(args)} arguments")
    count = (_length(args[0], kind.__name__) if args else 0) + len(kwargs)
    ctx.budget.charge(64 + _ENTRY * count, f"{kind.__name__}() of {count:,} items")
    if args:
        source = args[0]
        _charge_hashing(ctx, source.keys() if isinstance(source, dict) else [_key(pair) for pair in source])
    return kind(*args, **kwargs)


def _key(pair: Any) -> Any:
    return pair[0] if isinstance(pair, tuple | list) and pair else pair


make_dict = functools.partial(_mapping, dict)
make_ordered_dict = functools.partial(_mapping, collections.OrderedDict)


def _byte_string(kind: type, ctx: LoadContext, *args: Any) -> Any:
    """``bytes()``/``bytearray()`` of nothing, a size (charged), text and a codec, or existing bytes/ints."""
    if not args:
        return kind()
    source = args[0]
    if isinstance(source, bool) or len(args) > 3:
        raise pickle.UnpicklingError(f"{kind.__name__}() of {type(source).__name__}")
    if isinstance(source, int):
        ctx.budget.charge(source, f"{kind.__name__}({source:,})")
        return kind(source)
    if isinstance(source, str):
        if len(args) < 2 or args[1] not in _CODECS:
            raise pickle.UnpicklingError(f"{kind.__name__}() of text in codec {describe(args[1:2])}")
        ctx.budget.charge(4 * len(source), f"{kind.__name__}() of {len(source):,} characters")
        return kind(*args)
    count = _length(source, kind.__name__)
    ctx.budget.charge(count, f"{kind.__name__}() of {count:,} bytes")
    return kind(source)


make_bytes = functools.partial(_byte_string, bytes)
make_bytearray = functools.partial(_byte_string, bytearray)


def make_range(ctx: LoadContext, *args: Any) -> range:
    """``range()``: charged as the list it stands for, since a reader may well expand it."""
    if not args or len(args) > 3 or not all(type(a) is int for a in args):
        raise pickle.UnpicklingError("range() of something other than ints")
    span = range(*args)
    ctx.budget.charge(_SLOT * len(span), f"range() of {len(span):,} elements")
    return span


def make_str(ctx: LoadContext, *args: Any) -> str:
    """``str()`` of a scalar only: never the repr of a container the pickle shares with itself."""
    if not args:
        return ""
    if len(args) > 3 or not isinstance(args[0], _SCALARS):
        raise pickle.UnpicklingError(f"str() of a {type(args[0]).__name__}")
    if len(args) > 1 and args[1] not in _CODECS:
        raise pickle.UnpicklingError(f"str() in codec {describe(args[1])}")
    if isinstance(args[0], bytes | bytearray | str):
        ctx.budget.charge(4 * len(args[0]), f"str() of {len(args[0]):,} characters")
    return str(*args)


def _scalar(kind: type, ctx: LoadContext, *args: Any) -> Any:
    """``int``/``float``/``complex``/``bool`` of scalars (``int('9' * n)`` is capped by Python itself)."""
    if len(args) > 2 or not all(isinstance(a, _SCALARS) for a in args):
        raise pickle.UnpicklingError(f"{kind.__name__}() of {[type(a).__name__ for a in args]}")
    return kind(*args)


make_int = functools.partial(_scalar, int)
make_float = functools.partial(_scalar, float)
make_complex = functools.partial(_scalar, complex)
make_bool = functools.partial(_scalar, bool)


def make_slice(ctx: LoadContext, *args: Any) -> slice:
    if not 1 <= len(args) <= 3:
        raise pickle.UnpicklingError(f"slice() of {len(args)} arguments")
    return slice(*args)


def make_size(ctx: LoadContext, dims: Any = ()) -> tuple[int, ...]:
    """``torch.Size(dims)``: a short tuple of ints."""
    if not isinstance(dims, tuple | list) or len(dims) > 64 or not all(type(n) is int for n in dims):
        raise pickle.UnpicklingError(f"torch.Size of a {type(dims).__name__}")
    ctx.budget.charge(48 + _SLOT * len(dims), "a torch.Size")
    return tuple(dims)


def encode(ctx: LoadContext, text: Any, encoding: Any = "utf-8", errors: Any = "strict") -> bytes:
    """``_codecs.encode(text, 'latin1')``: how protocol 2 spells bytes; plain codecs only."""
    if not isinstance(text, str) or encoding not in _CODECS or errors != "strict":
        raise pickle.UnpicklingError(f"_codecs.encode of a {type(text).__name__} in codec {describe(encoding)}")
    ctx.budget.charge(4 * len(text), f"_codecs.encode of {len(text):,} characters")
    encoded: bytes = codecs.encode(text, encoding)
    return encoded


BUILTINS: dict[str, Callable[..., Any]] = {
    "set": make_set,
    "frozenset": make_frozenset,
    "list": make_list,
    "tuple": make_tuple,
    "dict": make_dict,
    "bytes": make_bytes,
    "bytearray": make_bytearray,
    "range": make_range,
    "str": make_str,
    "int": make_int,
    "float": make_float,
    "complex": make_complex,
    "bool": make_bool,
    "slice": make_slice,
}
"""Stand-ins for ``builtins.NAME``, by name (``object`` is the real, immutable ``object``)."""
