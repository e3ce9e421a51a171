"""The zip container of a ``torch.save`` file: its records, located and checked, never unpickled.

Contract: :class:`_Archive` parses the central directory of the zip that
``torch.save`` writes (every record STORED, aligned, no encryption) and hands
out its records: small ones whole (:meth:`_Archive.read`, CRC-32 checked), the
pickle as a buffered stream (:meth:`_Archive.stream`) that never returns more
than the record holds, shows every byte to an :class:`~miles_tui.core.dump.pt.pt_guard.OpcodeGuard`
before the unpickler gets it, and checks the CRC-32 of the whole record when
:meth:`_RecordStream.finish` is called; storage records by key
(:class:`_StorageRecords`), read into memory the caller owns.

It never maps the file into memory: everything is read with ``pread`` into
buffers of this process, so a file truncated while (or after) it is read gives
a short read and a clear error, never SIGBUS. It never inflates anything: a
compressed or encrypted record, or a layout ``torch.save`` does not write, is
refused with a :class:`CorruptFileError` naming the file ("not a torch.save
archive (compressed entry ...)"). Truncation and damage raise
:class:`zipfile.BadZipFile`, which :mod:`miles_tui.core.dump.pt.pt_archive` turns into an error
naming the file. Nothing here interprets the pickle.
"""

from __future__ import annotations

import io
import os
import struct
import zipfile
import zlib
from pathlib import Path
from typing import NamedTuple

from miles_tui.core.base.errors import CorruptFileError
from miles_tui.core.dump.pt.pt_guard import OpcodeGuard

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
_SMALL_RECORD = 1 << 16
"""Largest record read whole (byteorder, version)."""


class _Source:
    """The bytes of an archive: an open file read with ``pread``, or bytes already in memory."""

    def __init__(self, size: int, fd: int | None = None, data: bytes | None = None) -> None:
        self.size = size
        self._fd = fd
        self._data = data

    @staticmethod
    def of_file(fd: int, size: int) -> _Source:
        return _Source(size, fd=fd)

    @staticmethod
    def of_bytes(data: bytes) -> _Source:
        return _Source(len(data), data=data)

    def pread(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``offset`` (fewer at the end of the file)."""
        if offset < 0 or length <= 0:
            return b""
        if self._data is not None:
            return self._data[offset : offset + length]
        assert self._fd is not None
        return os.pread(self._fd, length, offset)

    def readinto(self, offset: int, target: memoryview) -> int:
        """Fill ``target`` from ``offset``; the number of bytes read (short at the end of the file)."""
        if self._data is not None:
            chunk = self._data[offset : offset + len(target)]
            target[: len(chunk)] = chunk
            return len(chunk)
        assert self._fd is not None
        got = 0
        while got < len(target):
            with target[got:] as rest:
                n = os.preadv(self._fd, [rest], offset + got)
            if n <= 0:
                break
            got += n
        return got


class _Entry(NamedTuple):
    """A STORED record of the archive, as its central directory describes it (thousands per file)."""

    name: str
    header_offset: int
    size: int
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


def _directory_bounds(source: _Source) -> tuple[int, int, int]:
    """Where the central directory starts and ends, and how many bytes precede the archive (as zipfile)."""
    tail_len = min(source.size, _EOCD.size + _MAX_COMMENT + _ZIP64_LOCATOR.size + _ZIP64_EOCD.size)
    tail_start = source.size - tail_len
    tail = source.pread(tail_start, tail_len)
    eocd = tail.rfind(b"PK\x05\x06", max(0, len(tail) - _EOCD.size - _MAX_COMMENT))
    if eocd < 0 or eocd + _EOCD.size > len(tail):
        raise zipfile.BadZipFile("end of central directory not found")
    _sig, _disk, _cd_disk, _here, _count, cd_size, cd_offset, _comment = _EOCD.unpack_from(tail, eocd)
    cd_end = tail_start + eocd
    # torch always writes the zip64 records; like zipfile, expect the zip64 end record
    # right before its locator (no extensible data) and ignore both when it is not there.
    locator = eocd - _ZIP64_LOCATOR.size
    record = locator - _ZIP64_EOCD.size
    if record >= 0 and tail[locator : locator + 4] == b"PK\x06\x07" and tail[record : record + 4] == b"PK\x06\x06":
        *_, _count, cd_size, cd_offset = _ZIP64_EOCD.unpack_from(tail, record)
        cd_end = tail_start + record
    concat = cd_end - cd_size - cd_offset  # data before the archive shifts every offset
    if concat < 0:
        raise zipfile.BadZipFile("the central directory is not where the end record says")
    return cd_offset + concat, cd_end, concat


def _central_directory(source: _Source, path: Path) -> dict[str, _Entry]:
    """Every record of the archive by name; compressed or encrypted records refuse the file."""
    cd_offset, cd_end, concat = _directory_bounds(source)
    directory = source.pread(cd_offset, cd_end - cd_offset)
    if len(directory) != cd_end - cd_offset:
        raise zipfile.BadZipFile("truncated central directory")
    entries: dict[str, _Entry] = {}
    pos, end = 0, len(directory)
    while pos < end:  # by size, not by the record count, as zipfile reads it
        if pos + _CENTRAL.size > end:
            raise zipfile.BadZipFile("truncated central directory")
        fields = _CENTRAL.unpack_from(directory, pos)
        if fields[0] != b"PK\x01\x02":
            raise zipfile.BadZipFile("bad central directory record")
        flags, compress_type = fields[5], fields[6]
        compress_size, file_size = fields[10], fields[11]
        name_len, extra_len, comment_len = fields[12], fields[13], fields[14]
        header_offset = fields[18]
        name_end = pos + _CENTRAL.size + name_len
        name = directory[pos + _CENTRAL.size : name_end].decode("utf-8" if flags & 0x800 else "cp437")
        if 0xFFFFFFFF in (compress_size, file_size, header_offset):
            extra = directory[name_end : name_end + extra_len]
            file_size, compress_size, header_offset = _zip64_extra(extra, file_size, compress_size, header_offset)
        if compress_type != zipfile.ZIP_STORED or flags & 0x1:
            what = "encrypted" if flags & 0x1 else "compressed"
            raise CorruptFileError(
                f"not a torch.save archive ({what} entry {name!r}; torch.save never writes one). "
                "Nothing was inflated; do not trust this file",
                path,
            )
        if compress_size != file_size:
            raise zipfile.BadZipFile(f"record {name} has two different sizes")
        entries[name] = _Entry(name, header_offset + concat, file_size, fields[9])
        pos = name_end + extra_len + comment_len
    return entries


class _Archive:
    """The STORED records of one torch zip archive, read with ``pread`` (never mapped, never inflated)."""

    def __init__(self, source: _Source, path: Path) -> None:
        self.source = source
        self.path = path
        self.entries = _central_directory(source, path)

    def data_offset(self, entry: _Entry) -> int:
        """Where a record's bytes start (after its local header), checked against the file size."""
        header = self.source.pread(entry.header_offset, _LOCAL.size)
        if len(header) < _LOCAL.size:
            raise zipfile.BadZipFile(f"bad local header for {entry.name}")
        signature, name_len, extra_len = _LOCAL_LENGTHS.unpack(header)
        if signature != b"PK\x03\x04":
            raise zipfile.BadZipFile(f"bad local header for {entry.name}")
        start: int = entry.header_offset + _LOCAL.size + int(name_len) + int(extra_len)
        if start + entry.size > self.source.size:
            raise zipfile.BadZipFile(f"record {entry.name} runs past the end of the file")
        return start

    def read(self, entry: _Entry) -> bytes:
        """A small record whole (byteorder, version), checked against its CRC-32 as zipfile does."""
        if entry.size > _SMALL_RECORD:
            raise zipfile.BadZipFile(f"record {entry.name} is {entry.size:,} bytes, more than such a record holds")
        start = self.data_offset(entry)
        data = self.source.pread(start, entry.size)
        if len(data) != entry.size or zlib.crc32(data) != entry.crc:
            raise zipfile.BadZipFile(f"bad CRC-32 for record {entry.name}")
        return data

    def stream(self, entry: _Entry, guard: OpcodeGuard) -> _RecordStream:
        """A buffered stream over a record (the pickle) whose every byte ``guard`` sees first.

        Read through ``pread`` in chunks, so the pickle's pages never count as this
        process's memory; buffered, so the C unpickler prefetches instead of calling
        back into Python for every opcode. Its CRC-32 is checked by
        :meth:`_RecordStream.finish`, once the unpickler is done.
        """
        window = _RecordWindow(self.source, self.data_offset(entry), entry.size, guard)
        return _RecordStream(window, entry.size, entry.name, entry.crc)


class _RecordWindow(io.RawIOBase):
    """``length`` bytes of the source from ``start``, as a raw stream, shown to a guard and CRC'd as read."""

    def __init__(self, source: _Source, start: int, length: int, guard: OpcodeGuard) -> None:
        self._source = source
        self._pos = start
        self._end = start + length
        self._guard = guard
        self.crc = 0

    def readable(self) -> bool:
        return True

    def readinto(self, target: memoryview) -> int:  # type: ignore[override]
        want = min(len(target), self._end - self._pos)
        if want <= 0:
            return 0
        # The target may be the unpickler's own bytes being filled: take a copy of what the
        # guard must see and release every view before the guard may raise; a short file is
        # signalled by reading less, and the unpickler reports the pickle as truncated.
        with memoryview(target) as view, view[:want] as window:
            got = self._source.readinto(self._pos, window)
            with window[:got] as filled:
                self.crc = zlib.crc32(filled, self.crc)
                skipped = self._guard.skip(got)
                with filled[skipped:] as rest:
                    unseen = bytes(rest)
        self._pos += got
        self._guard.feed(unseen)
        return got

    def drain(self) -> None:
        """Read (and CRC) the rest of the record, past where the unpickler stopped."""
        chunk = bytearray(min(self._end - self._pos, _STREAM_BUFFER))
        with memoryview(chunk) as view:
            while self._pos < self._end:
                with view[: min(len(view), self._end - self._pos)] as window:
                    got = self._source.readinto(self._pos, window)
                    if not got:
                        break
                    with window[:got] as filled:
                        self.crc = zlib.crc32(filled, self.crc)
                self._pos += got


class _RecordStream(io.BufferedReader):
    """A buffered stream over one record that never asks for more than the record holds.

    The unpickler trusts the lengths in the pickle; clamping a read to the record
    keeps a corrupt length from allocating more than the file holds before it fails.
    """

    def __init__(self, raw: _RecordWindow, length: int, name: str = "", crc: int | None = None) -> None:
        super().__init__(raw, _STREAM_BUFFER)
        self._window = raw
        self._length = length
        self._name = name
        self._crc = crc

    def read(self, size: int | None = -1) -> bytes:
        return super().read(size if size is None or size < 0 else min(size, self._length))

    def finish(self) -> None:
        """Check the whole record against its CRC-32 (after the unpickler stopped reading)."""
        if self._crc is None:
            return
        self._window.drain()
        if self._window.crc != self._crc:
            raise zipfile.BadZipFile(f"bad CRC-32 for record {self._name}")


class _StorageSpan(NamedTuple):
    """Where a storage record's bytes are in the archive."""

    start: int
    size: int


class _StorageRecords:
    """Storage records by key, located only when the pickle asks for them, read into the caller's memory."""

    def __init__(self, archive: _Archive, prefix: str) -> None:
        self._archive = archive
        self._prefix = prefix
        self._cache: dict[str, _StorageSpan] = {}

    def get(self, key: str) -> _StorageSpan | None:
        found = self._cache.get(key)
        if found is None:
            entry = self._archive.entries.get(self._prefix + key)
            if entry is None:
                return None
            found = self._cache[key] = _StorageSpan(self._archive.data_offset(entry), entry.size)
        return found

    def read_into(self, span: _StorageSpan, offset: int, target: memoryview) -> None:
        """Fill ``target`` with the record's bytes from ``offset``; a short read (the file shrank) raises."""
        if offset < 0 or offset + len(target) > span.size:
            raise zipfile.BadZipFile("a read outside its storage record")
        if self._archive.source.readinto(span.start + offset, target) != len(target):
            raise zipfile.BadZipFile("a storage record ends early: the file shrank while it was read")
