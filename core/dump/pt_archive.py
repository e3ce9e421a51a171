"""Read ``torch.save`` files safely, as numpy, without importing torch.

A dump lives on a shared filesystem and a pickle can run code when loaded, so
this module is the only place a ``.pt`` is unpickled, and it never imports a
class or calls a function named by the file except an allow-list of
constructors that build plain data:

- tensors (``torch._utils._rebuild_tensor_v2``/``v3``, parameters) become numpy
  arrays viewing the archive's storage records; CUDA storage locations are
  irrelevant because nothing is moved to a device;
- numpy arrays, dtypes and scalars; builtin containers and scalars;
  ``collections.OrderedDict``; ``datetime`` values;
- any other class (the training framework's dataclasses such as ``RewardSpec``
  or ``AdapterRef``) becomes an :class:`InertRecord` holding its name, its
  constructor arguments and its state, and nothing of it is imported;
- a global from the standard library, torch or numpy outside the allow-list
  (``os.system``, ``builtins.eval``, ``subprocess.Popen``, ``numpy.load`` ...)
  is refused with :class:`UnsafePickleError` before anything runs.

Storage records of ``STORED`` zip entries are memory-mapped and located only
when the pickle asks for them, so the pages of a tensor that nobody reads are
never read from disk (nor counted as this process's memory). The pickle itself
is checked against its CRC-32 before a single opcode runs (as zipfile would),
then read through the file in buffered chunks, with the cyclic GC paused. The
zip directory is parsed here (zipfile only for an unusual archive: compressed
records, data before the archive). Only the zip format that ``torch.save`` has
written since torch 1.6 is supported.
"""

from __future__ import annotations

import _compat_pickle
import builtins
import codecs
import collections
import datetime
import gc
import io
import mmap
import os
import pickle
import struct
import sys
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar, NamedTuple

import numpy as np

from miles_tui.core.errors import CorruptFileError, DumpLoadError, UnreadableFileError, UnsafePickleError
from miles_tui.core.run_files import open_regular

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
    ("miles_tui.core.dump.pt_archive", "_rebuild_inert"): _rebuild_inert,
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


# --- the zip container -----------------------------------------------------------------------------
#
# torch.save writes a plain zip: every record STORED, aligned, no encryption. The
# central directory of a train shard has a record per tensor (thousands), which
# zipfile parses in Python at ~20 us each; this reads just what is needed and
# falls back to zipfile for anything unusual (compressed records, a prefixed archive).

_EOCD = struct.Struct("<4s4H2LH")
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")
_LOCAL = struct.Struct("<4s2B4HL2L2H")
_LOCAL_LENGTHS = struct.Struct("<4s22xHH")
"""A local header's signature, name length and extra length."""
_MAX_COMMENT = 0xFFFF
_STREAM_BUFFER = 1 << 20
"""Bytes the unpickler's stream reads at a time."""


class _Entry(NamedTuple):
    """A record of the archive, as its central directory describes it (a tuple: thousands per file)."""

    name: str
    compress_type: int
    header_offset: int
    compress_size: int
    file_size: int
    crc: int


def _zip64_extra(extra: bytes, file_size: int, compress_size: int, header_offset: int) -> tuple[int, int, int]:
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, pos)
        if tag == 1:
            values = extra[pos + 4 : pos + 4 + length]
            fields = [file_size, compress_size, header_offset]
            cursor = 0
            for i, value in enumerate(fields):
                if value == 0xFFFFFFFF:
                    if cursor + 8 > len(values):
                        raise zipfile.BadZipFile("truncated zip64 extra field")
                    (fields[i],) = struct.unpack_from("<Q", values, cursor)
                    cursor += 8
            return fields[0], fields[1], fields[2]
        pos += 4 + length
    return file_size, compress_size, header_offset


def _central_directory(buffer: Any) -> dict[str, _Entry] | None:
    """Every record of the zip in ``buffer`` by name; None when only zipfile can read it."""
    size = len(buffer)
    eocd = buffer.rfind(b"PK\x05\x06", max(0, size - _EOCD.size - _MAX_COMMENT))
    if eocd < 0 or eocd + _EOCD.size > size:
        raise zipfile.BadZipFile("end of central directory not found")
    _sig, _disk, _cd_disk, _here, _count, cd_size, cd_offset, _comment = _EOCD.unpack_from(buffer, eocd)
    cd_end = eocd
    # torch always writes the zip64 records; like zipfile, expect the zip64 end record
    # right before its locator (no extensible data) and ignore both when it is not there.
    locator = eocd - _ZIP64_LOCATOR.size
    record = locator - _ZIP64_EOCD.size
    if (
        record >= 0
        and bytes(buffer[locator : locator + 4]) == b"PK\x06\x07"
        and bytes(buffer[record : record + 4]) == b"PK\x06\x06"
    ):
        *_, _count, cd_size, cd_offset = _ZIP64_EOCD.unpack_from(buffer, record)
        cd_end = record
    if cd_offset + cd_size != cd_end:
        return None  # data before the archive (or a directory zipfile understands better)
    entries: dict[str, _Entry] = {}
    pos = cd_offset
    while pos < cd_end:  # by size, not by the record count, as zipfile reads it
        if pos + _CENTRAL.size > cd_end:
            raise zipfile.BadZipFile("truncated central directory")
        fields = _CENTRAL.unpack_from(buffer, pos)
        if fields[0] != b"PK\x01\x02":
            raise zipfile.BadZipFile("bad central directory record")
        flags, compress_type = fields[5], fields[6]
        compress_size, file_size = fields[10], fields[11]
        name_len, extra_len, comment_len = fields[12], fields[13], fields[14]
        header_offset = fields[18]
        name_end = pos + _CENTRAL.size + name_len
        raw_name = bytes(buffer[pos + _CENTRAL.size : name_end])
        if 0xFFFFFFFF in (compress_size, file_size, header_offset):
            extra = bytes(buffer[name_end : name_end + extra_len])
            file_size, compress_size, header_offset = _zip64_extra(extra, file_size, compress_size, header_offset)
        name = raw_name.decode("utf-8" if flags & 0x800 else "cp437")
        entries[name] = _Entry(name, compress_type, header_offset, compress_size, file_size, fields[9])
        pos = name_end + extra_len + comment_len
    return entries


def _data_offset(buffer: Any, entry: _Entry, handle: IO[bytes] | None) -> int:
    """Where a record's bytes start (after its local header), checked against the file size.

    With the file at hand the header is read with ``pread``, not through the
    mapping: touching a mapped page makes the kernel map its neighbours too, and
    a train shard has a header every few pages, so the whole file would count
    as this process's resident memory although no value was read.
    """
    if handle is not None:
        header = os.pread(handle.fileno(), _LOCAL.size, entry.header_offset)
    else:
        header = bytes(buffer[entry.header_offset : entry.header_offset + _LOCAL.size])
    if len(header) < _LOCAL.size:
        raise zipfile.BadZipFile(f"bad local header for {entry.name}")
    signature, name_len, extra_len = _LOCAL_LENGTHS.unpack(header)
    if signature != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local header for {entry.name}")
    start: int = entry.header_offset + _LOCAL.size + int(name_len) + int(extra_len)
    if start + entry.compress_size > len(buffer):
        raise zipfile.BadZipFile(f"record {entry.name} runs past the end of the file")
    return start


class _Archive:
    """The records of one torch zip archive: STORED ones read in place, others through zipfile."""

    def __init__(self, buffer: Any, handle: IO[bytes] | None) -> None:
        self._buffer = buffer
        self._handle = handle
        self._whole: np.ndarray[Any, Any] | None = None
        entries = _central_directory(buffer)
        self._zip: zipfile.ZipFile | None = None
        if entries is None:
            self._zip = zipfile.ZipFile(io.BytesIO(buffer) if isinstance(buffer, bytes) else _MmapReader(buffer))
            entries = {
                i.filename: _Entry(i.filename, i.compress_type, i.header_offset, i.compress_size, i.file_size, i.CRC)
                for i in self._zip.infolist()
            }
        self.entries = entries

    def _zipfile(self) -> zipfile.ZipFile:
        if self._zip is None:
            self._zip = zipfile.ZipFile(
                io.BytesIO(self._buffer) if isinstance(self._buffer, bytes) else _MmapReader(self._buffer)
            )
        return self._zip

    def read(self, entry: _Entry) -> bytes:
        """A whole record (small records: byteorder, version), checked against its CRC-32 as zipfile does."""
        if entry.compress_type == zipfile.ZIP_STORED:
            start = _data_offset(self._buffer, entry, self._handle)
            data = bytes(self._buffer[start : start + entry.file_size])
            if zlib.crc32(data) != entry.crc:
                raise zipfile.BadZipFile(f"bad CRC-32 for record {entry.name}")
            return data
        return self._zipfile().read(entry.name)

    def stream(self, entry: _Entry) -> _RecordStream:
        """A buffered stream over a record (the pickle), its CRC-32 checked before anything reads it.

        Read through the file rather than the mapping, so the pickle's pages never
        count as this process's memory; buffered, so the C unpickler prefetches
        instead of calling back into Python for every opcode. The CRC pass costs a
        second read from the page cache, and keeps a corrupt pickle (whose lengths
        the unpickler would trust) from being unpickled at all, as zipfile did.
        """
        if entry.compress_type == zipfile.ZIP_STORED and self._handle is not None:
            start = _data_offset(self._buffer, entry, self._handle)
            if _file_crc(self._handle, start, entry.file_size) != entry.crc:
                raise zipfile.BadZipFile(f"bad CRC-32 for record {entry.name}")
            return _RecordStream(_FileWindow(self._handle, start, entry.file_size), entry.file_size)
        data = self.read(entry)
        return _RecordStream(io.BytesIO(data), len(data))

    def storage(self, entry: _Entry) -> np.ndarray[Any, Any]:
        """A storage record as bytes: a view of the mapping for STORED records (nothing is read)."""
        if entry.compress_type == zipfile.ZIP_STORED:
            start = _data_offset(self._buffer, entry, self._handle)
            if self._whole is None:
                self._whole = np.frombuffer(self._buffer, dtype=np.uint8)
            return self._whole[start : start + entry.file_size]
        return np.frombuffer(self._zipfile().read(entry.name), dtype=np.uint8)


class _StorageRecords:
    """Storage records by key, located only when the pickle asks for them."""

    def __init__(self, archive: _Archive, prefix: str) -> None:
        self._archive = archive
        self._prefix = prefix
        self._cache: dict[str, np.ndarray[Any, Any]] = {}

    def get(self, key: str) -> np.ndarray[Any, Any] | None:
        found = self._cache.get(key)
        if found is None:
            entry = self._archive.entries.get(self._prefix + key)
            if entry is None:
                return None
            found = self._cache[key] = self._archive.storage(entry)
        return found


class _RecordStream(io.BufferedReader):
    """A buffered stream over one record that never asks for more than the record holds.

    The unpickler trusts the lengths in the pickle; clamping a read to the record
    keeps a corrupt length from allocating gigabytes before it fails.
    """

    def __init__(self, raw: io.RawIOBase | io.BytesIO, length: int) -> None:
        super().__init__(raw, _STREAM_BUFFER)
        self._length = length

    def read(self, size: int | None = -1) -> bytes:
        return super().read(size if size is None or size < 0 else min(size, self._length))


def _file_crc(handle: IO[bytes], start: int, length: int) -> int:
    """CRC-32 of ``length`` bytes of the file from ``start``, read in small chunks."""
    crc, pos, end = 0, start, start + length
    chunk = bytearray(min(length, 1 << 18))
    with memoryview(chunk) as view:
        while pos < end:
            handle.seek(pos)
            with view[: min(len(view), end - pos)] as window:
                got = int(handle.readinto(window) or 0)  # type: ignore[attr-defined]
                if not got:
                    break
                with window[:got] as filled:
                    crc = zlib.crc32(filled, crc)
            pos += got
    return crc


class _FileWindow(io.RawIOBase):
    """``length`` bytes of an open file from ``start``, as a raw stream."""

    def __init__(self, handle: IO[bytes], start: int, length: int) -> None:
        self._handle = handle
        self._pos = start
        self._end = start + length

    def readable(self) -> bool:
        return True

    def readinto(self, target: Any) -> int:
        want = min(len(target), self._end - self._pos)
        if want <= 0:
            return 0
        self._handle.seek(self._pos)
        # The target may be the unpickler's own bytes being filled: release the views
        # before returning, and signal a short file by reading less (never by raising
        # with them alive); the unpickler then reports the pickle as truncated.
        with memoryview(target) as view, view[:want] as window:
            got = int(self._handle.readinto(window) or 0)  # type: ignore[attr-defined]
        self._pos += got
        return got


def load_pt(path: Path | str, *, use_mmap: bool = True) -> Any:
    """Load one ``torch.save`` file as plain Python and numpy values, never running its code.

    Raises :class:`UnsafePickleError` for a pickle that reaches for code and
    :class:`CorruptFileError` for anything that is not a complete archive.
    (Whether a failure means "still writing" is the caller's call: it knows
    the file's age.) Tensors are read-only views of a memory map of the file
    (``use_mmap``), so only the pages of the values a caller reads are ever read.
    """
    path = Path(path)
    try:
        with open_regular(path) as handle:  # a FIFO, device or link loop named like a dump is refused
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                raise CorruptFileError("empty file (0 bytes)", path)
            if use_mmap:
                buffer: Any = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
                return _load_from_buffer(buffer, path, handle)
            return _load_from_buffer(handle.read(), path, None)
    except DumpLoadError:
        raise
    except UnreadableFileError as err:
        raise CorruptFileError(err.message, path) from err
    except FileNotFoundError as err:
        raise CorruptFileError("file vanished while reading it", path) from err
    except PermissionError as err:
        raise DumpLoadError("permission denied: check that this user can read the run directory", path) from err
    except (zipfile.BadZipFile, zipfile.LargeZipFile) as err:
        raise CorruptFileError(
            f"not a complete torch.save archive ({err}); the file is truncated or not a dump", path
        ) from err
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
        struct.error,
        OSError,
        RecursionError,
        MemoryError,
        NotImplementedError,  # zipfile, for a record whose compression method is garbage
        OverflowError,  # a length field of the pickle beyond any size
    ) as err:
        raise CorruptFileError(f"cannot be unpickled: {type(err).__name__}: {err}", path) from err


def _load_from_buffer(buffer: Any, path: Path, handle: IO[bytes] | None) -> Any:
    if bytes(buffer[:4]) != b"PK\x03\x04":
        raise CorruptFileError(
            "not a torch zip archive (legacy torch.save format or another file type); re-save it with torch >= 1.6",
            path,
        )
    archive = _Archive(buffer, handle)
    pickle_entry = next(
        (e for name, e in archive.entries.items() if name.endswith("/data.pkl") or name == "data.pkl"), None
    )
    if pickle_entry is None:
        raise CorruptFileError("torch archive without data.pkl", path)
    prefix = pickle_entry.name[: -len("data.pkl")]
    byteorder = archive.entries.get(prefix + "byteorder")
    if byteorder is not None and archive.read(byteorder).strip() not in (b"little", b""):
        raise CorruptFileError("big-endian torch archives are not supported", path)
    storages = _StorageRecords(archive, prefix + "data/")
    return _unpickle(_SafeUnpickler(archive.stream(pickle_entry), storages, path))


class _MmapReader(io.RawIOBase):
    """A seekable read-only file over an mmap, for zipfile's central-directory parsing."""

    def __init__(self, buffer: mmap.mmap) -> None:
        self._buffer = buffer
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: len(self._buffer)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, target: Any) -> int:
        chunk = self._buffer[self._pos : self._pos + len(target)]
        target[: len(chunk)] = chunk
        self._pos += len(chunk)
        return len(chunk)


def loads_pickle(data: bytes, path: Path | str = "<bytes>") -> Any:
    """Unpickle raw pickle bytes with the same rules (no tensors): for tests and sidecars."""
    try:
        return _unpickle(_SafeUnpickler(_RecordStream(io.BytesIO(data), len(data)), None, Path(path)))
    except DumpLoadError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError) as err:
        raise CorruptFileError(f"cannot be unpickled: {type(err).__name__}: {err}", path) from err
