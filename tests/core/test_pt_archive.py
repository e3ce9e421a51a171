"""Safe loading: dumps load without the framework, and no pickle can run code."""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from miles_tui.core.base.errors import CorruptFileError, UnsafePickleError
from miles_tui.core.dump.pt.pt_archive import load_pt, loads_pickle
from miles_tui.core.dump.pt.pt_unpickle import InertRecord

torch = pytest.importorskip("torch", reason="these tests check compatibility with torch.save")


class _Exploit:
    def __init__(self, call: object, args: tuple[object, ...]) -> None:
        self.call, self.args = call, args

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (self.call, self.args)


@pytest.mark.parametrize(
    ("call", "build_args"),
    [
        (os.system, lambda marker: (f"touch {marker}",)),
        (subprocess.call, lambda marker: (["touch", str(marker)],)),
        (eval, lambda marker: (f"open({str(marker)!r}, 'w').close()",)),
        (exec, lambda marker: (f"open({str(marker)!r}, 'w').close()",)),
    ],
    ids=["os.system", "subprocess.call", "builtins.eval", "builtins.exec"],
)
def test_a_pickle_that_reaches_for_code_is_refused(tmp_path: Path, call: object, build_args: object) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"samples": [_Exploit(call, build_args(marker))]}, path)  # type: ignore[operator]
    with pytest.raises(UnsafePickleError, match="could run code") as info:
        load_pt(path)
    assert str(path) in str(info.value)
    assert not marker.exists()


def test_refusal_happens_before_anything_runs_even_inside_a_plain_pickle(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    data = pickle.dumps(_Exploit(os.system, (f"touch {marker}",)), protocol=2)
    with pytest.raises(UnsafePickleError):
        loads_pickle(data)
    assert not marker.exists()


@dataclasses.dataclass
class RewardSpec:
    rm_type: str
    custom_rm_path: str | None


def test_unknown_classes_and_numpy_arrays_load_without_the_framework(tmp_path: Path) -> None:
    # Pickle a dataclass from a module the reader cannot import, like miles.utils.types.
    RewardSpec.__module__ = "miles_stub_types"
    sys.modules["miles_stub_types"] = sys.modules[__name__]
    try:
        payload = {
            "samples": [
                {
                    "reward_spec": RewardSpec("math", None),
                    "experts": np.arange(6, dtype=np.int32).reshape(2, 3),
                    "tensor": torch.tensor([1.5, -2.0]),
                    "bf16": torch.tensor([1.0, 2.5], dtype=torch.bfloat16),
                }
            ]
        }
        path = tmp_path / "rollout.pt"
        torch.save(payload, path)
    finally:
        del sys.modules["miles_stub_types"]
        RewardSpec.__module__ = __name__
    sample = load_pt(path)["samples"][0]
    assert isinstance(sample["reward_spec"], InertRecord)
    assert sample["reward_spec"].type_name == "miles_stub_types.RewardSpec"
    assert sample["reward_spec"].state == {"rm_type": "math", "custom_rm_path": None}
    assert sample["experts"].dtype == np.int32 and sample["experts"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert sample["tensor"].tolist() == [1.5, -2.0]
    assert sample["bf16"].tolist() == [1.0, 2.5]


def test_golden_rollout_with_framework_dataclasses_loads() -> None:
    golden = Path(__file__).resolve().parents[1] / "golden" / "tp_dup" / "rollout_data" / "0.pt"
    sample = load_pt(golden)["samples"][0]
    assert sample["reward_spec"].type_name == "miles.utils.types.RewardSpec"
    assert isinstance(sample["rollout_routed_experts"], np.ndarray)


def test_strided_and_offset_tensors_match_torch(tmp_path: Path) -> None:
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    payload = {"t": base.t(), "slice": base[1:, 2:5], "shared": [base[0], base[0]]}
    path = tmp_path / "views.pt"
    torch.save(payload, path)
    loaded = load_pt(path)
    assert np.array_equal(loaded["t"], base.t().numpy())
    assert np.array_equal(loaded["slice"], base[1:, 2:5].numpy())
    assert np.array_equal(loaded["shared"][1], base[0].numpy())


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "empty file"),
        (b"garbage that is not a zip", "not a torch zip archive"),
        (pickle.dumps({"a": 1}), "not a torch zip archive"),
    ],
)
def test_garbage_is_a_clear_corrupt_file_error(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "bad.pt"
    path.write_bytes(content)
    with pytest.raises(CorruptFileError, match=expected) as info:
        load_pt(path)
    assert str(path) in str(info.value)


def test_a_truncated_archive_is_corrupt_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "shard.pt"
    torch.save({"rollout_data": {"x": [torch.zeros(1000)]}}, path)
    data = path.read_bytes()
    for fraction in (0.1, 0.5, 0.9, 0.999):
        path.write_bytes(data[: int(len(data) * fraction)])
        with pytest.raises(CorruptFileError):
            load_pt(path)


def test_a_storage_record_that_lies_about_its_size_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "shard.pt"
    torch.save({"x": torch.zeros(16)}, path)
    buffer = io.BytesIO()
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            data = source.read(info)
            if "/data/" in info.filename:
                data = data[:8]  # storage shorter than the tensor claims
            target.writestr(info, data)
    path.write_bytes(buffer.getvalue())
    with pytest.raises(CorruptFileError):
        load_pt(path)


def test_reading_never_imports_torch(tmp_path: Path) -> None:
    path = tmp_path / "shard.pt"
    torch.save({"rollout_data": {"x": [torch.ones(3)]}}, path)
    code = (
        "import sys; from miles_tui.core.dump.pt.pt_archive import load_pt; "
        f"v = load_pt({str(path)!r}); assert v['rollout_data']['x'][0].tolist() == [1.0, 1.0, 1.0]; "
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
