"""The writer's gate under a real process group (seed 000): 16 torch.distributed processes.

Each process is one rank of a tp2 × pp2 × cp2 × dp2 job (gloo, CPU). It learns
its coordinates from the process group (a DeviceMesh in Megatron's
tp-cp-dp-pp order, tp fastest), never from a loop over ranks or from
``ParallelLayout``, and does what a miles rank does at the end of a step: it
hands its (DP, CP) shard to ``miles_tui.core.synth.writer.save_train_shard`` and its policy-loss
record to ``save_policy_loss_debug``, whose gates decide whether it writes.
Afterwards: exactly one train file per (DP, CP) shard, each written by TP rank 0
of the last PP stage; policy-loss files from TP rank 0 only; and the reader
resolves the step exactly (every per-token value, every sample, no
alignment failure), as it does the same step written by ``write_step``.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from miles_tui.core.commands.export import step_export
from miles_tui.core.dump import Run
from miles_tui.core.synth.dump_files import make_sample, save_policy_loss_debug, save_rollout, save_train_shard
from miles_tui.core.synth.layout import MODEL_OUTPUT_KEYS, ParallelLayout
from miles_tui.core.synth.writer import rank_columns, write_step
from tests.conftest import EPOCH, stamp

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not (dist.is_available() and dist.is_gloo_available()):
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

SIZES = {"pp": 2, "dp": 2, "cp": 2, "tp": 2}
"""Mesh dimensions, slowest first: rank = tp + 2·(cp + 2·(dp + 2·pp)), Megatron's tp-cp-dp-pp order."""
WORLD = 16
ROLLOUT_ID = 7
LAYOUT = ParallelLayout(tp=2, pp=2, cp=2, dp=2)


def _batch() -> tuple[list[dict[str, Any]], dict[str, list[np.ndarray]]]:
    """The step every rank sees (deterministic): 8 samples in groups of 2, masked spans, a 1-token response."""
    rng = np.random.default_rng(2024)
    samples, per_token = [], {key: [] for key in MODEL_OUTPUT_KEYS}
    for i in range(8):
        prompt, length = int(rng.integers(2, 12)), 1 if i == 3 else int(rng.integers(2, 48))
        mask = [1] * length
        if length > 8 and i % 2:
            mask[3:6] = [0, 0, 0]
        samples.append(
            make_sample(
                index=70 + i,
                group_index=i // 2,
                tokens=[int(t) for t in rng.integers(0, 100, prompt + length)],
                response_length=length,
                reward=float(rng.integers(0, 2)),
                loss_mask=mask,
                weight_versions=["6", "7"] if i % 3 else ["7"],
                rollout_log_probs=[float(v) for v in -rng.random(length)],
            )
        )
        for key in MODEL_OUTPUT_KEYS:
            per_token[key].append(rng.normal(size=length))
    return samples, per_token


def _rank_main(local_rank: int, root: str, rendezvous: str) -> None:
    """One training rank: join the group, find its place in the mesh, dump the step through the gates."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=local_rank, world_size=WORLD)
    try:
        mesh = init_device_mesh("cpu", tuple(SIZES.values()), mesh_dim_names=tuple(SIZES))
        rank = dist.get_rank()
        coords = {name: mesh.get_local_rank(name) for name in SIZES}
        pp_size = mesh.size(list(SIZES).index("pp"))
        samples, per_token = _batch()
        if rank == 0:  # in miles the rollout side writes the rollout file, once
            save_rollout(root, ROLLOUT_ID, samples, metadata={"step": ROLLOUT_ID})
        columns = rank_columns(samples, per_token, LAYOUT, dp_rank=coords["dp"], cp_rank=coords["cp"])
        # TP peers must hold identical data (that is why only one of them writes): check it over the tp group
        digest = torch.tensor([float(np.sum([np.sum(v) for v in columns["log_probs"]]))], dtype=torch.float64)
        peers = [torch.zeros_like(digest) for _ in range(SIZES["tp"])]
        dist.all_gather(peers, digest, group=mesh.get_group("tp"))
        assert all(torch.equal(p, digest) for p in peers)
        train = save_train_shard(
            root, ROLLOUT_ID, columns, rank=rank, tp_rank=coords["tp"], pp_rank=coords["pp"], pp_size=pp_size,
            cp_rank=coords["cp"], cp_size=mesh.size(list(SIZES).index("cp")), qkv_format="thd",
        )  # fmt: skip
        debug = save_policy_loss_debug(
            root, rank=rank, tp_rank=coords["tp"], call=0,
            payload={"samples": columns["sample_indices"], "pg_loss": torch.tensor(0.5), "finite": True},
        )  # fmt: skip
        record = {"rank": rank, **coords, "train": train is not None, "debug": debug is not None}
        (Path(root) / "ranks").mkdir(exist_ok=True)
        (Path(root) / "ranks" / f"{rank}.json").write_text(json.dumps(record))
        dist.barrier()
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def process_group_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    import torch.multiprocessing as mp

    root = tmp_path_factory.mktemp("pg") / "run"
    root.mkdir()
    # fork shares this interpreter's imports (2 s for 16 ranks on 2 cores, against 2+ min to spawn 16
    # fresh interpreters that each import torch) but is only safe while no other thread is running;
    # otherwise a fork server that has imported everything once forks the ranks.
    method = "fork" if threading.active_count() == 1 else "forkserver"
    if method == "forkserver":
        mp.set_forkserver_preload(["torch", "torch.distributed", __name__])
    started = time.perf_counter()
    mp.start_processes(
        _rank_main, args=(str(root), str(root.parent / "rendezvous")), nprocs=WORLD, join=True, start_method=method
    )
    return root, time.perf_counter() - started


def test_one_train_file_per_dp_cp_shard_from_tp0_of_the_last_stage(process_group_run: tuple[Path, float]) -> None:
    root, seconds = process_group_run
    ranks = {r["rank"]: r for r in (json.loads(p.read_text()) for p in (root / "ranks").glob("*.json"))}
    assert sorted(ranks) == list(range(WORLD))  # every rank ran, and their mesh coordinates are distinct
    assert len({(r["tp"], r["cp"], r["dp"], r["pp"]) for r in ranks.values()}) == WORLD
    files = {int(p.stem.split("_")[1]) for p in (root / "train_data").glob(f"{ROLLOUT_ID}_*.pt")}
    writers = {rank for rank, r in ranks.items() if r["train"]}
    assert files == writers
    shards = sorted((ranks[rank]["dp"], ranks[rank]["cp"]) for rank in files)
    assert shards == sorted(itertools.product(range(2), range(2)))  # exactly one per (DP, CP) shard
    assert all(ranks[rank]["tp"] == 0 and ranks[rank]["pp"] == SIZES["pp"] - 1 for rank in files)
    assert 0 not in files  # rank 0 is on the first stage: it never writes, so readers must not wait for it
    # the mesh agrees with the writer's own rank arithmetic
    assert all(LAYOUT.rank_of(tp=r["tp"], cp=r["cp"], dp=r["dp"], pp=r["pp"]) == rank for rank, r in ranks.items())
    debug = {int(p.stem.split("_")[1]) for p in (root / "policy_loss_debug").glob("rank_*_call_0.pt")}
    assert debug == {rank for rank, r in ranks.items() if r["tp"] == 0} and len(debug) == WORLD // 2
    print(f"16 gloo ranks spawned, dumped and joined in {seconds:.1f}s")


def test_the_reader_resolves_the_step_exactly(process_group_run: tuple[Path, float], tmp_path: Path) -> None:
    root, _ = process_group_run
    stamp(root, EPOCH - 3600)
    samples, per_token = _batch()
    opened = Run(root, use_cache=False).open(ROLLOUT_ID, False, EPOCH)
    assert [row.sample_index for row in opened.summary.rows] == [s["index"] for s in samples]
    assert not opened.summary.problems
    for position, sample in enumerate(samples):
        train = opened.train_rows[sample["index"]]
        assert not train.alignment_failed
        for key in MODEL_OUTPUT_KEYS:
            expected = np.asarray(per_token[key][position], dtype=np.float32)
            assert np.array_equal(train.per_token[key], expected), (sample["index"], key)
        assert np.array_equal(train.per_token["rollout_log_probs"], np.float32(sample["rollout_log_probs"]))
        assert train.loss_mask is not None and train.loss_mask.tolist() == sample["loss_mask"]
        assert train.dumped_rank in {8, 10, 12, 14}
    # the same step written in one process by write_step reads back to the same document
    single = tmp_path / "single"
    write_step(single, ROLLOUT_ID, samples, per_token, LAYOUT)
    stamp(single, EPOCH - 3600)
    ours = step_export(Run(root, use_cache=False), ROLLOUT_ID, False, EPOCH, per_token=True)
    theirs = step_export(Run(single, use_cache=False), ROLLOUT_ID, False, EPOCH, per_token=True)
    assert ours == theirs
