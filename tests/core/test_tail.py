"""The tail rule on real files: complete lines only, malformed lines reported, rewrites reset,
and one transaction per poll under concurrent pollers (threads and a writer process)."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stream_writer import append_slowly

from miles_tui.core.base.errors import StreamError
from miles_tui.core.base.tail import MalformedLineError, TailFile, TailRead


def _identity(value: Any) -> Any:
    return value


def _lines(n: int, start: int = 0) -> list[bytes]:
    return [json.dumps({"i": i, "pad": "x" * (i % 7)}).encode() + b"\n" for i in range(start, start + n)]


class Collector:
    """A tail plus everything it consumed."""

    def __init__(self, path: Path, **kwargs: Any) -> None:
        self.tail: TailFile[Any] = TailFile(path, _identity, **kwargs)
        self.records: list[Any] = []
        self.resets = 0

    def poll(self) -> TailRead:
        def on_reset() -> None:
            self.resets += 1
            self.records.clear()

        return self.tail.poll(self.records.extend, on_reset)


def test_only_complete_lines_are_consumed(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    c = Collector(path)
    assert c.poll().size is None  # a missing file is an empty one
    path.write_bytes(b'{"a": 1}\n{"a": 2')
    read = c.poll()
    assert c.records == [{"a": 1}]
    assert (read.start, read.end, read.records) == (0, 9, 1)
    assert c.tail.pending_bytes == 7
    with open(path, "ab") as f:
        f.write(b'}\n{"a": 3}\n')
    read = c.poll()
    assert c.records == [{"a": 1}, {"a": 2}, {"a": 3}]
    assert (read.start, read.end) == (9, path.stat().st_size)
    assert c.tail.pending_bytes == 0


def test_malformed_line_is_reported_with_its_offset_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    good, bad = b'{"a": 1}\n', b'{"a": oops}\n'
    path.write_bytes(good + bad + b"\n   \n" + b"\xff\xfe{}\n" + good)
    c = Collector(path)
    read = c.poll()
    assert c.records == [{"a": 1}, {"a": 1}]  # the blank lines carry nothing and are not errors
    assert [m.offset for m in read.malformed] == [len(good), len(good + bad) + 5]
    first = read.malformed[0]
    assert isinstance(first, StreamError) and isinstance(first, MalformedLineError)
    assert first.path == path and first.excerpt == bad.rstrip(b"\n")
    assert f"{path} (byte {len(good)})" in str(first) and "not valid JSON" in str(first)
    assert "UTF-8" in read.malformed[1].reason
    assert c.tail.malformed_count == 2
    assert c.poll().malformed == ()  # reported once


def test_decoder_rejection_is_a_malformed_line(tmp_path: Path) -> None:
    def needs_ts(value: Any) -> float:
        return float(value["ts"])

    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"ts": 1}\n[1, 2]\n{"x": 0}\n{"ts": 2}\n')
    tail: TailFile[float] = TailFile(path, needs_ts)
    out: list[float] = []
    read = tail.poll(out.extend)
    assert out == [1.0, 2.0]
    assert [m.offset for m in read.malformed] == [10, 17]
    assert "missing field 'ts'" in str(read.malformed[1])


def test_non_ascii_lines_keep_byte_offsets(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    first = json.dumps({"name": "überschrift ✓"}, ensure_ascii=False).encode() + b"\n"
    path.write_bytes(first + b"{broken\n")
    read = Collector(path).poll()
    assert read.malformed[0].offset == len(first)


@pytest.mark.parametrize("how", ["shrank", "replaced", "rewritten"])
def test_rewritten_file_resets_to_zero_with_a_notice(tmp_path: Path, how: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(_lines(5)))
    c = Collector(path)
    c.poll()
    old_offset = c.tail.offset
    if how == "shrank":
        path.write_bytes(b"".join(_lines(2, start=100)))
    elif how == "replaced":
        other = tmp_path / "new.jsonl"
        other.write_bytes(b"".join(_lines(2, start=100)) + b"".join(_lines(9, start=200)))
        os.replace(other, path)
    else:  # same inode, larger than before, different bytes before the old offset
        path.write_bytes(b"".join(_lines(3, start=100)) + b'{"i": 1000}' + b" " * 400 + b"\n")
    read = c.poll()
    assert read.reset is not None and read.reset.reason == how
    assert read.reset.previous_offset == old_offset and read.reset.path == path
    assert c.resets == 1 and c.tail.reset_count == 1
    assert c.records[0]["i"] == 100  # the old content was dropped, the new read from 0
    assert read.start == 0 and read.end == path.stat().st_size


def test_unchanged_file_is_not_opened(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(_lines(3)) + b'{"partial"')
    reads: list[int] = []
    c = Collector(path, read_hook=lambda _path, offset: reads.append(offset))
    c.poll()
    assert reads == [0]
    for _ in range(3):
        read = c.poll()
        assert not read.changed and read.records == 0
    assert reads == [0]  # neither the complete lines nor the pending partial one are read again
    with open(path, "ab") as f:
        f.write(b": 1}\n")
    c.poll()
    assert len(reads) == 2 and c.records[-1] == {"partial": 1}


def test_failed_consume_keeps_the_offset(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(_lines(4)))
    tail: TailFile[Any] = TailFile(path, _identity)

    def refuse(records: Any) -> None:
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        tail.poll(refuse)
    assert tail.offset == 0
    out: list[Any] = []
    tail.poll(out.extend)
    assert [r["i"] for r in out] == [0, 1, 2, 3]


def test_lines_longer_than_a_block(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    big = json.dumps({"blob": "y" * 5000}).encode() + b"\n"
    path.write_bytes(big + b"".join(_lines(50)) + big)
    c = Collector(path, block_size=64)
    c.poll()
    assert len(c.records) == 52 and c.records[0] == c.records[-1] == {"blob": "y" * 5000}


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=6), max_size=3), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
    block=st.integers(min_value=1, max_value=64),
)
def test_any_growth_yields_every_line_once(
    tmp_path_factory: pytest.TempPathFactory, lines: list[dict[str, Any]], cuts: list[int], block: int
) -> None:
    data = b"".join(json.dumps(line, ensure_ascii=False).encode() + b"\n" for line in lines)
    path = tmp_path_factory.getbasetemp() / "grow.jsonl"
    path.unlink(missing_ok=True)  # a fresh inode per example
    path.write_bytes(b"")
    c = Collector(path, block_size=block)
    for cut in sorted(c % (len(data) + 1) for c in cuts):
        path.write_bytes(data[:cut])  # same inode, growing; the reader polls at any byte
        c.poll()
    path.write_bytes(data)
    c.poll()
    assert c.records == lines and c.resets == 0


def test_concurrent_poll_waits_for_the_transaction(tmp_path: Path) -> None:
    """Poller B starts while A is inside its read, holding the offset B would also read from.

    B must not read from that stale offset: it blocks until A has appended and advanced.
    """
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(_lines(20)))
    consumed: dict[str, list[Any]] = {"A": [], "B": []}
    state: dict[str, Any] = {}

    def hook(_path: Path, offset: int) -> None:
        if "b" in state:
            return
        state["offset_seen_by_a"] = offset
        b = state["b"] = threading.Thread(target=lambda: tail.poll(consumed["B"].extend))
        b.start()
        b.join(timeout=0.3)
        state["b_blocked_while_a_inside"] = b.is_alive()

    tail: TailFile[Any] = TailFile(path, _identity, read_hook=hook)
    tail.poll(consumed["A"].extend)
    state["b"].join(timeout=5)
    assert state["offset_seen_by_a"] == 0
    assert state["b_blocked_while_a_inside"]
    assert [r["i"] for r in consumed["A"]] == list(range(20))
    assert consumed["B"] == []  # B found nothing new: the same bytes were not appended twice


def test_writer_process_and_poller_threads(tmp_path: Path) -> None:
    """A writer process appends with half-lines on disk; four threads poll; every line lands once, in order."""
    path = tmp_path / "s.jsonl"
    lines = _lines(400)
    tail: TailFile[Any] = TailFile(path, _identity)
    consumed: list[Any] = []
    per_thread: list[list[Any]] = [[] for _ in range(4)]
    lock = threading.Lock()

    def consume_into(mine: list[Any]) -> Any:
        def consume(records: Any) -> None:
            mine.extend(records)
            with lock:
                consumed.extend(records)

        return consume

    writer = multiprocessing.get_context("spawn").Process(
        target=append_slowly, args=([(str(path), line) for line in lines], 7)
    )
    writer.start()
    errors: list[BaseException] = []

    saw_partial_line = threading.Event()

    def poller(mine: list[Any]) -> None:
        try:
            while writer.is_alive():
                read = tail.poll(consume_into(mine))
                assert not read.malformed, read.malformed
                if tail.pending_bytes:
                    saw_partial_line.set()
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=poller, args=(mine,)) for mine in per_thread]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    writer.join(timeout=60)
    assert writer.exitcode == 0 and not errors
    tail.poll(consume_into(per_thread[0]))
    expected = [json.loads(line) for line in lines]
    assert consumed == expected
    assert sorted(r["i"] for mine in per_thread for r in mine) == list(range(400))
    assert saw_partial_line.is_set()  # the pollers did meet half-written lines
