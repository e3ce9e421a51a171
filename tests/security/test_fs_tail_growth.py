"""Linear tails with a line cap (issue 13.2): growing an unterminated tail costs the new bytes only,
and a line over the cap is skipped without being held, reported with file and offset."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.base.tail import BLOCK_SIZE, MAX_LINE_BYTES, TailFile


def _identity(value: Any) -> Any:
    return value


def _rchar() -> int:
    """Bytes this process has read with read(2)/pread(2) so far (Linux)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def _poll(tail: TailFile[Any], out: list[Any]) -> Any:
    return tail.poll(out.extend, out.clear)


def test_the_cap_is_64_mib_unless_told(tmp_path: Path) -> None:
    assert MAX_LINE_BYTES == 64 << 20 and TailFile(tmp_path / "s", _identity).max_line == MAX_LINE_BYTES
    assert TailFile(tmp_path / "s", _identity, max_line=1000).max_line == 1000


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux /proc/self/io")
def test_appending_to_an_unterminated_tail_reads_only_the_new_bytes(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a": 1}\n{"blob": "' + b"x" * (32 << 20))  # 32 MiB without a newline yet
    tail: TailFile[Any] = TailFile(path, _identity)
    out: list[Any] = []
    _poll(tail, out)
    assert out == [{"a": 1}] and tail.pending_bytes == (32 << 20) + 10
    for _ in range(5):
        with open(path, "ab") as handle:
            handle.write(b"y" * 1024)
        before = _rchar()
        _poll(tail, out)
        assert _rchar() - before < 64 << 10, "a poll re-read the whole partial line"
    with open(path, "ab") as handle:
        handle.write(b'"}\n{"a": 2}\n')
    _poll(tail, out)  # the line completes: read whole, once
    assert len(out) == 3 and len(out[1]["blob"]) == (32 << 20) + 5 * 1024 and out[2] == {"a": 2}


def test_an_unterminated_tail_far_over_the_cap_is_never_held(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with open(path, "wb") as handle:
        handle.write(b'{"a": 1}\n')
        handle.truncate(9 + (96 << 20))  # 96 MiB of one unterminated line (a hole: no disk used)
    tail: TailFile[Any] = TailFile(path, _identity, max_line=8 << 20)
    out: list[Any] = []
    tracemalloc.start()
    try:
        read = _poll(tail, out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out == [{"a": 1}] and read.malformed == ()  # not complete yet: nothing to report
    assert peak < (8 << 20) + 4 * BLOCK_SIZE, f"peak {peak >> 20} MiB for a 96 MiB tail"
    with open(path, "ab") as handle:
        handle.write(b'\n{"a": 2}\n')
    read = _poll(tail, out)
    assert out == [{"a": 1}, {"a": 2}]
    (bad,) = read.malformed
    assert (bad.path, bad.offset) == (path, 9) and bad.excerpt == b"\0" * 160
    assert bad.reason == f"a line of {96 << 20} bytes, longer than the {8 << 20}-byte cap"
    assert str(bad).startswith(f"{path} (byte 9): a line of")


def test_a_line_over_the_cap_in_one_read_is_skipped_and_the_next_read(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    long = json.dumps({"blob": "z" * 5000}).encode()
    path.write_bytes(b'{"a": 1}\n' + long + b'\n{"a": 2}\n')
    tail: TailFile[Any] = TailFile(path, _identity, max_line=1000)
    out: list[Any] = []
    read = _poll(tail, out)
    assert out == [{"a": 1}, {"a": 2}] and [m.offset for m in read.malformed] == [9]
    assert tail.malformed_count == 1 and tail.offset == path.stat().st_size


@settings(max_examples=80, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=120), min_size=1, max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=2_000), max_size=10),
    block=st.integers(min_value=1, max_value=64),
    cap=st.integers(min_value=12, max_value=80),
)
def test_any_growth_keeps_lines_under_the_cap_and_reports_the_others(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], cuts: list[int], block: int, cap: int
) -> None:
    lines = [json.dumps({"p": "q" * n}).encode() for n in sizes]
    data = b"".join(line + b"\n" for line in lines)
    offsets = [sum(len(x) + 1 for x in lines[:i]) for i in range(len(lines))]
    path = tmp_path_factory.getbasetemp() / "grow-capped.jsonl"
    path.unlink(missing_ok=True)
    path.write_bytes(b"")
    tail: TailFile[Any] = TailFile(path, _identity, block_size=block, max_line=cap)
    out: list[Any] = []
    bad: list[int] = []
    for cut in [*sorted(c % (len(data) + 1) for c in cuts), len(data)]:
        with open(path, "r+b") as handle:  # grows in place, as a writer appends
            handle.seek(0, 2)
            handle.write(data[handle.tell() : cut] if cut > handle.tell() else b"")
        read = _poll(tail, out)
        assert read.reset is None
        bad += [m.offset for m in read.malformed]
    assert out == [{"p": "q" * n} for n, line in zip(sizes, lines, strict=True) if len(line) <= cap]
    assert bad == [o for o, line in zip(offsets, lines, strict=True) if len(line) > cap]
    assert tail.offset == len(data) and tail.pending_bytes == 0
