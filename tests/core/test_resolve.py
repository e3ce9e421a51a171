"""Row resolution over layouts written by the project's own writer, against the full arrays."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from miles_tui.core.base.errors import InconsistentDumpError
from miles_tui.core.dump import PER_TOKEN_FIELDS, FieldState, Run, RunDir
from miles_tui.core.dump.resolve import Shard, resolve_rows
from miles_tui.core.dump.step import open_step
from miles_tui.core.synth.dump_files import make_sample
from miles_tui.core.synth.layout import MODEL_OUTPUT_KEYS, ParallelLayout
from miles_tui.core.synth.writer import write_step

LATER = time.time() + 3600


def _samples(n: int, seed: int) -> tuple[list[dict[str, Any]], dict[str, list[np.ndarray]]]:
    rng = np.random.default_rng(seed)
    samples, per_token = [], {k: [] for k in MODEL_OUTPUT_KEYS}
    for i in range(n):
        prompt, response = int(rng.integers(2, 30)), int(rng.integers(1, 60))
        mask = (rng.random(response) > 0.2).astype(int).tolist()
        samples.append(
            make_sample(
                index=i,
                group_index=i // 4,
                tokens=rng.integers(0, 100, prompt + response).tolist(),
                response_length=response,
                reward=float(rng.integers(0, 2)),
                loss_mask=mask,
                weight_versions=[str(3 - i % 3)],
                rollout_log_probs=(-rng.random(response)).tolist(),
            )
        )
        for key in MODEL_OUTPUT_KEYS:
            per_token[key].append(rng.normal(size=response).astype(np.float32))
    return samples, per_token


def _write(tmp_path: Path, layout: str, **kwargs: Any) -> tuple[Path, list[dict[str, Any]], dict[str, Any]]:
    samples, per_token = _samples(12, seed=hash(layout) % 1000)
    write_step(tmp_path, 3, samples, per_token, ParallelLayout.parse(layout), **kwargs)
    return tmp_path, samples, per_token


def _shards(root: Path) -> list[Shard]:
    run = RunDir(root)
    files = run.step_files(3)
    assert files is not None
    return [Shard.from_payload(f.path, f.rank, RunDir.load(f, LATER)) for f in files.train]


LAYOUTS = [
    ("dp2 cp2 tp2 pp2", {"writers": "gated"}),
    ("dp2 cp2 tp2 pp2", {"writers": "all"}),
    ("dp1 cp4 tp2 pp1", {"writers": "all"}),
    ("dp2 cp2 tp1 pp1", {"writers": "gated", "qkv_format": "bshd"}),
    ("dp2 cp2 tp2 pp2", {"writers": "all", "legacy": True}),
    ("dp2 cp2 tp1 pp1", {"writers": "all", "legacy": True, "qkv_format": "bshd"}),
    ("dp2 cp1 tp2 pp2", {"writers": "all"}),
]


@pytest.mark.parametrize(("layout", "kwargs"), LAYOUTS)
def test_every_layout_resolves_to_the_full_arrays(tmp_path: Path, layout: str, kwargs: dict[str, Any]) -> None:
    root, samples, per_token = _write(tmp_path, layout, **kwargs)
    shards = _shards(root)
    rows = resolve_rows(shards, {s["index"] for s in samples})
    assert sorted(rows) == [s["index"] for s in samples]
    legacy_ambiguous = 0
    for position, sample in enumerate(samples):
        row = rows[sample["index"]]
        if row.alignment_failed:
            # Legacy recovery may refuse (identical slices merge); it must never guess.
            assert kwargs.get("legacy"), row.alignment_reason
            legacy_ambiguous += 1
            continue
        for key in MODEL_OUTPUT_KEYS:
            assert row.field_state[key] is FieldState.OK
            np.testing.assert_allclose(row.per_token[key], per_token[key][position], rtol=0, atol=0)
        np.testing.assert_allclose(
            row.per_token["rollout_log_probs"], np.float32(sample["rollout_log_probs"]), rtol=0, atol=0
        )
        assert row.loss_mask is not None and row.loss_mask.tolist() == sample["loss_mask"]
    assert legacy_ambiguous <= 2


@pytest.mark.parametrize(("layout", "kwargs"), LAYOUTS)
def test_resolution_does_not_depend_on_file_order(tmp_path: Path, layout: str, kwargs: dict[str, Any]) -> None:
    root, _samples, _ = _write(tmp_path, layout, **kwargs)
    shards = _shards(root)
    reference = resolve_rows(shards)
    for seed in range(3):
        shuffled = shards[:]
        random.Random(seed).shuffle(shuffled)
        again = resolve_rows(shuffled)
        for index, row in reference.items():
            other = again[index]
            assert other.alignment_failed == row.alignment_failed and other.dumped_rank == row.dumped_rank
            for key in PER_TOKEN_FIELDS:
                a, b = row.per_token[key], other.per_token[key]
                assert (a is None) == (b is None)
                if a is not None and b is not None:
                    assert np.array_equal(a, b)


def test_pp_stage_zero_files_do_not_blank_the_model_outputs(tmp_path: Path) -> None:
    root, _samples, _ = _write(tmp_path, "dp2 cp1 tp1 pp2", writers="all")
    rows = resolve_rows(_shards(root))
    for row in rows.values():
        assert not row.alignment_failed
        assert all(row.field_state[k] is FieldState.OK for k in MODEL_OUTPUT_KEYS)
        assert row.dumped_rank in (0, 1)  # a stage-0 rank holds the row, without outputs


def test_a_missing_cp_rank_is_unreadable_not_absent(tmp_path: Path) -> None:
    root, _samples, _ = _write(tmp_path, "dp2 cp2 tp1 pp1", writers="gated")
    layout = ParallelLayout.parse("dp2 cp2 tp1 pp1")
    (root / "train_data" / f"3_{layout.rank_of(dp=0, cp=1)}.pt").unlink()
    rows = resolve_rows(_shards(root))
    failed = [r for r in rows.values() if r.alignment_failed]
    assert failed, "dp0's samples lost a CP rank"
    for row in failed:
        assert row.per_token["log_probs"] is None
        assert row.field_state["log_probs"] is FieldState.UNREADABLE
        assert "CP rank 1" in (row.alignment_reason or "")


def test_a_corrupt_tp_peer_costs_nothing_but_is_reported(tmp_path: Path) -> None:
    root, _samples, _ = _write(tmp_path, "dp2 cp1 tp2 pp1", writers="all")
    victim = root / "train_data" / "3_1.pt"
    victim.write_bytes(victim.read_bytes()[:200])
    old = time.time() - 3600
    os.utime(victim, (old, old))
    run = Run(root, use_cache=False)
    step = run.open(3, False, time.time())
    assert [p.path.name for p in step.summary.problems] == ["3_1.pt"]
    assert step.summary.problems[0].kind.value == "corrupt"
    assert not any(r.alignment_failed for r in step.summary.rows)
    assert all(r.dumped_rank is not None for r in step.summary.rows)


def test_a_young_broken_file_is_still_writing(tmp_path: Path) -> None:
    root, _samples, _ = _write(tmp_path, "dp2 cp1 tp1 pp1", writers="gated")
    victim = root / "train_data" / "3_1.pt"
    victim.write_bytes(victim.read_bytes()[:300])
    files = RunDir(root).step_files(3)
    assert files is not None
    step = open_step(files, time.time())
    assert not step.summary.complete
    assert step.summary.problems[0].kind.value == "still_writing"
    assert not any(r.alignment_failed for r in step.summary.rows)  # pending, not unreadable


def test_lengths_that_disagree_name_the_files(tmp_path: Path) -> None:
    root, _samples, _ = _write(tmp_path, "dp1 cp2 tp1 pp1", writers="gated")
    shards = _shards(root)
    columns = dict(shards[1].columns)
    columns["response_lengths"] = [n + 1 for n in columns["response_lengths"]]
    broken = Shard(shards[1].path, shards[1].rank, 1, 2, "thd", columns, shards[1].row_of)
    with pytest.raises(InconsistentDumpError, match="disagree on its lengths") as info:
        resolve_rows([shards[0], broken])
    assert "3_0.pt" in str(info.value) and "3_1.pt" in str(info.value)


def test_a_shard_naming_an_unknown_sample_is_an_error(tmp_path: Path) -> None:
    root, _samples, _ = _write(tmp_path, "dp2 cp1 tp1 pp1", writers="gated")
    with pytest.raises(InconsistentDumpError, match="does not have") as info:
        resolve_rows(_shards(root), known_samples={0, 1})
    assert "train_data/3_" in str(info.value)


def test_raw_reward_is_indexed_by_rollout_position_not_shard_row(tmp_path: Path) -> None:
    root, samples, _ = _write(tmp_path, "dp2 cp1 tp1 pp1", writers="gated")
    summary = Run(root, use_cache=False).open(3, False, LATER).summary
    assert [r.raw_reward for r in summary.rows] == [s["reward"] for s in samples]


def test_a_step_whose_shards_are_still_landing_is_pending_then_settles(tmp_path: Path) -> None:
    root, _samples, _ = _write(tmp_path, "dp1 cp2 tp1 pp1", writers="gated")
    (root / "train_data" / "3_1.pt").unlink()  # CP rank 1's file has not landed yet
    landed = time.time()
    for path in root.rglob("*.pt"):
        os.utime(path, (landed, landed))
    run = Run(root, use_cache=False)
    early = run.summary(3, False, landed + 2)
    assert not early.complete and early.settling_until == pytest.approx(landed + 10)
    assert all(r.alignment_failed for r in early.rows)  # values are blank ...
    from miles_tui.core.analysis.advisories import unreadable_per_token

    assert unreadable_per_token(early) == []  # ... but not called unreadable while the step settles
    late = run.summary(3, False, landed + 11)  # nothing changed on disk: now it is final
    assert late.complete and late.settling_until is None
    assert len(unreadable_per_token(late)) == 1
