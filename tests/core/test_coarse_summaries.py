"""10 min GPU buckets and phase covers from the 1 min cells equal those made from the samples and phases themselves."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.telemetry.hours.decode import decode
from miles_tui.core.telemetry.hours.gpu_buckets import coarsen, gpu_buckets, hour_buckets
from miles_tui.core.telemetry.hours.phase_cover import hour_covers, phase_cover

HOUR = 1787223600.0
VALUE = st.one_of(st.none(), st.integers(0, 100), st.floats(-1e6, 1e6, allow_nan=False), st.just("x"))
SAMPLE = st.fixed_dictionaries(
    {"ts": st.floats(HOUR - 1200, HOUR + 4800, allow_nan=False), "node": st.sampled_from(["a", "b"]),
     "gpu": st.integers(0, 3), "util": VALUE, "mem_mb": VALUE, "power_w": VALUE}
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(st.lists(SAMPLE, min_size=0, max_size=120))
def test_coarse_buckets_from_fine_cells_equal_buckets_from_samples(samples: list[dict[str, object]]) -> None:
    columns, _ = decode("gpu_util", "\n".join(json.dumps(s) for s in samples).encode(), 0, "x")
    direct = gpu_buckets(columns, 600.0)
    derived = hour_buckets(columns)[600.0]
    assert derived.lanes == direct.lanes
    assert derived.lane.tolist() == direct.lane.tolist() and derived.bucket.tolist() == direct.bucket.tolist()
    assert derived.samples.tolist() == direct.samples.tolist()
    assert np.array_equal(derived.last_seen, direct.last_seen)
    for name, array in direct.stats.items():
        if name.endswith(".sum"):  # the same values added in another order
            assert np.allclose(derived.stats[name], array, rtol=1e-12, atol=1e-6), name
        else:
            assert np.array_equal(derived.stats[name], array, equal_nan=True), name


def test_a_width_that_is_not_a_multiple_is_refused() -> None:
    columns, _ = decode("gpu_util", b'{"ts": 1.0, "node": "a", "gpu": 0, "util": 1}', 0, "x")
    with pytest.raises(ValueError, match="not a multiple"):
        coarsen(gpu_buckets(columns, 60.0), 90.0)


PHASE = st.fixed_dictionaries(
    {"name": st.sampled_from(["gen", "train"]), "t0": st.floats(HOUR - 900, HOUR + 3600, allow_nan=False),
     "dt": st.floats(0, 2000, allow_nan=False), "node": st.sampled_from(["a", "b"]), "rank": st.integers(-1, 3),
     "gpus": st.sampled_from([[0], [1, 2], []]), "role": st.sampled_from(["train", "rollout"])}
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(st.lists(PHASE, min_size=0, max_size=60))
def test_coarse_phase_covers_from_fine_cells_equal_covers_from_phases(phases: list[dict[str, object]]) -> None:
    lines = [json.dumps({**{k: v for k, v in p.items() if k != "dt"}, "t1": p["t0"] + p["dt"]}) for p in phases]  # type: ignore[operator]
    columns, _ = decode("phases", "\n".join(lines).encode(), 0, "x")
    direct = phase_cover(columns, 600.0)
    derived = hour_covers(columns, (60.0, 600.0))[600.0]
    assert derived.pairs == direct.pairs
    assert derived.pair.tolist() == direct.pair.tolist() and derived.bucket.tolist() == direct.bucket.tolist()
    assert np.allclose(derived.seconds, direct.seconds, rtol=1e-9, atol=1e-6)
