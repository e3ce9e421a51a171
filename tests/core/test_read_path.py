"""The fast read path gives exactly what the plain one did: zip records, lazy fields, the cache, imports."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from miles_tui.core.base.errors import CorruptFileError
from miles_tui.core.dump import PER_TOKEN_FIELDS, Run, RunDir
from miles_tui.core.dump.pt.pt_archive import load_pt
from miles_tui.core.dump.resolve import PerTokenFields

torch = pytest.importorskip("torch", reason="these tests check compatibility with torch.save")

ROOT = Path(__file__).resolve().parents[2]
PAYLOAD: dict[str, Any] = {
    "rollout_id": 3,
    "columns": [torch.arange(10, dtype=torch.float32), torch.ones(4, dtype=torch.int64)],
    "bf16": torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
    "text": "x" * 300,
}


def _same(value: Any, loaded: Any) -> bool:
    if isinstance(value, dict):
        return value.keys() == loaded.keys() and all(_same(value[k], loaded[k]) for k in value)
    if isinstance(value, list):
        return len(value) == len(loaded) and all(_same(a, b) for a, b in zip(value, loaded, strict=True))
    if isinstance(value, torch.Tensor):
        return bool(np.array_equal(value.float().numpy(), np.asarray(loaded, dtype=np.float32)))
    return bool(value == loaded)


def _rezip(source: Path, target: Path, *, compression: int = zipfile.ZIP_STORED, prefix: bytes = b"") -> Path:
    buffer = io.BytesIO()
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(buffer, "w", compression) as out:
        for info in original.infolist():
            out.writestr(info.filename, original.read(info))
    target.write_bytes(prefix + buffer.getvalue())
    return target


def test_every_zip_shape_loads_as_torch_wrote_it(tmp_path: Path) -> None:
    saved = tmp_path / "torch.pt"
    torch.save(PAYLOAD, saved)  # torch: zip64 end records, aligned STORED records
    shapes = [
        saved,
        _rezip(saved, tmp_path / "plain.pt"),  # zipfile: no zip64 records
        _rezip(saved, tmp_path / "prefixed.pt", prefix=b"PK\x03\x04" + bytes(60)),  # data before the archive
    ]
    for path in shapes:
        assert _same(PAYLOAD, load_pt(path)), path.name


def test_a_compressed_archive_is_refused_not_inflated(tmp_path: Path) -> None:
    saved = tmp_path / "torch.pt"
    torch.save(PAYLOAD, saved)
    deflated = _rezip(saved, tmp_path / "deflated.pt", compression=zipfile.ZIP_DEFLATED)
    with pytest.raises(CorruptFileError, match=r"not a torch.save archive \(compressed entry") as info:
        load_pt(deflated)
    assert str(deflated) in str(info.value)


def test_a_corrupt_pickle_is_refused_by_its_crc(tmp_path: Path) -> None:
    path = tmp_path / "flipped.pt"
    torch.save(PAYLOAD, path)
    data = bytearray(path.read_bytes())
    at = data.index(b"x" * 300) + 10  # inside data.pkl, where the unpickler would not notice
    data[at] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match="CRC"):
        load_pt(path)


def test_lazily_assembled_fields_equal_the_full_arrays(demo_run: Path) -> None:
    run = Run(demo_run, use_cache=False)
    step = run.open(0, False, time.time())
    checked = 0
    for row in step.train_rows.values():
        assert isinstance(row.per_token, PerTokenFields)
        assert list(row.per_token) == list(PER_TOKEN_FIELDS)
        for name in PER_TOKEN_FIELDS:
            first, second = row.per_token[name], row.per_token[name]
            if first is None or second is None:
                assert first is None and second is None
                continue
            assert first.dtype == np.float64 and len(first) == row.response_length
            assert np.array_equal(first, second) and first is not second  # a fresh array per read
            checked += 1
    assert checked


def test_a_cached_summary_equals_the_computed_one(demo_run: Path) -> None:
    now = time.time()
    computed = Run(demo_run, use_cache=False).open(1, False, now).summary
    Run(demo_run).summary(1, False, now)  # computes and stores
    cached = Run(demo_run).summary(1, False, now)  # a fresh Run: served from the cache
    assert cached == computed


def test_one_step_stats_only_its_own_files(demo_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from miles_tui.core.dump import run_dir

    stated: list[str] = []
    real = run_dir._stat

    def counting(entry: os.DirEntry[str]) -> os.stat_result | None:
        stated.append(entry.name)
        return real(entry)

    monkeypatch.setattr(run_dir, "_stat", counting)
    files = RunDir(demo_run).step_files(2)
    assert files is not None and files.train
    assert sorted(stated) == sorted([files.rollout.path.name, *(f.path.name for f in files.train)])
    assert RunDir(demo_run).step_files(2) == RunDir(demo_run).scan()[(2, False)]


def test_a_warm_export_imports_neither_torch_nor_numpy(demo_run: Path, tmp_path: Path) -> None:
    code = (
        "import sys\nfrom miles_tui.tui.cli import main\n"
        f"assert main(['export', {str(demo_run)!r}, '--step', '1']) == 0\n"
        "sys.stderr.write(repr(sorted(m for m in ('torch', 'numpy') if m in sys.modules)))\n"
    )
    env = {**os.environ, "MILES_TUI_CACHE_DIR": str(tmp_path / "cache")}
    cold = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    warm = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    assert cold.returncode == 0 and warm.returncode == 0, cold.stderr + warm.stderr
    assert cold.stderr.endswith("['numpy']")  # the cold path reads dumps (with numpy, never torch)
    assert warm.stderr.endswith("[]")
    assert cold.stdout == warm.stdout
