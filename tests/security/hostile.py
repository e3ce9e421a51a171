"""Hostile inputs built the way an attacker would, and a child process to load them in.

Archives are written with ``torch.save`` (objects whose ``__reduce__`` asks for
what the attacker wants) when torch is installed, and otherwise with the same
pickle inside a zip laid out like ``torch.save``'s; inputs that no Python object
pickles to (a huge memo index) are raw opcodes. Every load runs in a child
process (:data:`CHILD`) under an address-space limit and a timeout, so a crash,
a hang or a memory blow-up fails the test instead of taking pytest down.
"""

from __future__ import annotations

import json
import os
import pickle
import struct
import subprocess
import sys
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("load_child.py")

try:  # torch is optional: without it the archives are written by hand
    import torch
except ImportError:  # pragma: no cover - exercised on machines without torch
    torch = None


class Reduce:
    """An object that pickles as ``call(*args)`` (then BUILD ``state`` when given)."""

    def __init__(self, call: Any, args: tuple[Any, ...], state: Any = None) -> None:
        self.call, self.args, self.state = call, args, state

    def __reduce__(self) -> tuple[Any, ...]:
        if self.state is None:
            return (self.call, self.args)
        return (self.call, self.args, self.state)


def write_archive(
    path: Path, data_pkl: bytes, storages: dict[str, bytes] | None = None, *, compress: bool = False
) -> Path:
    """A zip laid out like torch.save's: ``archive/data.pkl``, byteorder, version, ``archive/data/KEY``."""
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(zipfile.ZipInfo("archive/data.pkl"), data_pkl, compress_type=method)
        archive.writestr(zipfile.ZipInfo("archive/byteorder"), b"little")
        for key, raw in (storages or {}).items():
            archive.writestr(zipfile.ZipInfo(f"archive/data/{key}"), raw)
        archive.writestr(zipfile.ZipInfo("archive/version"), b"3\n")
    return path


def save(path: Path, obj: Any) -> Path:
    """``torch.save(obj)`` when torch is here, else the protocol-2 pickle torch would write, in its zip."""
    if torch is not None:
        torch.save(obj, path)
        return path
    return write_archive(path, pickle.dumps(obj, protocol=2))


def proto2(body: bytes) -> bytes:
    """Raw opcodes framed as a protocol-2 pickle: PROTO 2, ``body``, STOP."""
    return b"\x80\x02" + body + b"."


def long_binput(index: int) -> bytes:
    """LONG_BINPUT with a 4-byte memo index."""
    return b"r" + struct.pack("<I", index)


def _unicode(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def _int(value: int) -> bytes:
    return b"J" + struct.pack("<i", value) if -(2**31) <= value < 2**31 else b"\x8a\x08" + struct.pack("<q", value)


def _ints(values: tuple[int, ...]) -> bytes:
    return b"(" + b"".join(_int(v) for v in values) + b"t"


def tensor_opcodes(size: tuple[int, ...], stride: tuple[int, ...], numel: int, key: str = "0") -> bytes:
    """The opcodes torch.save writes for a LongStorage tensor (``_rebuild_tensor_v2``), without PROTO/STOP."""
    persistent = b"(" + _unicode("storage") + b"ctorch\nLongStorage\n" + _unicode(key) + _unicode("cpu")
    persistent += _int(numel) + b"tQ"
    args = b"(" + persistent + _int(0) + _ints(size) + _ints(stride) + b"\x89ccollections\nOrderedDict\n)Rt"
    return b"ctorch._utils\n_rebuild_tensor_v2\n" + args + b"R"


def deflate_bomb(path: Path, inflated: int) -> Path:
    """An archive whose data.pkl is DEFLATE-compressed and inflates to ``inflated`` bytes of zeros.

    One fully flushed block of 16 MiB of zeros is repeated (a full flush makes each block
    independent), so a 2 GiB bomb costs a single 16 MiB compression. The CRC is left 0:
    a reader that checks it has already inflated everything.
    """
    chunk = 1 << 24
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = compressor.compress(bytes(chunk)) + compressor.flush(zlib.Z_FULL_FLUSH)
    body = block * (inflated // chunk) + compressor.flush()
    name = b"archive/data.pkl"
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0, 0, len(body), inflated, len(name), 0)
    central = struct.pack(
        "<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 8, 0, 0, 0, len(body), inflated, len(name), 0, 0, 0, 0, 0, 0
    )
    cd_offset = len(local) + len(name) + len(body)
    directory = central + name
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(directory), cd_offset, 0)
    path.write_bytes(local + name + body + directory + end)
    return path


@dataclass(frozen=True)
class Loaded:
    """What a child process made of one input."""

    returncode: int
    """The child's exit code (negative: killed by that signal)."""
    outcome: dict[str, Any]
    """The child's report: ``{"outcome": "value" | "error" | "crash", ...}`` ({} when it died)."""
    stderr: str

    @property
    def refused(self) -> bool:
        """Whether the load ended in the project's own error naming the input."""
        return self.outcome.get("outcome") == "error" and bool(self.outcome.get("names_file"))

    def describe(self) -> str:
        return f"rc={self.returncode} outcome={self.outcome} stderr={self.stderr[-2000:]}"


def load_in_child(path: Path, *, mem_mb: int = 384, timeout: float = 60.0, kind: str = "pt") -> Loaded:
    """Load ``path`` (``kind`` "pt": load_pt, "pickle": loads_pickle of its bytes) in a fresh child.

    The child limits its own address space to what it uses after importing
    numpy plus ``mem_mb`` MiB, loads, then touches every value (``str()`` of
    every leaf, a sum of every array) the way a report would.
    """
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    argv = [sys.executable, str(CHILD), kind, str(path), str(mem_mb)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env, check=False)
    except subprocess.TimeoutExpired as err:
        stderr = err.stderr.decode(errors="replace") if isinstance(err.stderr, bytes) else str(err.stderr)
        return Loaded(-999, {"outcome": "timeout"}, stderr)
    lines = proc.stdout.strip().splitlines()
    outcome = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    return Loaded(proc.returncode, outcome, proc.stderr)
