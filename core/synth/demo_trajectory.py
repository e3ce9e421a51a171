"""The demo's ``dashboard/trajectories/`` events: each sample's lifecycle as miles' rollout probes write it.

Per sample, as ``TrajectorySink`` emits them: ``attempt_start`` when it starts waiting for the rollout's
semaphore, then for a single-turn sample a coarse ``gen_start`` (turn -1) closed by ``attempt_end`` (no
``gen_end``: the attempt ending closes it); for a multi-turn one a ``gen_start``/``gen_end`` pair per turn
(1-based) with a ``tool_start``/``tool_end`` pair between turns ("agent gap"); ``attempt_end`` last, its
``detail`` the sample's status. Times fall in the step's rollout window; they come from a generator seeded by
the step alone, so the demo's other content (drawn from the shared generator) does not change with them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np

SEED: Final = 0x7A1E
"""Mixed with the step id: the events of a step are the same on every run of the demo."""


def _event(ts: float, kind: str, sample: Mapping[str, Any], turn: int, version: str, detail: str) -> dict[str, Any]:
    return {
        "ts": round(ts, 3),
        "kind": kind,
        "sample_index": sample["index"],
        "group_index": sample["group_index"],
        "turn": turn,
        "weight_version": version,
        "detail": detail,
    }


def _turn_lengths(sample: Mapping[str, Any]) -> list[int]:
    """Tokens generated per turn: the loss mask's runs of ones (one turn when there is no mask)."""
    mask = sample.get("loss_mask")
    if not mask:
        return [int(sample["response_length"])]
    runs: list[int] = []
    previous = 0
    for value in mask:
        if value and not previous:
            runs.append(0)
        if value:
            runs[-1] += 1
        previous = value
    return runs or [int(sample["response_length"])]


def sample_events(
    sample: Mapping[str, Any], start: float, end: float, rng: np.random.Generator
) -> list[dict[str, Any]]:
    """One sample's events between ``start`` (the rollout began) and ``end`` (the rollout ended)."""
    span = end - start
    queued = start + float(rng.uniform(0.0, 0.35)) * span
    versions = [str(v) for v in sample.get("weight_versions") or [""]]
    turns = _turn_lengths(sample)
    finish = queued + float(rng.uniform(0.25, 1.0)) * (end - queued)
    budget = finish - queued
    tool_share = 0.3 if len(turns) > 1 else 0.0
    tokens = max(sum(turns), 1)
    events = [_event(start + float(rng.uniform(0, 0.02)) * span, "attempt_start", sample, -1, "", "")]
    clock = queued
    if len(turns) == 1:
        events.append(_event(clock, "gen_start", sample, -1, "", ""))
    else:
        for number, length in enumerate(turns, start=1):
            version = versions[min(number - 1, len(versions) - 1)]
            gen_end = clock + budget * (1 - tool_share) * length / tokens
            events.append(_event(clock, "gen_start", sample, number, version, ""))
            events.append(_event(gen_end, "gen_end", sample, number, version, ""))
            clock = gen_end
            if number < len(turns):
                tool_end = clock + budget * tool_share / (len(turns) - 1)
                events.append(_event(clock, "tool_start", sample, number, "", "agent gap"))
                events.append(_event(tool_end, "tool_end", sample, number, "", "agent gap"))
                clock = tool_end
    events.append(_event(finish, "attempt_end", sample, -1, versions[-1], str(sample["status"])))
    return events


def step_events(rid: int, samples: Sequence[Mapping[str, Any]], start: float, end: float) -> list[dict[str, Any]]:
    """Every sample's events of step ``rid``, in time order (as the sink's batches land)."""
    rng = np.random.default_rng([SEED, rid])
    events = [event for sample in samples for event in sample_events(sample, start, end, rng)]
    return sorted(events, key=lambda event: event["ts"])
