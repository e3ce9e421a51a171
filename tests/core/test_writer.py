"""miles_tui.core.synth.writer writes what miles writes: the golden dumps' files, keys and dtypes, for every layout.

The strongest check rebuilds every golden step from its own rollout file and
per-token values and compares the written train files with the golden ones
value by value. The layout tests cover every (tp, pp, cp, dp) in {1, 2}^4 in
both write modes, and reassemble every CP slice with miles_tui.core.dump.cp.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from miles_tui.core.base.errors import CorruptFileError
from miles_tui.core.dump.cp import assemble_response
from miles_tui.core.dump.pt.pt_archive import load_pt
from miles_tui.core.synth.dump_files import (
    append_jsonl,
    make_sample,
    save_policy_loss_debug,
    save_rollout,
    save_train_shard,
    write_trajectory,
)
from miles_tui.core.synth.layout import MODEL_OUTPUT_KEYS, SAMPLE_KEYS, SHARD_LAYOUT_KEYS, ParallelLayout
from miles_tui.core.synth.writer import balanced_partitions, normalize_rewards, write_step

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
TRAIN_CASES = sorted(p.parent.name for p in GOLDEN.glob("*/train_data"))
LAYOUTS = [ParallelLayout(tp=tp, pp=pp, cp=cp, dp=dp) for tp, pp, cp, dp in itertools.product((1, 2), repeat=4)]
CP_FIELDS = ("rollout_log_probs", *MODEL_OUTPUT_KEYS)


def _batch(n: int = 8, seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, list[np.ndarray]]]:
    """A small batch with the edge cases: 1-token prompt, 1-token response, masked spans, a removed sample."""
    rng = np.random.default_rng(seed)
    samples, per_token = [], {key: [] for key in MODEL_OUTPUT_KEYS}
    for i in range(n):
        prompt_len = 1 if i == 0 else int(rng.integers(2, 12))
        length = 1 if i == 1 else int(rng.integers(2, 40))
        mask = [1] * length
        if length > 6 and i % 3 == 0:
            mask[2:5] = [0, 0, 0]
        samples.append(
            make_sample(
                index=100 + i,
                group_index=i // 2,
                tokens=[int(t) for t in rng.integers(0, 100, prompt_len + length)],
                response_length=length,
                reward=float(rng.integers(0, 2)),
                loss_mask=mask if 0 in mask else None,
                weight_versions=["3", "4"] if i % 2 else ["4"],
                rollout_log_probs=[float(v) for v in -rng.random(length)],
                remove_sample=i == 5,
                status="truncated" if i == 6 else "completed",
            )
        )
        for key in MODEL_OUTPUT_KEYS:
            per_token[key].append(rng.normal(size=length))
    return samples, per_token


def _files(run_dir: Path, rid: int) -> dict[int, dict[str, Any]]:
    return {int(p.stem.split("_")[1]): load_pt(p) for p in (run_dir / "train_data").glob(f"{rid}_*.pt")}


def _reassemble(files: dict[int, dict[str, Any]], layout: ParallelLayout, sample: dict[str, Any], key: str) -> Any:
    slices: dict[int, Any] = {}
    max_seq_len = None
    for rank, payload in files.items():
        rows = payload["rollout_data"]
        if key in rows and sample["index"] in rows["sample_indices"]:
            row = rows["sample_indices"].index(sample["index"])
            slices[payload.get("cp_rank", layout.coords(rank).cp)] = rows[key][row]
            max_seq_len = rows["max_seq_lens"][row] if "max_seq_lens" in rows else None
    qkv = "bshd" if max_seq_len is not None else "thd"
    return assemble_response(slices, len(sample["tokens"]), sample["response_length"], layout.cp, qkv, max_seq_len)


@pytest.fixture(scope="module")
def golden_train() -> dict[str, Any]:
    return {
        "thd": load_pt(GOLDEN / "cp2_thd" / "train_data" / "0_0.pt"),
        "bshd": load_pt(GOLDEN / "cp2_bshd" / "train_data" / "0_0.pt"),
        "legacy": load_pt(GOLDEN / "cp_legacy" / "train_data" / "0_0.pt"),
    }


# --- layout --------------------------------------------------------------------------------------


def test_rank_order_reproduces_every_golden_write_record() -> None:
    checked = 0
    for truth in GOLDEN.glob("*.truth.json"):
        meta = json.loads(truth.read_text())["meta"]
        if not meta.get("write_record"):
            continue
        par = meta["parallel"]
        layout = ParallelLayout(tp=par["tp"], pp=par["pp"], cp=par["cp"], dp=par["dp"])
        for step in meta["write_record"]["steps"].values():
            for written in step["written_ranks"]:
                coords = layout.coords(written["rank"])
                assert (coords.tp, coords.cp, coords.dp, coords.pp) == (
                    written["tp"], written["cp"], written["dp"], written["pp"],
                )  # fmt: skip
                checked += 1
    assert checked > 0
    gated = ParallelLayout(tp=2, pp=2, cp=2, dp=2)
    assert [c.rank for c in gated.ranks() if gated.writes_train_file(c)] == [8, 10, 12, 14]


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_coords_and_rank_are_inverse(layout: ParallelLayout) -> None:
    ranks = [layout.rank_of(tp=c.tp, cp=c.cp, dp=c.dp, pp=c.pp) for c in layout.ranks()]
    assert ranks == list(range(layout.world_size))


def test_parse_layout() -> None:
    assert ParallelLayout.parse("dp2 cp2 tp2 pp2") == ParallelLayout(tp=2, pp=2, cp=2, dp=2)
    assert ParallelLayout.parse("tp4-dp1,cp2") == ParallelLayout(tp=4, cp=2)
    with pytest.raises(ValueError, match="xx2"):
        ParallelLayout.parse("dp2 xx2")
    with pytest.raises(ValueError, match="cannot read layout part 'dp\u00b2'"):  # isdigit() took it; int() failed
        ParallelLayout.parse("dp\u00b2")
    with pytest.raises(ValueError):
        ParallelLayout(tp=0)


# --- who writes, what they write -----------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_gated_writes_one_file_per_dp_cp_shard(tmp_path: Path, layout: ParallelLayout) -> None:
    samples, per_token = _batch()
    result = write_step(tmp_path, 3, samples, per_token, layout)
    files = _files(tmp_path, 3)
    expected = {layout.rank_of(cp=cp, dp=dp, pp=layout.pp - 1) for cp in range(layout.cp) for dp in range(layout.dp)}
    assert set(files) == expected == {f.coords.rank for f in result.files}
    assert len(files) == layout.cp * layout.dp
    assert (0 in files) == (layout.pp == 1)  # rank 0 is TP rank 0 of PP stage 0
    for rank, payload in files.items():
        coords = layout.coords(rank)
        assert (payload["rank"], payload["rollout_id"]) == (rank, 3)
        assert (payload["cp_rank"], payload["cp_size"], payload["qkv_format"]) == (coords.cp, layout.cp, "thd")
        assert payload["rollout_data"]["sample_indices"] == list(result.shard_sample_indices[coords.dp])
    shards = sorted(i for shard in result.shard_sample_indices for i in shard)
    assert shards == [s["index"] for s in samples]
    for sample, key in itertools.product(samples, CP_FIELDS):
        full = sample[key] if key == "rollout_log_probs" else per_token[key][samples.index(sample)]
        assert np.array_equal(_reassemble(files, layout, sample, key), np.asarray(full, dtype=np.float32))


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_all_ranks_write_and_early_pp_stages_lack_model_outputs(tmp_path: Path, layout: ParallelLayout) -> None:
    samples, per_token = _batch(seed=1)
    write_step(tmp_path, 0, samples, per_token, layout, writers="all")
    files = _files(tmp_path, 0)
    assert set(files) == set(range(layout.world_size))
    for rank, payload in files.items():
        coords = layout.coords(rank)
        columns = set(payload["rollout_data"])
        if coords.pp == layout.pp - 1:
            assert set(MODEL_OUTPUT_KEYS) <= columns
        else:
            assert not set(MODEL_OUTPUT_KEYS) & columns
            assert {"rollout_log_probs", "loss_masks", "raw_reward"} <= columns
        twin = files[layout.rank_of(cp=coords.cp, dp=coords.dp, pp=coords.pp)]
        _assert_same(payload["rollout_data"], twin["rollout_data"])  # TP peers hold identical data
    for sample in samples:
        got = _reassemble(files, layout, sample, "log_probs")
        assert np.array_equal(got, np.asarray(per_token["log_probs"][samples.index(sample)], dtype=np.float32))


def test_thd_files_have_the_golden_keys(tmp_path: Path, golden_train: Any) -> None:
    samples, per_token = _batch(seed=5)
    write_step(tmp_path, 0, samples, per_token, ParallelLayout(tp=2, pp=2, cp=2, dp=2))
    gold = golden_train["thd"]
    for payload in _files(tmp_path, 0).values():
        assert list(payload) == list(gold)
        assert list(payload["rollout_data"]) == list(gold["rollout_data"])


def test_bshd_pads_max_seq_lens_and_matches_golden_keys(tmp_path: Path, golden_train: Any) -> None:
    layout = ParallelLayout(tp=2, cp=2, dp=2)
    samples, per_token = _batch(seed=2)
    write_step(tmp_path, 1, samples, per_token, layout, qkv_format="bshd", data_pad_size_multiplier=8)
    files = _files(tmp_path, 1)
    gold = golden_train["bshd"]
    for payload in files.values():
        rows = payload["rollout_data"]
        assert list(payload) == list(gold) and list(rows) == list(gold["rollout_data"])
        assert payload["qkv_format"] == "bshd"
        padded = -(-max(rows["total_lengths"]) // 16) * 16  # tp * data_pad_size_multiplier
        assert rows["max_seq_lens"] == [padded] * len(rows["tokens"])
    for sample, key in itertools.product(samples, CP_FIELDS):
        full = sample[key] if key == "rollout_log_probs" else per_token[key][samples.index(sample)]
        assert np.array_equal(_reassemble(files, layout, sample, key), np.asarray(full, dtype=np.float32))


def test_legacy_files_lack_cp_keys_like_golden_legacy(tmp_path: Path, golden_train: Any) -> None:
    samples, per_token = _batch(seed=3)
    layout = ParallelLayout(cp=2, dp=2)
    write_step(tmp_path, 0, samples, per_token, layout, writers="all", legacy=True)
    gold = golden_train["legacy"]
    for payload in _files(tmp_path, 0).values():
        assert list(payload) == list(gold) == ["rollout_id", "rank", "rollout_data"]
        assert list(payload["rollout_data"]) == list(gold["rollout_data"])
    with pytest.raises(ValueError, match="writers='all'"):
        write_step(tmp_path, 1, samples, per_token, layout, legacy=True)


def test_columns_have_golden_types(tmp_path: Path, golden_train: Any) -> None:
    samples, per_token = _batch(seed=4)
    write_step(tmp_path, 0, samples, per_token, ParallelLayout(dp=2))
    rows = _files(tmp_path, 0)[0]["rollout_data"]
    gold = golden_train["thd"]["rollout_data"]
    for key, value in rows.items():
        if isinstance(value, np.ndarray):
            assert value.dtype == gold[key].dtype, key
        else:
            assert type(value[0]) is type(gold[key][0]), key
            if isinstance(value[0], np.ndarray):
                assert value[0].dtype == gold[key][0].dtype, key
    assert rows["raw_reward"] == [float(s["reward"]) for s in samples]  # batch-global, rollout order
    assert rows["tokens"][0].dtype == np.int64 and rows["loss_masks"][0].dtype == np.int32
    removed = rows["sample_indices"].index(105) if 105 in rows["sample_indices"] else None
    if removed is not None:
        assert not rows["loss_masks"][removed].any() and rows["rollout_mask_sums"][removed] == 0


def test_write_step_refuses_inconsistent_input(tmp_path: Path) -> None:
    samples, per_token = _batch()
    short = {**per_token, "entropy": [v[:-1] for v in per_token["entropy"]]}
    with pytest.raises(ValueError, match="entropy"):
        write_step(tmp_path, 0, samples, short, ParallelLayout())
    with pytest.raises(ValueError, match="per token"):
        write_step(tmp_path, 0, samples, {"values": per_token["entropy"]}, ParallelLayout())
    with pytest.raises(ValueError, match="equal DP shards"):
        write_step(tmp_path, 0, samples[:7], {}, ParallelLayout(dp=2))


# --- golden reproduction -------------------------------------------------------------------------

# Steps whose golden files cannot give back the full per-token values to rebuild them from.
UNREBUILDABLE = {("cp_missing_rank", "1"): "rank 1 file dropped", ("truncated_shard", "1"): "1_1.pt is cut"}


def _same(a: Any, b: Any, where: str) -> None:
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            _same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b), where
    elif isinstance(a, float):
        assert type(b) is float and b == pytest.approx(a, rel=1e-6, abs=1e-7), where
    else:
        assert type(a) is type(b) and a == b, where


def _assert_same(a: Any, b: Any) -> None:
    _same(a, b, "rollout_data")


@pytest.mark.parametrize("case", TRAIN_CASES)
def test_write_step_rebuilds_golden_train_files(tmp_path: Path, case: str) -> None:
    meta = json.loads((GOLDEN / f"{case}.truth.json").read_text())["meta"]
    par = meta["parallel"]
    layout = ParallelLayout(tp=par["tp"], pp=par["pp"], cp=par["cp"], dp=par["dp"])
    for rid, record in meta["write_record"]["steps"].items():
        if (case, rid) in UNREBUILDABLE:
            continue
        rollout = load_pt(GOLDEN / case / "rollout_data" / f"{rid}.pt")
        # RewardSpec loads as an inert record that torch cannot pickle back; train files never hold it.
        samples = [{**s, "reward_spec": None} for s in rollout["samples"]]
        golden = _files(GOLDEN / case, int(rid))
        per_token = {k: [_reassemble(golden, layout, s, k) for s in samples] for k in MODEL_OUTPUT_KEYS}
        result = write_step(
            tmp_path / rid, int(rid), samples, per_token, layout,
            qkv_format=par["qkv_format"], writers=par["writers"], legacy=par["file_format"].startswith("legacy"),
            advantage_estimator=meta["advantage_estimator"], rollout_metadata=rollout["metadata"],
            data_pad_size_multiplier=32,  # what the golden generator ran with (miles' default is 128)
        )  # fmt: skip
        assert [list(s) for s in result.shard_sample_indices] == record["shard_sample_indices"]
        assert [f.coords.rank for f in result.files] == [w["rank"] for w in record["written_ranks"]]
        for written in result.files:
            gold_path = GOLDEN / case / "train_data" / written.path.name
            if gold_path.exists():
                _same(load_pt(gold_path), load_pt(written.path), f"{case}/{written.path.name}")
        assert result.rollout_path is not None
        _same({**rollout, "samples": samples}, load_pt(result.rollout_path), f"{case}/rollout {rid}")


# --- the other writers ---------------------------------------------------------------------------


def test_make_sample_has_golden_sample_keys(tmp_path: Path) -> None:
    golden = load_pt(GOLDEN / "tp_dup" / "rollout_data" / "0.pt")
    assert tuple(golden["samples"][0]) == SAMPLE_KEYS
    sample = make_sample(index=7, rollout_routed_experts=np.arange(6, dtype=np.int32).reshape(3, 2), custom="kept")
    path = save_rollout(tmp_path, 4, [sample], evaluation=True)
    assert path == tmp_path / "rollout_data" / "eval_4.pt"
    loaded = load_pt(path)
    assert loaded["rollout_id"] == 4 and loaded["metadata"] == {}
    assert tuple(loaded["samples"][0]) == (*SAMPLE_KEYS, "custom")
    assert loaded["samples"][0]["rollout_routed_experts"].dtype == np.int32


def test_save_train_shard_reads_back_exactly(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")

    data = {
        "tokens": [torch.arange(5)],
        "loss_masks": [np.array([1, 0, 1], dtype=np.int32)],  # numpy is saved as a tensor too
        "rollout_mask_sums": torch.tensor([2.0]),
        "weight_versions": [["7", "default"]],
        "raw_reward": [0.5, 1.0],
        "log_probs": [torch.tensor([-0.25, -1.5, -3.0])],
    }
    kwargs = {"rank": 6, "tp_rank": 0, "pp_rank": 1, "pp_size": 2, "cp_rank": 1, "cp_size": 2, "qkv_format": "thd"}
    path = save_train_shard(tmp_path, 2, data, **kwargs)  # type: ignore[arg-type]
    assert path == tmp_path / "train_data" / "2_6.pt"
    loaded = load_pt(path)
    assert [loaded[k] for k in ("rollout_id", "rank", *SHARD_LAYOUT_KEYS)] == [2, 6, 1, 2, "thd"]
    rows = loaded["rollout_data"]
    assert np.array_equal(rows["tokens"][0], np.arange(5)) and rows["tokens"][0].dtype == np.int64
    assert rows["loss_masks"][0].dtype == np.int32
    assert rows["log_probs"][0].tolist() == [-0.25, -1.5, -3.0]
    assert rows["weight_versions"] == [["7", "default"]] and rows["raw_reward"] == [0.5, 1.0]
    assert save_train_shard(tmp_path, 2, data, **{**kwargs, "tp_rank": 1}) is None  # type: ignore[arg-type]
    assert save_train_shard(tmp_path, 2, data, **{**kwargs, "pp_rank": 0}) is None  # type: ignore[arg-type]


def test_atomic_write_leaves_no_temp_file_and_no_half_file(tmp_path: Path) -> None:
    samples, per_token = _batch()
    write_step(tmp_path, 0, samples, per_token, ParallelLayout(dp=2))
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".")]
    unpicklable = {"tokens": [lambda: None]}
    with pytest.raises(Exception):  # noqa: B017 - whatever pickle raises, nothing may be left behind
        save_train_shard(
            tmp_path, 9, unpicklable, rank=0, tp_rank=0, pp_rank=0, pp_size=1, cp_rank=0, cp_size=1, qkv_format="thd"
        )
    assert sorted(os.listdir(tmp_path / "train_data")) == ["0_0.pt", "0_1.pt"]
    plain = tmp_path / "plain"
    plain.write_bytes(b"")  # the atomic temp file must not narrow the umask's mode (mkstemp's 0600)
    assert (tmp_path / "train_data" / "0_0.pt").stat().st_mode == plain.stat().st_mode


def test_non_atomic_write_can_simulate_a_crash_mid_save(tmp_path: Path) -> None:
    samples, per_token = _batch()
    result = write_step(tmp_path, 1, samples, per_token, ParallelLayout(dp=2), atomic=False)
    path = result.files[1].path
    path.write_bytes(path.read_bytes()[: int(path.stat().st_size * 0.6)])
    with pytest.raises(CorruptFileError):
        load_pt(path)
    assert load_pt(result.files[0].path)["rank"] == 0


def test_policy_loss_debug_only_from_tp_rank_0(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")

    payload = {"samples": [{"index": 0, "train_log_probs": torch.tensor([-0.5])}], "pg_loss": torch.tensor(0.25)}
    assert save_policy_loss_debug(tmp_path, rank=1, tp_rank=1, call=0, payload=payload) is None
    path = save_policy_loss_debug(tmp_path, rank=2, tp_rank=0, call=3, payload=payload)
    assert path == tmp_path / "policy_loss_debug" / "rank_2_call_3.pt"
    loaded = load_pt(path)
    assert (loaded["rank"], loaded["call"], float(loaded["pg_loss"])) == (2, 3, 0.25)
    assert loaded["samples"][0]["train_log_probs"].tolist() == [-0.5]


def test_trajectory_sidecar_lines_parse_like_golden(tmp_path: Path) -> None:
    golden = [json.loads(line) for line in (GOLDEN / "tp_dup" / "trajectory" / "0.jsonl").read_text().splitlines()]
    path = write_trajectory(tmp_path, 0, golden)
    assert path == tmp_path / "trajectory" / "0.jsonl"
    assert [json.loads(line) for line in path.read_text().splitlines()] == golden
    assert write_trajectory(tmp_path, 3, golden[:1], evaluation=True).name == "eval_3.jsonl"
    append_jsonl(tmp_path / "s.jsonl", [{"a": 1}])
    append_jsonl(tmp_path / "s.jsonl", [{"a": 2}, {"a": 3}])
    assert (tmp_path / "s.jsonl").read_text() == '{"a":1}\n{"a":2}\n{"a":3}\n'


# --- the math ------------------------------------------------------------------------------------


@given(st.lists(st.integers(1, 10_000), min_size=0, max_size=48), st.sampled_from([1, 2, 3, 4, 8]))
def test_balanced_partitions_split_every_position_once(lengths: list[int], k: int) -> None:
    lengths = lengths[: len(lengths) - len(lengths) % k]
    parts = balanced_partitions(lengths, k)
    assert len(parts) == k
    assert sorted(i for part in parts for i in part) == list(range(len(lengths)))
    assert all(part == sorted(part) and len(part) == len(lengths) // k for part in parts)


def test_balanced_partitions_need_equal_sizes() -> None:
    with pytest.raises(ValueError, match="3 samples into 2"):
        balanced_partitions([1, 2, 3], 2)


def test_normalize_rewards() -> None:
    grpo = normalize_rewards([1.0, 0.0, 1.0, 1.0, 0.5], [0, 0, 1, 1, None], "grpo")
    assert grpo[:2] == pytest.approx([0.70710, -0.70710], abs=1e-4)
    assert grpo[2:] == [0.0, 0.0, 0.0]  # zero-std group and one-sample group
    assert normalize_rewards([1.0, 0.0], [0, 0], "reinforce_plus_plus_baseline") == [0.5, -0.5]
    assert normalize_rewards([1.0, 0.0], [0, 0], "ppo") == [1.0, 0.0]


def test_importing_the_writer_does_not_import_torch() -> None:
    code = "import sys, miles_tui.core.synth.writer, miles_tui.core.synth.demo; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
