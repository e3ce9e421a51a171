"""Issues 9.12 and 13.1: a few hundred bytes never make the reader allocate gigabytes.

Each row of issue 13's table, built as an attacker would, loads in a child
process whose address space is capped (``RLIMIT_AS``: what it uses after
importing numpy plus 256 MiB). The load must end in the project's own refusal
naming the file, saying why, before the allocation: not a MemoryError, not a
kill, not a value.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.security.hostile import (
    Reduce,
    deflate_bomb,
    load_in_child,
    long_binput,
    proto2,
    save,
    tensor_opcodes,
    torch,
    write_archive,
)

MEM_MB = 256
PEAK_MB = 200
"""The child's peak RSS after a refusal (numpy alone is ~40 MB)."""


def _assert_refused(path: Path, *, reason: str, kind: str = "pt") -> None:
    loaded = load_in_child(path, mem_mb=MEM_MB, kind=kind)
    assert loaded.returncode == 0, loaded.describe()
    assert loaded.refused, loaded.describe()
    message = loaded.outcome["message"]
    assert "MemoryError" not in message, loaded.describe()
    assert reason in message, loaded.describe()
    assert loaded.outcome["maxrss_mb"] < PEAK_MB, loaded.describe()


def test_memo_index_2_26_is_refused(tmp_path: Path) -> None:
    path = write_archive(tmp_path / "memo.pt", proto2(b"]" + long_binput(2**26)))
    assert path.stat().st_size < 600
    _assert_refused(path, reason="memo")


def test_memo_index_in_a_plain_pickle_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "memo.pkl"
    path.write_bytes(proto2(b"]" + long_binput(2**26)))
    _assert_refused(path, reason="memo", kind="pickle")


def test_text_put_with_a_huge_index_is_refused(tmp_path: Path) -> None:
    path = write_archive(tmp_path / "put.pt", b"(lp67108864\n.")
    _assert_refused(path, reason="memo")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("bytearray", Reduce(bytearray, (3_000_000_000,))),
        ("bytes", Reduce(bytes, (3_000_000_000,))),
        ("set-range", Reduce(set, (range(50_000_000),))),
        ("frozenset-range", Reduce(frozenset, (range(50_000_000),))),
        ("list-range", Reduce(list, (range(50_000_000),))),
        ("tuple-range", Reduce(tuple, (range(50_000_000),))),
        ("dict-zip", Reduce(dict, (Reduce(zip, (range(50_000_000), range(50_000_000))),))),
    ],
)
def test_size_taking_builtins_are_bounded(tmp_path: Path, name: str, value: object) -> None:
    path = save(tmp_path / f"{name}.pt", {"samples": [{"index": 0, "metadata": value}]})
    assert path.stat().st_size < 2048
    loaded = load_in_child(path, mem_mb=MEM_MB)
    assert loaded.returncode == 0, loaded.describe()
    assert loaded.refused, loaded.describe()
    assert "MemoryError" not in loaded.outcome["message"], loaded.describe()
    assert loaded.outcome["maxrss_mb"] < PEAK_MB, loaded.describe()


@pytest.mark.parametrize("opcode", [b"\x8e", b"\x96", b"\x8d"], ids=["BINBYTES8", "BYTEARRAY8", "BINUNICODE8"])
def test_a_length_beyond_the_pickle_is_refused_before_allocating(tmp_path: Path, opcode: bytes) -> None:
    path = write_archive(tmp_path / "len.pt", b"\x80\x04" + opcode + struct.pack("<Q", 3_000_000_000) + b"xx.")
    _assert_refused(path, reason="runs past the end")


def test_stride_zero_sample_indices_are_never_expanded(tmp_path: Path) -> None:
    path = tmp_path / "1_0.pt"
    if torch is not None:
        sample_indices = torch.zeros(1, dtype=torch.int64).expand(2**26)
        torch.save({"rollout_id": 1, "rank": 0, "rollout_data": {"sample_indices": sample_indices}}, path)
    else:
        body = b"}(" + b"X\x0c\x00\x00\x00rollout_data}(X\x0e\x00\x00\x00sample_indices"
        body += tensor_opcodes((2**26,), (0,), 1) + b"uu"
        write_archive(path, proto2(body), {"0": b"\x00" * 8})
    assert path.stat().st_size < 2048
    _assert_refused(path, reason="refused")


def test_many_small_containers_are_charged(tmp_path: Path) -> None:
    """Protocol 4 EMPTY_SET is one byte for a 216-byte set: 4 MB of them is the allowance many times over."""
    path = write_archive(tmp_path / "sets.pt", b"\x80\x04](" + b"\x8f" * (4 << 20) + b"e.")
    _assert_refused(path, reason="refused")


def test_deflated_pickle_is_refused_without_inflating(tmp_path: Path) -> None:
    path = deflate_bomb(tmp_path / "deflate.pt", 2 << 30)
    assert path.stat().st_size < 4 << 20
    _assert_refused(path, reason="not a torch.save archive (compressed entry")


def test_a_storage_record_longer_than_declared_is_refused(tmp_path: Path) -> None:
    body = b"}(X\x01\x00\x00\x00x" + tensor_opcodes((4,), (1,), 4) + b"u"
    path = write_archive(tmp_path / "size.pt", proto2(body), {"0": b"\x00" * 64})
    _assert_refused(path, reason="storage record")


def test_a_storage_record_matching_its_declaration_loads(tmp_path: Path) -> None:
    from miles_tui.core.dump.pt.pt_archive import load_pt

    body = b"}(X\x01\x00\x00\x00x" + tensor_opcodes((4,), (1,), 4) + b"u"
    path = write_archive(tmp_path / "size.pt", proto2(body), {"0": struct.pack("<4q", 1, 2, 3, 4)})
    assert load_pt(path)["x"].tolist() == [1, 2, 3, 4]
