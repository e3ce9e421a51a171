"""Write ``torch.save``-compatible files without torch.

Contract: :func:`save_pt` writes the zip archive that ``torch.save`` writes
(``{name}/data.pkl`` pickle protocol 2, ``{name}/data/{key}`` storage records
aligned to 64 bytes, ``byteorder``, ``version``), so ``torch.load`` and
:func:`miles_tui.core.dump.pt.pt_archive.load_pt` read it back. numpy arrays become torch
tensors (contiguous, CPU storage, the matching storage type); dicts, lists,
tuples, strings, numbers, booleans and None are written as such; any other
object is pickled by the standard library inline (that is how a numpy array
inside a rollout sample stays a numpy array when wrapped in :class:`KeepAsIs`).

This lets the demo and the test fixtures write real dumps on a machine
without torch; it never reads files and never imports torch.
"""

from __future__ import annotations

import io
import pickle
import struct
import sys
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

_STORAGE_TYPES = {
    np.dtype(np.float64): "DoubleStorage",
    np.dtype(np.float32): "FloatStorage",
    np.dtype(np.float16): "HalfStorage",
    np.dtype(np.int64): "LongStorage",
    np.dtype(np.int32): "IntStorage",
    np.dtype(np.int16): "ShortStorage",
    np.dtype(np.int8): "CharStorage",
    np.dtype(np.uint8): "ByteStorage",
    np.dtype(np.bool_): "BoolStorage",
}
_ALIGNMENT = 64
_GLOBALS_MAX = 256
"""Memo slots 0..255 hold the globals this writer emits; inline stdlib fragments number theirs from 256."""
_FRAGMENT_MEMO_BASE: dict[int, tuple[int, object]] = {}
_PLACEHOLDERS = [object() for _ in range(_GLOBALS_MAX)]
for _index, _placeholder in enumerate(_PLACEHOLDERS):
    _FRAGMENT_MEMO_BASE[id(_placeholder)] = (_index, _placeholder)


@dataclass(frozen=True)
class KeepAsIs:
    """Pickle ``value`` with the standard library (e.g. a numpy array that must stay numpy)."""

    value: Any


class _PickleWriter:
    """Protocol-2 opcodes for plain data, tensors as persistent storage references."""

    def __init__(self) -> None:
        self.out = io.BytesIO()
        self.storages: list[bytes] = []
        self._memo: dict[tuple[str, str], int] = {}

    def _global(self, module: str, name: str) -> None:
        # Memoized like torch.save does: a reader resolves each global once, not once per tensor.
        index = self._memo.get((module, name))
        if index is not None:
            self.out.write(b"j" + struct.pack("<I", index))  # LONG_BINGET
            return
        index = len(self._memo)
        if index >= _GLOBALS_MAX:
            raise ValueError("too many distinct globals for one archive")
        self._memo[(module, name)] = index
        self.out.write(b"c" + module.encode() + b"\n" + name.encode() + b"\n")
        self.out.write(b"r" + struct.pack("<I", index))  # LONG_BINPUT

    def _str(self, text: str) -> None:
        data = text.encode("utf-8", "surrogatepass")
        self.out.write(b"X" + struct.pack("<I", len(data)) + data)

    def _int(self, value: int) -> None:
        if -(2**31) <= value < 2**31:
            self.out.write(b"J" + struct.pack("<i", value))
        else:
            data = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
            if len(data) < 256:
                self.out.write(b"\x8a" + bytes([len(data)]) + data)  # LONG1
            else:
                self.out.write(b"\x8b" + struct.pack("<I", len(data)) + data)  # LONG4, as pickle writes it

    def _tensor(self, array: np.ndarray[Any, Any], storage_type: str | None = None) -> None:
        array = np.asarray(array)
        if not array.flags.c_contiguous:  # (np.ascontiguousarray would turn a 0-d array into 1-d)
            array = array.copy(order="C")
        if array.dtype.byteorder == ">":
            array = array.astype(array.dtype.newbyteorder("<"))
        storage_type = storage_type or _STORAGE_TYPES.get(np.dtype(array.dtype.str.replace(">", "<")))
        if storage_type is None:
            raise TypeError(f"no torch storage type for numpy dtype {array.dtype}")
        key = str(len(self.storages))
        self.storages.append(array.tobytes())
        self._global("torch._utils", "_rebuild_tensor_v2")
        self.out.write(b"(")  # MARK: the rebuild arguments
        self.out.write(b"(")  # MARK: the persistent id
        self._str("storage")
        self._global("torch", storage_type)
        self._str(key)
        self._str("cpu")
        self._int(int(array.size))
        self.out.write(b"tQ")  # TUPLE, BINPERSID
        self._int(0)
        self.value(tuple(int(n) for n in array.shape))
        strides = tuple(int(s // array.itemsize) for s in array.strides) if array.size else (1,) * array.ndim
        self.value(strides)
        self.out.write(b"\x89")  # requires_grad False
        self._global("collections", "OrderedDict")
        self.out.write(b")R")  # EMPTY_TUPLE, REDUCE: backward hooks
        self.out.write(b"tR")  # TUPLE, REDUCE

    def _torch_tensor(self, tensor: Any) -> None:
        """A torch tensor handed in by training code: its values, on the CPU, as a tensor record."""
        tensor = tensor.detach().cpu().contiguous()
        if str(tensor.dtype) == "torch.bfloat16":
            self._tensor(tensor.view(dtype=_int16_dtype(tensor)).numpy(), "BFloat16Storage")
        else:
            self._tensor(tensor.numpy())

    def value(self, obj: Any) -> None:
        if obj is None:
            self.out.write(b"N")
        elif obj is True:
            self.out.write(b"\x88")
        elif obj is False:
            self.out.write(b"\x89")
        elif isinstance(obj, int) and not isinstance(obj, bool):
            self._int(obj)
        elif isinstance(obj, float):
            self.out.write(b"G" + struct.pack(">d", obj))
        elif isinstance(obj, str):
            self._str(obj)
        elif isinstance(obj, np.ndarray):
            self._tensor(obj)
        elif isinstance(obj, np.generic):
            self.value(obj.item())
        elif type(obj).__module__.startswith("torch") and hasattr(obj, "detach"):
            self._torch_tensor(obj)
        elif isinstance(obj, Mapping) and type(obj) is dict:
            self.out.write(b"}")
            if obj:
                self.out.write(b"(")
                for key, item in obj.items():
                    self.value(key)
                    self.value(item)
                self.out.write(b"u")
        elif isinstance(obj, list):
            self.out.write(b"]")
            if obj:
                self.out.write(b"(")
                for item in obj:
                    self.value(item)
                self.out.write(b"e")
        elif isinstance(obj, tuple):
            self.out.write(b"(")
            for item in obj:
                self.value(item)
            self.out.write(b"t")
        else:
            inner = obj.value if isinstance(obj, KeepAsIs) else obj
            buffer = io.BytesIO()
            pickler = pickle.Pickler(buffer, protocol=2)
            pickler.memo = dict(_FRAGMENT_MEMO_BASE)  # its memo slots start after our globals'
            pickler.dump(inner)
            # Drop PROTO and STOP; fragments only ever refer to their own slots.
            self.out.write(buffer.getvalue()[2:-1])


def _int16_dtype(tensor: Any) -> Any:
    """torch.int16, reached through the tensor's own module (this module never imports torch)."""
    return sys.modules[type(tensor).__module__.split(".")[0]].int16


def dumps_pt(obj: Any, name: str = "archive") -> bytes:
    """The bytes of a ``torch.save`` archive holding ``obj``."""
    writer = _PickleWriter()
    writer.out.write(b"\x80\x02")
    writer.value(obj)
    writer.out.write(b".")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        _add(archive, f"{name}/data.pkl", writer.out.getvalue())
        _add(archive, f"{name}/.format_version", b"1")
        _add(archive, f"{name}/.storage_alignment", str(_ALIGNMENT).encode())
        _add(archive, f"{name}/byteorder", b"little")
        for key, data in enumerate(writer.storages):
            _add(archive, f"{name}/data/{key}", data, align=True)
        _add(archive, f"{name}/version", b"3\n")
    return buffer.getvalue()


def _add(archive: zipfile.ZipFile, entry: str, data: bytes, align: bool = False) -> None:
    info = zipfile.ZipInfo(entry, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    if align:
        # Pad the local header's extra field so the record starts on a 64-byte boundary, as torch does.
        assert archive.fp is not None
        offset = archive.fp.tell() + 30 + len(entry.encode())
        padding = (-(offset + 4)) % _ALIGNMENT
        info.extra = struct.pack("<HH", 0x4650, padding) + b"Z" * padding
    archive.writestr(info, data)


def save_pt(obj: Any, handle: IO[bytes]) -> None:
    """Write ``obj`` as a torch archive to an open binary file."""
    handle.write(dumps_pt(obj))
