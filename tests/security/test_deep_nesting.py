"""A tuple nested hundreds of thousands deep crashes CPython when it is hashed: never let a pickle build one.

Hashing a tuple recurses in C through the tuples inside it with no recursion
check, so ``{((((0,),),)...): 1}`` in a pickle kills the process with SIGSEGV
while it loads (the dict hashes its key), and any such value that got through
would kill whoever hashes it later. Each case loads in a child process.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from miles_tui.core.dump.pt.pt_archive import loads_pickle
from tests.security.hostile import Reduce, load_in_child, proto2, save, write_archive

DEPTH = 1_000_000


def _refused(path: Path, kind: str = "pt") -> None:
    loaded = load_in_child(path, kind=kind)
    assert loaded.returncode == 0, loaded.describe()
    assert loaded.refused, loaded.describe()
    assert "nested" in loaded.outcome["message"], loaded.describe()


@pytest.mark.parametrize(
    "key",
    [
        b"K\x00" + b"\x85" * DEPTH,  # TUPLE1 of TUPLE1 of ...
        b"(" * DEPTH + b"K\x00" + b"t" * DEPTH,  # MARK ... TUPLE, nested
        b"K\x00q\x01" + b"0h\x01N\x86q\x01" * DEPTH + b"0h\x01",  # through the memo: GET, TUPLE2, PUT, POP
        b"K\x00" + b"2\x86" * DEPTH,  # DUP, TUPLE2
    ],
    ids=["tuple1", "mark-tuple", "memo", "dup"],
)
def test_a_deep_tuple_used_as_a_key_is_refused_not_a_segfault(tmp_path: Path, key: bytes) -> None:
    path = write_archive(tmp_path / "deep.pt", proto2(b"}" + key + b"K\x01s"))
    _refused(path)


def test_a_deep_tuple_in_a_plain_pickle_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "deep.pkl"
    path.write_bytes(proto2(b"\x8f(K\x00" + b"\x85" * DEPTH + b"\x90"))  # EMPTY_SET, ADDITEMS
    _refused(path, kind="pickle")


def test_records_nest_no_deeper_than_tuples(tmp_path: Path) -> None:
    """An inert record hashes its arguments: a chain of records is a chain of tuples."""
    start = b"cminiles.things\nRecord\nq\x00K\x00q\x010"
    body = start + b"h\x00h\x01K\x00\x86Rq\x010" * (DEPTH // 10)  # memo[1] = Record(memo[1], 0)
    path = write_archive(tmp_path / "records.pt", proto2(body + b"}h\x01K\x01s"))
    _refused(path)


def test_tuple_builtin_cannot_wrap_containers(tmp_path: Path) -> None:
    inner: object = 0
    for _ in range(50):
        inner = Reduce(tuple, ([inner],))
    path = save(tmp_path / "builtin.pt", {"samples": [{"index": 0, "x": inner}]})
    loaded = load_in_child(path)
    assert loaded.returncode == 0 and loaded.refused, loaded.describe()


def test_honest_tuples_load() -> None:
    value = {"pairs": [(i, float(i)) for i in range(100_000)], "nested": ((((1, 2), 3), 4), 5)}
    deep: object = 0
    for _ in range(400):
        deep = (deep,)
    value["deep"] = deep
    for protocol in (2, 4):
        assert loads_pickle(pickle.dumps(value, protocol=protocol)) == value


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("dict-key", b"}K\x00" + b"2\x86" * 100 + b"K\x01s"),  # x = (x, x), 100 times, as a key: 2**100 to hash
        ("set-item", b"\x8f(K\x00" + b"2\x86" * 100 + b"\x90"),
        ("memo", b"}K\x00q\x01" + b"0h\x01h\x01\x86q\x01" * 100 + b"0h\x01K\x01s"),
    ],
)
def test_a_tuple_dag_that_hashes_forever_is_refused(tmp_path: Path, name: str, body: bytes) -> None:
    """Found by the fuzzer: 200 bytes whose key takes 2**100 steps to hash (the loader never returned)."""
    path = write_archive(tmp_path / f"{name}.pt", proto2(body))
    loaded = load_in_child(path, timeout=30)
    assert loaded.returncode == 0, loaded.describe()
    assert loaded.refused and "hashing" in loaded.outcome["message"], loaded.describe()


def test_a_builtin_set_of_a_tuple_dag_is_refused(tmp_path: Path) -> None:
    body = b"K\x00q\x01" + b"0h\x01h\x01\x86q\x01" * 100 + b"0cbuiltins\nset\n](h\x01e\x85R"
    path = write_archive(tmp_path / "set.pt", proto2(body))
    loaded = load_in_child(path, timeout=30)
    assert loaded.returncode == 0 and loaded.refused, loaded.describe()


def test_a_list_dag_that_expands_past_the_allowance_is_refused(tmp_path: Path) -> None:
    """``L = [L, L]`` 60 times: 2**60 items to whoever prints, copies or exports it."""
    body = b"]q\x01" + b"0](h\x01h\x01eq\x01" * 60 + b"0}(X\x08\x00\x00\x00metadatah\x01u"
    path = write_archive(tmp_path / "dag.pt", proto2(body))
    loaded = load_in_child(path, timeout=30)
    assert loaded.returncode == 0, loaded.describe()
    assert loaded.refused and "expand" in loaded.outcome["message"], loaded.describe()


def test_honest_sharing_loads() -> None:
    shared = {"source": "gsm8k", "tags": ["math", "easy"]}
    value = {"samples": [{"index": i, "metadata": shared} for i in range(1000)]}
    loaded = loads_pickle(pickle.dumps(value, protocol=2))
    assert loaded == value
    assert loaded["samples"][0]["metadata"] is loaded["samples"][1]["metadata"]
