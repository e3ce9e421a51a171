"""miles_tui.core.synth.pt_writer writes what torch.save writes: torch.load and core's safe reader both read it back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from miles_tui.core.dump.pt.pt_archive import load_pt
from miles_tui.core.synth.pt_writer import KeepAsIs, dumps_pt

ARRAYS = {
    "f32": np.array([1.5, -2.25, 0.0], dtype=np.float32),
    "f64": np.array([[1.0, 2.0], [3.0, 4.0]]),
    "i64": np.arange(7, dtype=np.int64),
    "i32": np.array([1, 0, 1], dtype=np.int32),
    "bool": np.array([True, False]),
    "u8": np.array([255, 0], dtype=np.uint8),
    "f16": np.array([0.5], dtype=np.float16),
    "empty": np.zeros(0, dtype=np.float32),
    "scalar": np.array(0.25, dtype=np.float32),
    "strided": np.arange(12, dtype=np.int64).reshape(3, 4).T,
}
PLAIN = {"int": 3, "big": 2**40, "neg": -(2**33), "float": 0.1, "str": "é\u2014x", "none": None, "t": (1, (2, "3"))}


def _payload() -> dict[str, object]:
    return {
        "rollout_data": {k: [v] for k, v in ARRAYS.items()},
        **PLAIN,
        "nested": [{"a": [1.5, None, True]}, []],
        "kept": KeepAsIs(np.arange(3, dtype=np.int32)),
    }


def _check(loaded: dict[str, object], to_numpy: object) -> None:
    for key, array in ARRAYS.items():
        value = to_numpy(loaded["rollout_data"][key][0])  # type: ignore[index, operator]
        assert value.dtype == array.dtype and value.shape == array.shape, key
        assert np.array_equal(value, array), key
    for key, value in PLAIN.items():
        assert loaded[key] == value, key
    assert loaded["nested"] == [{"a": [1.5, None, True]}, []]
    assert isinstance(loaded["kept"], np.ndarray) and loaded["kept"].tolist() == [0, 1, 2]


def test_core_reads_it_back(tmp_path: Path) -> None:
    path = tmp_path / "x.pt"
    path.write_bytes(dumps_pt(_payload()))
    _check(load_pt(path), np.asarray)


def test_torch_reads_it_back_including_memory_mapped(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    path = tmp_path / "x.pt"
    path.write_bytes(dumps_pt(_payload()))
    for mmap in (False, True):
        loaded = torch.load(path, weights_only=False, mmap=mmap)
        _check(loaded, lambda t: t.numpy())


def test_torch_tensors_from_training_code_are_written_as_tensors(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    payload = {"t": torch.tensor([1.0, 2.5], dtype=torch.bfloat16), "g": torch.ones(2, requires_grad=True) * 2}
    path = tmp_path / "x.pt"
    path.write_bytes(dumps_pt(payload))
    assert torch.load(path, weights_only=True)["t"].dtype == torch.bfloat16
    assert load_pt(path)["t"].tolist() == [1.0, 2.5] and load_pt(path)["g"].tolist() == [2.0, 2.0]


def test_a_demo_step_is_written_where_torch_cannot_be_imported(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import numpy as np\nfrom miles_tui.core.synth.demo import DemoConfig, write_demo_step\n"
        f"write_demo_step({str(tmp_path)!r}, 0, DemoConfig(samples_per_step=8), np.random.default_rng(0), now=1e9)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert load_pt(tmp_path / "rollout_data" / "0.pt")["rollout_id"] == 0
    assert list((tmp_path / "train_data").glob("0_*.pt"))


def test_globals_are_memoized_like_torch_save_does() -> None:
    import io
    import pickletools
    import zipfile

    data = dumps_pt({"x": [np.zeros(2, np.float32) for _ in range(500)], "k": [KeepAsIs(np.arange(2))] * 3})
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        opcodes = [op.name for op, _, _ in pickletools.genops(archive.read("archive/data.pkl"))]
    assert opcodes.count("GLOBAL") < 20  # 3 for 500 tensors, 4 per inline numpy fragment; unmemoized: 1,500+
