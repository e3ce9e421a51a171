"""Read ``torch.save`` files safely, as numpy, without importing torch.

A dump lives on a shared filesystem and a pickle can run code when loaded, so
this module is the only place a ``.pt`` is unpickled. It is the façade of two
halves: :mod:`core.pt_zip` reads and checks the zip container, and
:mod:`core.pt_unpickle` runs the allow-list unpickler (see its docstring for
what a pickle may build). :func:`load_pt` and :func:`loads_pickle` are the only
entry points; every failure is a :class:`DumpLoadError` naming the file.

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

import io
import mmap
import os
import pickle
import struct
import zipfile
from pathlib import Path
from typing import IO, Any

from core.errors import CorruptFileError, DumpLoadError
from core.pt_unpickle import InertRecord, _SafeUnpickler, _unpickle, inert_class
from core.pt_zip import _Archive, _RecordStream, _StorageRecords

__all__ = ["InertRecord", "inert_class", "load_pt", "loads_pickle"]


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
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                raise CorruptFileError("empty file (0 bytes)", path)
            if use_mmap:
                buffer: Any = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
                return _load_from_buffer(buffer, path, handle)
            return _load_from_buffer(handle.read(), path, None)
    except DumpLoadError:
        raise
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


def loads_pickle(data: bytes, path: Path | str = "<bytes>") -> Any:
    """Unpickle raw pickle bytes with the same rules (no tensors): for tests and sidecars."""
    try:
        return _unpickle(_SafeUnpickler(_RecordStream(io.BytesIO(data), len(data)), None, Path(path)))
    except DumpLoadError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError) as err:
        raise CorruptFileError(f"cannot be unpickled: {type(err).__name__}: {err}", path) from err
