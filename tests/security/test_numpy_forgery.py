"""Issue 9.1: numpy objects are never rebuilt from pickle state the attacker controls.

The reported exploit: a rollout sample whose ``status`` is
``numpy._core.multiarray.scalar(dtype, 8 bytes)`` where the dtype comes from a
forged ``numpy.dtype`` state (an object field, flags saying "no objects"):
``str()`` dereferences the 8 bytes as a pointer and the process dies with
SIGSEGV. Every case loads in a child process, so a crash fails the test.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from miles_tui.core.dump.pt.pt_archive import load_pt
from tests.security.hostile import Reduce, load_in_child, save, write_archive

multiarray = pytest.importorskip("numpy._core.multiarray", reason="numpy >= 2 names its pickles numpy._core")


def forged_dtype() -> Reduce:
    """``numpy.dtype('V8')`` whose pickled state declares an object field and flags 0 ("no objects")."""
    return Reduce(np.dtype, ("V8", False, True), (3, "|", None, ("a",), {"a": (np.dtype("O"), 0)}, 8, 1, 0))


def test_forged_dtype_scalar_is_refused_not_a_segfault(tmp_path: Path) -> None:
    status = Reduce(multiarray.scalar, (forged_dtype(), b"A" * 8))
    path = save(tmp_path / "rollout.pt", {"samples": [{"index": 0, "status": status}]})
    loaded = load_in_child(path)
    assert loaded.returncode == 0, loaded.describe()
    assert loaded.refused, loaded.describe()
    assert loaded.outcome["class"] == "UnsafePickleError", loaded.describe()
    assert "numpy" in loaded.outcome["message"]


@pytest.mark.parametrize(
    "value",
    [
        np.array([1, "text", None], dtype=object),
        np.zeros(2, dtype=[("a", "i4"), ("b", "f8")]),
        np.array(["a", "bc"]),
        np.array([1, 2], dtype="datetime64[s]"),
        np.void(b"\x00" * 4),
        np.str_("status"),
    ],
    ids=["object-array", "structured-array", "unicode-array", "datetime-array", "void-scalar", "str-scalar"],
)
def test_numpy_values_outside_the_plain_numeric_table_are_refused(tmp_path: Path, value: object) -> None:
    path = save(tmp_path / "rollout.pt", {"samples": [{"index": 0, "extra": value}]})
    loaded = load_in_child(path)
    assert loaded.returncode == 0, loaded.describe()
    assert loaded.refused and loaded.outcome["class"] == "UnsafePickleError", loaded.describe()


def test_a_forged_array_state_never_reaches_numpy(tmp_path: Path) -> None:
    """``_reconstruct`` then BUILD with an object-field dtype over attacker bytes."""
    state = (1, (2,), forged_dtype(), False, b"B" * 16)
    reconstruct = Reduce(multiarray._reconstruct, (np.ndarray, (0,), b"b"), state)
    path = save(tmp_path / "rollout.pt", {"samples": [{"index": 0, "experts": reconstruct}]})
    loaded = load_in_child(path)
    assert loaded.returncode == 0, loaded.describe()
    assert loaded.refused, loaded.describe()


def test_a_second_build_on_a_loaded_array_is_refused(tmp_path: Path) -> None:
    """A pickle that rebuilds a plain array, then BUILDs it again with state of its own choosing."""
    array = pickle.dumps(np.arange(3, dtype=np.int64), protocol=2)[:-1]  # without STOP
    forged_state = pickle.dumps((1, (3,), forged_dtype(), False, b"C" * 24), protocol=2)[2:-1]  # without PROTO, STOP
    path = write_archive(tmp_path / "rollout.pt", array + forged_state + b"b.")
    loaded = load_in_child(path)
    assert loaded.returncode == 0, loaded.describe()
    assert loaded.refused, loaded.describe()


def test_a_second_build_on_a_scalar_is_refused(tmp_path: Path) -> None:
    scalar = pickle.dumps(np.float64(2.5), protocol=2)[:-1]
    state = pickle.dumps((forged_dtype(), b"D" * 8), protocol=2)[2:-1]
    path = write_archive(tmp_path / "rollout.pt", scalar + state + b"b.")
    loaded = load_in_child(path)
    assert loaded.returncode == 0, loaded.describe()
    assert loaded.refused, loaded.describe()


PLAIN = {
    "int32_2d": np.arange(6, dtype=np.int32).reshape(2, 3),
    "fortran": np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4)),
    "float16": np.array([0.5, -1.25], dtype=np.float16),
    "bool": np.array([True, False, True]),
    "uint8": np.arange(250, 256, dtype=np.uint8),
    "complex64": np.array([1 + 2j], dtype=np.complex64),
    "big_endian": np.array([1, 256], dtype=">i4"),
    "zero_d": np.array(7, dtype=np.int64),
    "empty": np.zeros((0, 3), dtype=np.float32),
    "scalar_f32": np.float32(1.5),
    "scalar_i64": np.int64(-3),
    "scalar_bool": np.bool_(True),
    "dtype": np.dtype("<f4"),
}


def test_plain_numeric_numpy_values_load_exactly(tmp_path: Path) -> None:
    path = save(tmp_path / "rollout.pt", {"samples": [{"index": 0, **PLAIN}]})
    sample = load_pt(path)["samples"][0]
    for key, expected in PLAIN.items():
        got = sample[key]
        assert type(got) is type(expected), key
        if isinstance(expected, np.ndarray):
            assert got.dtype == expected.dtype and got.shape == expected.shape, key
            assert np.array_equal(got, expected), key
        else:
            assert got == expected, key
