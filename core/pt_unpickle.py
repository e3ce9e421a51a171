"""The allow-list unpickler of ``torch.save`` pickles: plain data out, never code.

Contract: :class:`_SafeUnpickler` never imports a class or calls a function
named by the pickle except an allow-list of constructors that build plain data:

- tensors (``torch._utils._rebuild_tensor_v2``/``v3``, parameters) become numpy
  arrays over the archive's storage records (:mod:`core.pt_zip`); CUDA storage
  locations are irrelevant because nothing is moved to a device;
- numpy arrays, dtypes and scalars; builtin containers and scalars;
  ``collections.OrderedDict``; ``datetime`` values;
- any other class (the training framework's dataclasses such as ``RewardSpec``
  or ``AdapterRef``) becomes an :class:`InertRecord` holding its name, its
  constructor arguments and its state, and nothing of it is imported;
- a global from the standard library, torch or numpy outside the allow-list
  (``os.system``, ``builtins.eval``, ``subprocess.Popen``, ``numpy.load`` ...)
  is refused with :class:`UnsafePickleError` before anything runs.

Other failures surface as the unpickler's own exceptions; :mod:`core.pt_archive`
turns them into an error naming the file.
"""

from __future__ import annotations

import _compat_pickle
import builtins
import codecs
import collections
import datetime
import gc
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar

import numpy as np

from core.errors import UnsafePickleError
from core.pt_zip import _StorageRecords

_TORCH_STORAGE_DTYPES: dict[str, Any] = {
    "DoubleStorage": np.float64,
    "FloatStorage": np.float32,
    "HalfStorage": np.float16,
    "BFloat16Storage": "bfloat16",
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
    "UntypedStorage": np.uint8,
}

_TORCH_DTYPES: dict[str, Any] = {
    "float64": np.float64,
    "double": np.float64,
    "float32": np.float32,
    "float": np.float32,
    "float16": np.float16,
    "half": np.float16,
    "bfloat16": "bfloat16",
    "int64": np.int64,
    "long": np.int64,
    "int32": np.int32,
    "int": np.int32,
    "int16": np.int16,
    "short": np.int16,
    "int8": np.int8,
    "uint8": np.uint8,
    "bool": np.bool_,
}

_SAFE_BUILTINS = frozenset(
    {"set", "frozenset", "complex", "slice", "range", "bytearray", "bytes", "list", "dict", "tuple"}
    | {"int", "float", "str", "bool", "object"}
)

_STRICT_TOP_MODULES = frozenset({"torch", "numpy"}) | frozenset(sys.stdlib_module_names)


class InertRecord:
    """An object of a class this reader does not import: its name, arguments and state.

    Records compare equal when name, arguments and state are equal, so tests
    and caches can treat them as values. Nothing of the original class runs.
    """

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
        cls = type(type_name.rsplit(".", 1)[-1], (InertRecord,), {"type_name": type_name})
        _INERT_CLASSES[type_name] = cls
    return cls


def _rebuild_inert(type_name: str, args: tuple[Any, ...], state: Any) -> InertRecord:
    record = inert_class(type_name).__new__(inert_class(type_name), *args)
    record.state = state
    return record


@dataclass(frozen=True)
class _StorageType:
    dtype: Any


class _Storage:
    """One storage record of the archive, as a flat numpy array (memory-mapped when possible)."""

    __slots__ = ("array",)  # one per tensor of a dump: thousands per file

    def __init__(self, array: np.ndarray[Any, Any]) -> None:
        self.array = array


def _to_numpy_dtype(dtype: Any) -> Any:
    return np.uint16 if dtype == "bfloat16" else dtype


_NUMPY_DTYPES: dict[Any, np.dtype[Any]] = {}


def _numpy_dtype(dtype: Any) -> np.dtype[Any]:
    """The numpy dtype holding a storage's elements (bfloat16 as its raw uint16), cached."""
    found = _NUMPY_DTYPES.get(dtype)
    if found is None:
        found = _NUMPY_DTYPES[dtype] = np.dtype(_to_numpy_dtype(dtype))
    return found


def _rebuild_tensor(
    storage: _Storage,
    storage_offset: int,
    size: tuple[int, ...],
    stride: tuple[int, ...],
    *_ignored: Any,
) -> np.ndarray[Any, Any]:
    base = storage.array
    if len(size) == 1 and tuple(stride) == (1,) and storage_offset >= 0 and size[0] >= 0:
        # The common case (every column of a dump): a contiguous vector is a plain slice.
        end = storage_offset + size[0]
        if end > len(base):
            raise pickle.UnpicklingError(
                f"tensor of shape {tuple(size)} does not fit its storage of {len(base)} elements"
            )
        vector: np.ndarray[Any, Any] = base[storage_offset:end]
        return vector
    itemsize = base.dtype.itemsize
    needed = storage_offset + (1 + sum((n - 1) * s for n, s in zip(size, stride, strict=True)) if all(size) else 0)
    if storage_offset < 0 or needed > len(base) or any(s < 0 for s in stride):
        raise pickle.UnpicklingError(f"tensor of shape {tuple(size)} does not fit its storage of {len(base)} elements")
    view: np.ndarray[Any, Any] = np.ndarray(
        shape=tuple(size),
        dtype=base.dtype,
        buffer=base,
        offset=storage_offset * itemsize,
        strides=tuple(s * itemsize for s in stride),
    )
    return view


def _rebuild_tensor_v3(
    storage: _Storage,
    storage_offset: int,
    size: tuple[int, ...],
    stride: tuple[int, ...],
    requires_grad: bool,
    backward_hooks: Any,
    dtype: Any,
    *_ignored: Any,
) -> np.ndarray[Any, Any]:
    raw = storage.array.view(np.uint8)
    typed = _Storage(
        raw[: len(raw) - len(raw) % np.dtype(_to_numpy_dtype(dtype)).itemsize].view(_to_numpy_dtype(dtype))
    )
    return _rebuild_tensor(typed, storage_offset, size, stride)


def _rebuild_parameter(data: Any, *_ignored: Any) -> Any:
    return data


def _latin1_encode(text: str, encoding: str = "utf-8") -> bytes:
    if encoding not in ("latin1", "latin-1", "utf-8", "utf8", "ascii"):
        raise pickle.UnpicklingError(f"refusing codec {encoding!r}")
    return codecs.encode(text, encoding)


def _reconstructor(cls: Any, base: Any, state: Any = None) -> Any:
    if isinstance(cls, type) and issubclass(cls, InertRecord):
        record = cls.__new__(cls)
        record.state = state
        return record
    if base is object and cls in (collections.OrderedDict,):
        return cls()
    raise pickle.UnpicklingError(f"copyreg._reconstructor for {cls!r} is not allowed")


def _newobj(cls: Any, *args: Any) -> Any:
    if isinstance(cls, type) and issubclass(cls, InertRecord):
        return cls.__new__(cls, *args)
    raise pickle.UnpicklingError(f"copyreg.__newobj__ for {cls!r} is not allowed")


def _numpy_global(name: str) -> Any:
    from numpy._core import multiarray  # numpy >= 2 (the dumps' writer)

    table: dict[str, Any] = {
        "_reconstruct": multiarray._reconstruct,
        "scalar": multiarray.scalar,
        "ndarray": np.ndarray,
        "dtype": np.dtype,
    }
    return table.get(name)


_ALLOWED: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch", "Size"): tuple,
    ("_codecs", "encode"): _latin1_encode,
    ("copyreg", "_reconstructor"): _reconstructor,
    ("copyreg", "__newobj__"): _newobj,
    ("core.pt_archive", "_rebuild_inert"): _rebuild_inert,
    ("core.pt_unpickle", "_rebuild_inert"): _rebuild_inert,
    ("datetime", "datetime"): datetime.datetime,
    ("datetime", "date"): datetime.date,
    ("datetime", "timedelta"): datetime.timedelta,
    ("datetime", "timezone"): datetime.timezone,
}


class _SafeUnpickler(pickle.Unpickler):
    def __init__(self, stream: IO[bytes], storages: _StorageRecords | None, path: Path) -> None:
        super().__init__(stream)
        self._storages = storages
        self._path = path

    def find_class(self, module: str, name: str) -> Any:
        # Protocol-2 pickles name Python 2 modules ("commands" for subprocess,
        # "__builtin__" for builtins); judge the module they really resolve to.
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        allowed = _ALLOWED.get((module, name))
        if allowed is not None:
            return allowed
        if module == "torch":
            if name in _TORCH_STORAGE_DTYPES:
                return _StorageType(_TORCH_STORAGE_DTYPES[name])
            if name in _TORCH_DTYPES:
                return _TORCH_DTYPES[name]
        if module == "torch.storage" and name in ("UntypedStorage", "TypedStorage"):
            return _StorageType(np.uint8)
        if module in ("numpy", "numpy.core.multiarray", "numpy._core.multiarray"):
            found = _numpy_global(name)
            if found is not None:
                return found
        if module == "builtins" and name in _SAFE_BUILTINS:
            return getattr(builtins, name)
        if module.split(".", 1)[0] in _STRICT_TOP_MODULES:
            raise UnsafePickleError(
                f"refused to load: the pickle asks for {module}.{name}, which could run code. "
                "Nothing was executed; do not trust this file",
                self._path,
            )
        return inert_class(f"{module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        if not isinstance(pid, tuple) or len(pid) < 5 or pid[0] not in ("storage", b"storage"):
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")
        storage_type, key, _location, numel = pid[1], pid[2], pid[3], pid[4]
        if self._storages is None:
            raise pickle.UnpicklingError("tensor storage outside a torch zip archive")
        key = key.decode() if isinstance(key, bytes) else str(key)
        raw = self._storages.get(key)
        if raw is None:
            raise pickle.UnpicklingError(f"storage record {key} is missing from the archive")
        dtype = storage_type.dtype if isinstance(storage_type, _StorageType) else np.uint8
        np_dtype = _numpy_dtype(dtype)
        nbytes = int(numel) * np_dtype.itemsize
        if nbytes > len(raw):
            raise pickle.UnpicklingError(f"storage record {key} is shorter than its {numel} elements")
        typed = raw[:nbytes].view(np_dtype)
        if dtype == "bfloat16":
            typed = (typed.astype(np.uint32) << 16).view(np.float32)
        return _Storage(typed)


def _unpickle(unpickler: _SafeUnpickler) -> Any:
    """Run the unpickler with the cyclic GC paused.

    A rollout file is millions of ints and floats in a few thousand lists: the
    collector would walk those lists again and again while they are built (a
    third of the load time) and can find nothing, since a pickle that builds
    cycles is collected as soon as the GC runs again afterwards.
    """
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        return unpickler.load()
    finally:
        if paused:
            gc.enable()
