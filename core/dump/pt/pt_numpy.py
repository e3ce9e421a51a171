"""numpy values out of a pickle: tensors, arrays, scalars and dtypes, rebuilt only from checked numbers.

Contract: nothing here hands numpy a state the pickle wrote. A dtype is looked
up in a fixed table of plain numeric and bool types (:data:`PLAIN_DTYPES`) by
its name, and its pickled state is compared with the one such a dtype has;
anything else (object, structured, string, datetime, void dtypes, forged flags)
raises :class:`NumpyRefused`. Arrays and scalars are built by this module from
(dtype, shape, bytes) after checking that the bytes are exactly what the shape
needs; tensors from (dtype, offset, shape, strides) after checking that every
element lies inside a storage record whose size the pickle declared exactly,
and their bytes are *copied* out of the file (``pread``), so no value is ever a
view of a file that may be truncated later. Every allocation is charged to the
load's :class:`~miles_tui.core.dump.pt.pt_guard.LoadBudget` first, by element count after strides
(a broadcast view costs what its expansion would).

While the unpickler runs, each such value is a :class:`Pending` placeholder:
the unpickler's BUILD opcode calls ``__setstate__`` on whatever it is given, and
numpy's own ``__setstate__`` must never see a pickle's state. Placeholders take
their one expected state (a dtype's, an array's) or refuse it; the caller
replaces them by their values once the pickle is done (:mod:`miles_tui.core.dump.pt.pt_unpickle`).
"""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from miles_tui.core.dump.pt.pt_guard import LoadBudget
from miles_tui.core.dump.pt.pt_zip import _StorageRecords, _StorageSpan

PLAIN_DTYPES: dict[str, np.dtype[Any]] = {
    name: np.dtype(name)
    for name in ("b1", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", "c8", "c16")
}
"""The only numpy dtypes a pickle may name, by the name numpy pickles them with."""
_PLAIN_STATE = (None, None, None, -1, -1, 0)
"""What numpy pickles for a plain dtype after its version and byte order: no subarray, names,
fields; default size and alignment; no flags."""
_MAX_DIMS = 32
_PENDING_COST = 160
"""Bytes charged for a placeholder and the small value it holds."""
BFLOAT16 = "bfloat16"
_STORAGE_DTYPES: dict[str, str] = {
    "DoubleStorage": "f8",
    "FloatStorage": "f4",
    "HalfStorage": "f2",
    "BFloat16Storage": BFLOAT16,
    "LongStorage": "i8",
    "IntStorage": "i4",
    "ShortStorage": "i2",
    "CharStorage": "i1",
    "ByteStorage": "u1",
    "BoolStorage": "b1",
    "UntypedStorage": "u1",
}
_TORCH_DTYPES: dict[str, str] = {
    "float64": "f8",
    "double": "f8",
    "float32": "f4",
    "float": "f4",
    "float16": "f2",
    "half": "f2",
    "bfloat16": BFLOAT16,
    "int64": "i8",
    "long": "i8",
    "int32": "i4",
    "int": "i4",
    "int16": "i2",
    "short": "i2",
    "int8": "i1",
    "uint8": "u1",
    "bool": "b1",
}


class NumpyRefused(Exception):
    """A numpy value the reader will not build (the caller names the file)."""


@dataclass(slots=True)
class LoadContext:
    """What the builders of one load share."""

    budget: LoadBudget
    path: Path
    storages: _StorageRecords | None
    placeholders: int = 0
    """How many :class:`Pending` values this load made (0: nothing to replace afterwards)."""


class TorchDtype(NamedTuple):
    """``torch.float32`` and friends, as a name (immutable: a pickle cannot BUILD into it)."""

    code: str


class StorageType(NamedTuple):
    """``torch.FloatStorage`` and friends, as the dtype code of their elements."""

    code: str


class Storage(NamedTuple):
    """A storage record the pickle asked for, with the element type and count it declared."""

    span: _StorageSpan
    code: str
    numel: int


class NdarrayToken(NamedTuple):
    """``numpy.ndarray`` as the pickle names it for ``_reconstruct``: a token, never the class."""


NDARRAY = NdarrayToken()


def storage_type(name: str) -> StorageType | None:
    code = _STORAGE_DTYPES.get(name)
    return None if code is None else StorageType(code)


def torch_dtype(name: str) -> TorchDtype | None:
    code = _TORCH_DTYPES.get(name)
    return None if code is None else TorchDtype(code)


def _raw_dtype(code: str) -> np.dtype[Any]:
    return PLAIN_DTYPES["u2"] if code == BFLOAT16 else PLAIN_DTYPES[code]


class Pending:
    """A numpy value under construction; BUILD reaches only this class's ``__setstate__``."""

    __slots__ = ("_ctx", "value")
    __hash__ = None  # type: ignore[assignment]  # unhashable, like the arrays it stands for

    def __init__(self, ctx: LoadContext, value: Any) -> None:
        self._ctx = ctx
        self.value = value
        ctx.placeholders += 1

    def __setstate__(self, state: Any) -> None:
        raise NumpyRefused("the pickle gives state to a numpy value that takes none")

    def __reduce__(self) -> Any:
        raise TypeError("a value under construction cannot be pickled")


class PendingDtype(Pending):
    """``numpy.dtype(name, align, copy)``: a table lookup; BUILD may only confirm the plain state."""

    __slots__ = ("_set",)

    def __init__(self, ctx: LoadContext, value: np.dtype[Any]) -> None:
        super().__init__(ctx, value)
        self._set = False

    def __setstate__(self, state: Any) -> None:
        if self._set or not isinstance(state, tuple) or len(state) != 8 or state[0] != 3:
            raise NumpyRefused(f"a numpy dtype state of {type(state).__name__} {describe(state)}")
        byteorder, rest = state[1], state[2:]
        if rest != _PLAIN_STATE or byteorder not in ("<", ">", "|", "="):
            raise NumpyRefused(f"a numpy dtype with fields, objects or flags {describe(state)}")
        if byteorder in "<>" and self.value.itemsize > 1:
            self.value = self.value.newbyteorder(byteorder)
        self._set = True


class PendingArray(Pending):
    """``numpy._core.multiarray._reconstruct(ndarray, ...)``: empty until its one BUILD."""

    __slots__ = ("_set",)

    def __init__(self, ctx: LoadContext) -> None:
        super().__init__(ctx, np.empty(0, dtype=np.int8))
        self._set = False

    def __setstate__(self, state: Any) -> None:
        if self._set or not isinstance(state, tuple) or len(state) != 5 or state[0] != 1:
            raise NumpyRefused(f"a numpy array state of {type(state).__name__} {describe(state)}")
        _version, shape, dtype, fortran, raw = state
        if not isinstance(dtype, PendingDtype):
            raise NumpyRefused(f"a numpy array of dtype {type(dtype).__name__}")
        dims = _dims(shape, "array shape")
        if not isinstance(fortran, bool | int) or not isinstance(raw, bytes | bytearray):
            raise NumpyRefused(f"a numpy array whose data is a {type(raw).__name__} (object arrays are refused)")
        numel = math.prod(dims)
        if len(raw) != numel * dtype.value.itemsize:
            raise NumpyRefused(f"a numpy array of shape {dims} with {len(raw)} bytes of data")
        self._ctx.budget.charge(len(raw), f"a numpy array of shape {dims}")
        self.value = _from_bytes(raw, dtype.value, numel).reshape(dims, order="F" if fortran else "C").copy(order="K")
        self._set = True


def _from_bytes(raw: bytes | bytearray, dtype: np.dtype[Any], count: int) -> np.ndarray[Any, Any]:
    """``count`` elements of ``dtype`` from ``raw`` (bools normalised: any non-zero byte is True)."""
    if dtype.kind == "b":
        flags: np.ndarray[Any, Any] = np.frombuffer(raw, dtype=np.uint8, count=count) != 0
        return flags
    return np.frombuffer(raw, dtype=dtype, count=count)


def make_dtype(ctx: LoadContext, name: Any, align: Any = False, copy: Any = True) -> PendingDtype:
    """``numpy.dtype(name, align, copy)`` for a name of the plain table only."""
    found = PLAIN_DTYPES.get(name) if isinstance(name, str) else None
    if found is None:
        raise NumpyRefused(f"a numpy dtype {describe(name)} (only plain numbers and bools are read)")
    ctx.budget.charge(_PENDING_COST, "a numpy dtype")
    return PendingDtype(ctx, found)


def reconstruct(ctx: LoadContext, cls: Any, shape: Any = (0,), typecode: Any = b"b") -> PendingArray:
    """``numpy._core.multiarray._reconstruct(numpy.ndarray, ...)``: an array awaiting its state."""
    if cls is not NDARRAY:
        raise NumpyRefused(f"numpy _reconstruct of {type(cls).__name__} (only numpy.ndarray is read)")
    ctx.budget.charge(_PENDING_COST, "a numpy array")
    return PendingArray(ctx)


def scalar(ctx: LoadContext, dtype: Any, data: Any = None) -> Pending:
    """``numpy._core.multiarray.scalar(dtype, bytes)`` with exactly the bytes the dtype needs."""
    if not isinstance(dtype, PendingDtype):
        raise NumpyRefused(f"a numpy scalar of dtype {type(dtype).__name__}")
    if not isinstance(data, bytes | bytearray) or len(data) != dtype.value.itemsize:
        raise NumpyRefused(f"a numpy scalar of {dtype.value} from {type(data).__name__} {describe(data)}")
    ctx.budget.charge(_PENDING_COST, "a numpy scalar")
    return Pending(ctx, _from_bytes(data, dtype.value, 1)[0])


def storage(ctx: LoadContext, kind: Any, key: Any, numel: Any) -> Storage:
    """A persistent id: the storage record ``key`` holding ``numel`` elements of ``kind``, exactly."""
    if ctx.storages is None:
        raise pickle.UnpicklingError("tensor storage outside a torch zip archive")
    if not isinstance(kind, StorageType) or not isinstance(numel, int) or numel < 0:
        raise pickle.UnpicklingError(f"a storage of {type(kind).__name__} with {describe(numel)} elements")
    name = key.decode(errors="replace") if isinstance(key, bytes) else str(key)
    span = ctx.storages.get(name)
    if span is None:
        raise pickle.UnpicklingError(f"storage record {name} is missing from the archive")
    declared = numel * _raw_dtype(kind.code).itemsize
    if declared != span.size:
        raise pickle.UnpicklingError(
            f"storage record {name} holds {span.size:,} bytes, but the pickle declares {numel:,} elements "
            f"({declared:,} bytes)"
        )
    return Storage(span, kind.code, numel)


def rebuild_tensor(
    ctx: LoadContext, storage: Any, storage_offset: Any, size: Any, stride: Any, *_ignored: Any
) -> Pending:
    """``torch._utils._rebuild_tensor_v2``: a read-only array holding a copy of the tensor's elements."""
    if not isinstance(storage, Storage):
        raise pickle.UnpicklingError(f"a tensor over a {type(storage).__name__}, not a storage record")
    return Pending(ctx, _tensor(ctx, storage, storage_offset, size, stride))


def rebuild_tensor_v3(
    ctx: LoadContext,
    storage: Any,
    storage_offset: Any,
    size: Any,
    stride: Any,
    requires_grad: Any,
    backward_hooks: Any,
    dtype: Any,
    *_ignored: Any,
) -> Pending:
    """``torch._utils._rebuild_tensor_v3``: the storage's bytes read as ``dtype`` elements."""
    if not isinstance(storage, Storage) or not isinstance(dtype, TorchDtype):
        raise pickle.UnpicklingError("a tensor over something that is not a storage record, or of no dtype")
    itemsize = _raw_dtype(dtype.code).itemsize
    typed = Storage(storage.span, dtype.code, storage.span.size // itemsize)
    return Pending(ctx, _tensor(ctx, typed, storage_offset, size, stride))


def _tensor(ctx: LoadContext, storage: Storage, offset: Any, size: Any, stride: Any) -> np.ndarray[Any, Any]:
    dims, steps = _dims(size, "tensor size"), _dims(stride, "tensor stride")
    if len(dims) != len(steps) or not isinstance(offset, int) or offset < 0:
        raise pickle.UnpicklingError(
            f"a tensor of size {describe(size)}, stride {describe(stride)}, offset {describe(offset)}"
        )
    numel = math.prod(dims)
    span = 0 if numel == 0 else 1 + sum((n - 1) * s for n, s in zip(dims, steps, strict=True))
    if offset + span > storage.numel:
        raise pickle.UnpicklingError(f"tensor of shape {dims} does not fit its storage of {storage.numel} elements")
    raw = _raw_dtype(storage.code)
    converted = 8 * span if storage.code == BFLOAT16 else span if raw.kind == "b" else 0
    broadcast = max(numel - span, 0) * (4 if storage.code == BFLOAT16 else raw.itemsize)
    # What is allocated here, plus what a caller expanding a broadcast view would allocate.
    ctx.budget.charge(span * raw.itemsize + converted + broadcast, f"a tensor of shape {dims} (stride {steps})")
    elements = np.empty(span, dtype=raw)
    assert ctx.storages is not None
    with elements.data as view, view.cast("B") as target:
        ctx.storages.read_into(storage.span, offset * raw.itemsize, target)
    if storage.code == BFLOAT16:
        elements = (elements.astype(np.uint32) << 16).view(np.float32)
    elif raw.kind == "b":
        elements = elements.view(np.uint8) != 0
    if numel == 0:
        tensor = np.empty(dims, dtype=elements.dtype)
    elif dims == (span,):
        tensor = elements
    else:  # numpy checks the strides against the buffer again
        itemsize = elements.dtype.itemsize
        tensor = np.ndarray(dims, elements.dtype, elements, 0, tuple(s * itemsize for s in steps))
    tensor.flags.writeable = False
    return tensor


def _dims(value: Any, what: str) -> tuple[int, ...]:
    """A shape or strides: a short tuple (or list) of non-negative Python ints."""
    if not isinstance(value, tuple | list) or len(value) > _MAX_DIMS:
        raise pickle.UnpicklingError(f"a {what} of {describe(value)}")
    if not all(type(n) is int and n >= 0 for n in value):
        raise pickle.UnpicklingError(f"a {what} of {describe(value)}")
    return tuple(value)


def describe(value: Any) -> str:
    """A few characters saying what ``value`` is, without walking or printing anything big."""
    if isinstance(value, str | bytes):
        text = repr(value[:60])
    elif (isinstance(value, int) and value.bit_length() < 200) or isinstance(value, float) or value is None:
        text = repr(value)
    elif isinstance(value, tuple | list):
        text = f"a {type(value).__name__} of {len(value)}"
    else:
        text = f"a {type(value).__name__}"
    return text if len(text) <= 80 else text[:77] + "..."
