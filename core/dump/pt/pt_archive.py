"""Read ``torch.save`` files safely, as numpy, without importing torch.

A dump lives on a shared filesystem that other people can write to, and a
pickle can run code when loaded, so this module is the only place a ``.pt`` is
unpickled. It is the façade of its parts: :mod:`miles_tui.core.dump.pt.pt_zip` reads and checks
the zip container (never memory-mapped, never inflated), :mod:`miles_tui.core.dump.pt.pt_guard`
walks the pickle's opcodes before the unpickler runs them and holds the load's
allocation budget (with :mod:`miles_tui.core.dump.pt.pt_depth`, which bounds how deep values
nest), :mod:`miles_tui.core.dump.pt.pt_unpickle` runs the allow-list unpickler, and
:mod:`miles_tui.core.dump.pt.pt_numpy` / :mod:`miles_tui.core.dump.pt.pt_builtins` build the values it allows.
:func:`load_pt` and :func:`loads_pickle` are the entry points; every failure is
a :class:`DumpLoadError` naming the file, never another exception.

What a load returns never depends on the file afterwards: tensors hold copies
of their elements (read with ``pread``), so a file truncated in place later
cannot crash the reader (SIGBUS). The pickle is streamed through the file in
buffered chunks with the cyclic GC paused and checked against its CRC-32 once
the unpickler stops; a value is returned only if it matches. Only the zip
format that ``torch.save`` has written since torch 1.6 is supported.
"""

from __future__ import annotations

import os
import pickle
import struct
import zipfile
from pathlib import Path
from typing import Any

from miles_tui.core.base.errors import CorruptFileError, DumpLoadError, UnreadableFileError
from miles_tui.core.base.run_files import open_regular
from miles_tui.core.dump.pt.pt_guard import LoadBudget, OpcodeGuard
from miles_tui.core.dump.pt.pt_numpy import LoadContext
from miles_tui.core.dump.pt.pt_unpickle import InertRecord, check_expansion, inert_class, unpickle
from miles_tui.core.dump.pt.pt_zip import _Archive, _RecordStream, _RecordWindow, _Source, _StorageRecords

__all__ = ["InertRecord", "inert_class", "load_pt", "loads_pickle"]

_FAILURES = (
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
    OverflowError,  # a length field of the pickle beyond any size
)
"""What a malformed pickle can make the unpickler raise: a corrupt file, never an internal error."""
_MAX_DETAIL = 300


def load_pt(path: Path | str, *, use_mmap: bool = True) -> Any:
    """Load one ``torch.save`` file as plain Python and numpy values, never running its code.

    Raises :class:`UnsafePickleError` for a pickle that reaches for code or for
    a numpy value outside the plain table, and :class:`CorruptFileError` for
    anything that is not a complete archive or asks for more than its allowance
    (:mod:`miles_tui.core.dump.pt.pt_guard`). (Whether a failure means "still writing" is the
    caller's call: it knows the file's age.) Records are read from the file as
    the pickle asks for them (``use_mmap``, the name kept from when they were
    mapped), or from the whole file read first (``use_mmap=False``).
    """
    path = Path(path)
    try:
        with open_regular(path) as handle:  # a FIFO, device or link loop named like a dump is refused
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                raise CorruptFileError("empty file (0 bytes)", path)
            source = _Source.of_file(handle.fileno(), size) if use_mmap else _Source.of_bytes(handle.read())
            return _load(source, path)
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
            f"not a complete torch.save archive ({_detail(err)}); the file is truncated or not a dump", path
        ) from err
    except _FAILURES as err:
        raise CorruptFileError(f"cannot be unpickled: {type(err).__name__}: {_detail(err)}", path) from err


def _detail(err: BaseException) -> str:
    text = str(err)
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 3] + "..."


def _load(source: _Source, path: Path) -> Any:
    if source.pread(0, 4) != b"PK\x03\x04":
        raise CorruptFileError(
            "not a torch zip archive (legacy torch.save format or another file type); re-save it with torch >= 1.6",
            path,
        )
    archive = _Archive(source, path)
    pickle_entry = next(
        (e for name, e in archive.entries.items() if name.endswith("/data.pkl") or name == "data.pkl"), None
    )
    if pickle_entry is None:
        raise CorruptFileError("torch archive without data.pkl", path)
    prefix = pickle_entry.name[: -len("data.pkl")]
    byteorder = archive.entries.get(prefix + "byteorder")
    if byteorder is not None and archive.read(byteorder).strip() not in (b"little", b""):
        raise CorruptFileError("big-endian torch archives are not supported", path)
    budget = LoadBudget(source.size, path)
    guard = OpcodeGuard(budget, pickle_entry.size)
    stream = archive.stream(pickle_entry, guard)
    value = unpickle(stream, LoadContext(budget, path, _StorageRecords(archive, prefix + "data/")))
    stream.finish()
    if guard.shared:
        check_expansion(value, budget)
    return value


def loads_pickle(data: bytes, path: Path | str = "<bytes>") -> Any:
    """Unpickle raw pickle bytes with the same rules and bounds (no tensors): for tests and sidecars."""
    where = Path(path)
    try:
        budget = LoadBudget(len(data), where)
        guard = OpcodeGuard(budget, len(data))
        window = _RecordWindow(_Source.of_bytes(data), 0, len(data), guard)
        value = unpickle(_RecordStream(window, len(data)), LoadContext(budget, where, None))
        if guard.shared:
            check_expansion(value, budget)
        return value
    except DumpLoadError:
        raise
    except _FAILURES as err:
        raise CorruptFileError(f"cannot be unpickled: {type(err).__name__}: {_detail(err)}", where) from err
