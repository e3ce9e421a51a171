"""10 min buckets from the 1 min cells (gpu_buckets.coarsen) equal those made from the samples themselves."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.telemetry.hours.decode import decode
from miles_tui.core.telemetry.hours.gpu_buckets import coarsen, gpu_buckets, hour_buckets

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
