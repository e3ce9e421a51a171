"""The zip container of a ``torch.save`` file: its records, located and checked, never unpickled.

Contract: :class:`_Archive` parses the central directory of the zip that
``torch.save`` writes (every record STORED, aligned, no encryption) and hands
out each record: small ones whole (:meth:`_Archive.read`, CRC-32 checked), the
pickle as a buffered stream (:meth:`_Archive.stream`, CRC-32 checked before a
byte is returned, and never returning more than the record holds), storage
records as bytes (:meth:`_Archive.storage`). A record that runs past the end
of the file, a bad local header or a bad CRC raises :class:`zipfile.BadZipFile`;
the caller (:mod:`core.pt_archive`) turns every failure into an error naming
the file. Nothing here interprets the pickle.
"""

from __future__ import annotations

import io
import mmap
import os
import struct
import zipfile
import zlib
from typing import IO, Any, NamedTuple

import numpy as np

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
