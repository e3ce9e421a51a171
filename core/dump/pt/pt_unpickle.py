"""The allow-list unpickler of ``torch.save`` pickles: plain data out, never code, never unbounded.

Contract: :func:`unpickle` never imports a class or calls a function named by
the pickle except an allow-list of builders of plain data:

- tensors (``torch._utils._rebuild_tensor_v2``/``v3``, parameters) become
  read-only numpy arrays holding a copy of their elements, and numpy arrays,
  scalars and dtypes are rebuilt from checked numbers, never from numpy's own
  ``__setstate__`` (:mod:`miles_tui.core.dump.pt.pt_numpy`: plain numeric and bool dtypes only);
- builtin containers and scalars through stand-ins that check their arguments
  and charge their size first (:mod:`miles_tui.core.dump.pt.pt_builtins`),
  ``collections.OrderedDict``, ``datetime`` values;
- any other class (the training framework's dataclasses such as ``RewardSpec``
  or ``AdapterRef``) becomes an :class:`InertRecord` holding its name, its
  constructor arguments and its state, and nothing of it is imported;
- a global from the standard library, torch or numpy outside the allow-list
  (``os.system``, ``builtins.eval``, ``subprocess.Popen``, ``numpy.load`` ...),
  or a numpy value outside the table, is refused with :class:`UnsafePickleError`
  before anything runs.

What the pickle gets back from a name is immutable (a builder, a token, a
class that refuses new attributes), so one file cannot change how the next one
loads. Every allocation is charged to the load's budget
(:mod:`miles_tui.core.dump.pt.pt_guard`). Other failures surface as the unpickler's own
exceptions; :mod:`miles_tui.core.dump.pt.pt_archive` turns them into an error naming the file.
"""

from __future__ import annotations

import _compat_pickle
import datetime
import gc
import pickle
import sys
from typing import IO, Any, ClassVar, cast

from miles_tui.core.base.errors import UnsafePickleError
from miles_tui.core.dump.pt import pt_builtins, pt_numpy
from miles_tui.core.dump.pt.pt_guard import LoadBudget
from miles_tui.core.dump.pt.pt_numpy import LoadContext, NumpyRefused, Pending

_STRICT_TOP_MODULES = frozenset({"torch", "numpy"}) | frozenset(sys.stdlib_module_names)
_INERT_CACHE_LIMIT = 4096
"""Stand-in classes kept across loads; past this, a new name gets an uncached class."""
_EXPANDED_ITEM = 8
"""Bytes of allowance per item a shared value expands to (what a walker that copies it would spend)."""
_INERT_CLASS_COST = 2048
"""Bytes charged for making a stand-in class (a type object and its dict)."""


class _InertMeta(type):
    """Stand-in classes are shared by every load: nothing may set an attribute on one."""

    def __setattr__(cls, name: str, value: Any) -> None:
        raise AttributeError(f"{cls.__name__} cannot be changed by a pickle")

    def __delattr__(cls, name: str) -> None:
        raise AttributeError(f"{cls.__name__} cannot be changed by a pickle")


class InertRecord(metaclass=_InertMeta):
    """An object of a class this reader does not import: its name, arguments and state.

    Records compare equal when name, arguments and state are equal, so tests
    and caches can treat them as values. Nothing of the original class runs.
    """

    __slots__ = ("args", "state")  # an object per record a pickle makes: no __dict__ (56 bytes)
    type_name: ClassVar[str] = "?"

    def __new__(cls, *args: Any, **kwargs: Any) -> InertRecord:
        obj = super().__new__(cls)
        obj.args = args
        obj.state = None
        return obj

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args: tuple[Any, ...] = args
        self.state: Any = getattr(self, "state", None)

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __reduce__(self) -> Any:
        return (_rebuild_inert, (self.type_name, self.args, self.state))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, InertRecord)
            and other.type_name == self.type_name
            and other.args == self.args
            and other.state == self.state
        )

    def __hash__(self) -> int:
        return hash((self.type_name, self.args))

    def __repr__(self) -> str:
        return f"<inert {self.type_name} args={self.args!r} state={self.state!r}>"


_INERT_CLASSES: dict[str, type[InertRecord]] = {}


def inert_class(type_name: str) -> type[InertRecord]:
    """The (cached) inert stand-in class for a dotted class name."""
    cls = _INERT_CLASSES.get(type_name)
    if cls is None:
        cls = cast(
            type[InertRecord],
            _InertMeta(type_name.rsplit(".", 1)[-1], (InertRecord,), {"type_name": type_name, "__slots__": ()}),
        )
        if len(_INERT_CLASSES) < _INERT_CACHE_LIMIT:
            _INERT_CLASSES[type_name] = cls
    return cls


def _rebuild_inert(type_name: str, args: tuple[Any, ...], state: Any) -> InertRecord:
    record = inert_class(type_name).__new__(inert_class(type_name), *args)
    record.state = state
    return record


def _inert_class_charged(ctx: LoadContext, type_name: str) -> type[InertRecord]:
    if type_name not in _INERT_CLASSES:
        ctx.budget.charge(_INERT_CLASS_COST + len(type_name), f"a stand-in class for {type_name[:80]}")
    return inert_class(type_name)


def _rebuild_inert_checked(ctx: LoadContext, type_name: Any, args: Any, state: Any = None) -> InertRecord:
    if not isinstance(type_name, str) or len(type_name) > 1024 or not isinstance(args, tuple):
        raise pickle.UnpicklingError("an inert record with a bad name or arguments")
    record = _inert_class_charged(ctx, type_name).__new__(inert_class(type_name), *args)
    record.state = state
    return record


def _rebuild_parameter(ctx: LoadContext, data: Any, *_ignored: Any) -> Any:
    return data


def _reconstructor(ctx: LoadContext, cls: Any, base: Any, state: Any = None) -> Any:
    if isinstance(cls, type) and issubclass(cls, InertRecord):
        record = cls.__new__(cls)
        record.state = state
        return record
    if base is object and isinstance(cls, pt_builtins.Builder) and cls.name == "collections.OrderedDict":
        return cls()
    raise pickle.UnpicklingError(f"copyreg._reconstructor for a {type(cls).__name__} is not allowed")


def _newobj(ctx: LoadContext, cls: Any, *args: Any) -> Any:
    if isinstance(cls, type) and issubclass(cls, InertRecord):
        return cls.__new__(cls, *args)
    raise pickle.UnpicklingError(f"copyreg.__newobj__ for a {type(cls).__name__} is not allowed")


_ALLOWED: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): pt_builtins.make_ordered_dict,
    ("torch._utils", "_rebuild_tensor_v2"): pt_numpy.rebuild_tensor,
    ("torch._utils", "_rebuild_tensor"): pt_numpy.rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v3"): pt_numpy.rebuild_tensor_v3,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch", "Size"): pt_builtins.make_size,
    ("_codecs", "encode"): pt_builtins.encode,
    ("copyreg", "_reconstructor"): _reconstructor,
    ("copyreg", "__newobj__"): _newobj,
    ("miles_tui.core.dump.pt_archive", "_rebuild_inert"): _rebuild_inert_checked,
    ("miles_tui.core.dump.pt_unpickle", "_rebuild_inert"): _rebuild_inert_checked,
    ("miles_tui.core.dump.pt.pt_unpickle", "_rebuild_inert"): _rebuild_inert_checked,
    **{("builtins", name): build for name, build in pt_builtins.BUILTINS.items()},
    **{
        (module, name): build
        for module in ("numpy", "numpy.core.multiarray", "numpy._core.multiarray")
        for name, build in (
            ("_reconstruct", pt_numpy.reconstruct),
            ("scalar", pt_numpy.scalar),
            ("dtype", pt_numpy.make_dtype),
        )
    },
}
"""Builders by the (module, name) a pickle asks for; each is bound to the load and wrapped in a Builder."""

_TYPES: dict[tuple[str, str], Any] = {
    ("builtins", "object"): object,
    ("datetime", "datetime"): datetime.datetime,
    ("datetime", "date"): datetime.date,
    ("datetime", "timedelta"): datetime.timedelta,
    ("datetime", "timezone"): datetime.timezone,
    ("numpy", "ndarray"): pt_numpy.NDARRAY,
}
"""Immutable builtin types (and tokens) handed out as they are."""


class _SafeUnpickler(pickle.Unpickler):
    def __init__(self, stream: IO[bytes], ctx: LoadContext) -> None:
        super().__init__(stream)
        self._ctx = ctx

    def find_class(self, module: str, name: str) -> Any:
        # Protocol-2 pickles name Python 2 modules ("commands" for subprocess,
        # "__builtin__" for builtins); judge the module they really resolve to.
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        build = _ALLOWED.get((module, name))
        if build is not None:
            return pt_builtins.bind(self._ctx, f"{module}.{name}", build)
        found = _TYPES.get((module, name))
        if found is None and module == "torch":
            found = pt_numpy.storage_type(name) or pt_numpy.torch_dtype(name)
        if found is None and module == "torch.storage" and name in ("UntypedStorage", "TypedStorage"):
            found = pt_numpy.storage_type("UntypedStorage")
        if found is not None:
            return found
        if module.split(".", 1)[0] in _STRICT_TOP_MODULES:
            raise UnsafePickleError(
                f"refused to load: the pickle asks for {module[:200]}.{name[:200]}, which could run code. "
                "Nothing was executed; do not trust this file",
                self._ctx.path,
            )
        return _inert_class_charged(self._ctx, f"{module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        if not isinstance(pid, tuple) or len(pid) < 5 or pid[0] not in ("storage", b"storage"):
            raise pickle.UnpicklingError(f"unknown persistent id {pt_numpy.describe(pid)}")
        key = pid[2]
        if not isinstance(key, str | bytes) or len(key) > 256:
            raise pickle.UnpicklingError(f"a storage key of {pt_numpy.describe(key)}")
        return pt_numpy.storage(self._ctx, pid[1], key, pid[4])


def unpickle(stream: IO[bytes], ctx: LoadContext) -> Any:
    """Run the unpickler over ``stream`` (cyclic GC paused), then put numpy values in place of placeholders.

    A rollout file is millions of ints and floats in a few thousand lists: the
    collector would walk those lists again and again while they are built (a
    third of the load time) and can find nothing, since a pickle that builds
    cycles is collected as soon as the GC runs again afterwards.
    """
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        value = _SafeUnpickler(stream, ctx).load()
        return _settle(value) if ctx.placeholders else value
    except NumpyRefused as err:
        raise UnsafePickleError(
            f"refused to load: the pickle asks for {err}, which could corrupt memory. "
            "Nothing was built from it; do not trust this file",
            ctx.path,
        ) from None
    finally:
        if paused:
            gc.enable()


_LEAVES = frozenset({int, float, str, bytes, bool, type(None), complex, bytearray, range})


def _nodes(items: Any) -> list[Any]:
    """The items that may hold (or be) a placeholder; a list of plain scalars is passed over at C speed."""
    if _LEAVES.issuperset(map(type, items)):
        return []
    return [item for item in items if type(item) not in _LEAVES]


def _children(node: Any) -> list[Any]:
    if isinstance(node, list | tuple):
        return _nodes(node)
    if isinstance(node, dict):
        return _nodes(node.values()) + _nodes(node.keys())
    if isinstance(node, set | frozenset):
        return _nodes(node)
    if isinstance(node, InertRecord):
        return [node.args, node.state]
    if isinstance(node, slice):
        return [node.start, node.stop, node.step]
    return []


def _settle(root: Any) -> Any:
    """Replace every placeholder reachable from ``root`` by its value (iteratively, cycles allowed)."""
    done: dict[int, Any] = {}
    keep: list[Any] = []  # the originals, so that no id is reused while the walk runs
    started: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        key = id(node)
        if key in done:
            continue
        if isinstance(node, Pending):
            done[key] = node.value
            keep.append(node)
            continue
        if not expanded:
            if key in started:
                continue  # a cycle: finished by the visit that started it
            started.add(key)
            children = _children(node)
            if not children:  # nothing inside can change: most lists, every string
                done[key] = node
                keep.append(node)
                continue
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in done)
            continue
        done[key] = _replaced(node, done)
        keep.append(node)
    return done.get(id(root), root)


def _replaced(node: Any, done: dict[int, Any]) -> Any:
    """``node`` with its children swapped for their settled versions (in place when mutable)."""

    def settled(item: Any) -> Any:
        return done.get(id(item), item)

    if isinstance(node, list):
        for i, item in enumerate(node):
            if type(item) not in _LEAVES and settled(item) is not item:
                node[i] = settled(item)
    elif isinstance(node, dict):
        for k, item in list(node.items()):
            if type(item) not in _LEAVES and settled(item) is not item:
                node[k] = settled(item)
    elif isinstance(node, tuple):
        if any(settled(item) is not item for item in node):
            return tuple(settled(item) for item in node)
    elif isinstance(node, InertRecord):
        node.args, node.state = settled(node.args), settled(node.state)
    elif isinstance(node, slice):
        return slice(settled(node.start), settled(node.stop), settled(node.step))
    return node


def check_expansion(root: Any, budget: LoadBudget) -> None:
    """Charge what ``root`` expands to when walked as a tree (repr, JSON, a copy): a shared container counts
    every time it appears. Needed only when the pickle referenced a container twice; cycles count once."""
    sizes: dict[int, int] = {}
    started: set[int] = set()
    keep: list[Any] = []
    cap = budget.limit
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        children = _children(node) if not isinstance(node, Pending) else []
        if not ready:
            if key in started:
                continue  # a cycle: walkers stop there
            started.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        leaves = len(node) if isinstance(node, list | tuple | dict | set | frozenset) else 0
        sizes[key] = min(1 + leaves + sum(sizes.get(id(child), 1) for child in children), cap)
        keep.append(node)
    total = sizes.get(id(root), 1)
    budget.charge(_EXPANDED_ITEM * total, f"values that share containers and expand to {total:,} items")


__all__ = ["InertRecord", "check_expansion", "inert_class", "unpickle"]
