"""Runs written by core's own writer in each ``spec_info`` / ``weight_versions`` form miles writes.

``write_drift_run`` writes one step of six samples whose versions cover the cases staleness, version and
mixed turn on (one version, several, repeated, non-numeric, none, an unstamped call), in the legacy form
or in the form of miles' upstream changes (PR #2598's spec keys; per-call span lists), or with a shape no
miles writes (``unknown``). ``EXPECTED`` holds the figures each sample must read, worked out by hand from
miles' rules: staleness = step − min numeric version, version = the last one, mixed = distinct > 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from miles_tui.core.synth.dump_files import make_sample, write_json
from miles_tui.core.synth.layout import ParallelLayout
from miles_tui.core.synth.record_formats import span_calls, spec_info
from miles_tui.core.synth.writer import write_step

Form = Literal["legacy", "current", "unknown"]

STEP = 9
VERSIONS: tuple[list[str], ...] = (["7"], ["6", "8"], ["8", "8"], ["default", "5"], [], ["hotfix"])
"""Each sample's weight version per generation call (legacy form)."""
SPEC = ((3, 5), (0, 4), (2, 2), (0, 0), (1, 8), (5, 10))
"""Each sample's (accepted, drafted) speculative-decoding counters."""

EXPECTED: tuple[dict[str, Any], ...] = (
    {"weight_version": "7", "weight_version_min": 7, "mixed_version": False, "staleness": 2, "turns": 1,
     "spec_accept_rate": 0.6},
    {"weight_version": "8", "weight_version_min": 6, "mixed_version": True, "staleness": 3, "turns": 2,
     "spec_accept_rate": 0.0},
    {"weight_version": "8", "weight_version_min": 8, "mixed_version": False, "staleness": 1, "turns": 2,
     "spec_accept_rate": 1.0},
    {"weight_version": "5", "weight_version_min": 5, "mixed_version": True, "staleness": 4, "turns": 2,
     "spec_accept_rate": None},
    {"weight_version": None, "weight_version_min": None, "mixed_version": False, "staleness": None, "turns": 0,
     "spec_accept_rate": 0.125},
    {"weight_version": "hotfix", "weight_version_min": None, "mixed_version": False, "staleness": None,
     "turns": 1, "spec_accept_rate": 0.5},
)  # fmt: skip
"""What each sample reads in the legacy and the current form."""

UNKNOWN_SPEC = {"accepted_drafts": 3, "proposed_drafts": 5}
"""A ``spec_info`` under keys no miles writes."""
UNKNOWN_PREFIX = {"hit_tokens": 3, "prompt_tokens": 4}
"""A ``prefix_cache_info`` under keys no miles writes (the last sample of the ``unknown`` form)."""
UNKNOWN_VERSIONS = [{"weight_version": "7", "from": 0, "to": 4}]
"""A ``weight_versions`` of a shape no miles writes (flat dicts, not per-call span lists)."""


def _sample(i: int, form: Form) -> dict[str, Any]:
    prompt, response = 3, 4
    versions: list[Any] = list(VERSIONS[i])
    if form == "current":
        versions = span_calls(versions, prompt + response, response)
    elif form == "unknown" and i % 2 == 0:
        versions = UNKNOWN_VERSIONS
    accepted, drafted = SPEC[i]
    spec: dict[str, Any] = spec_info(accepted, drafted, 2, response, "current" if form == "current" else "legacy")
    if form == "unknown" and i < 3:
        spec = UNKNOWN_SPEC
    extra: dict[str, Any] = {}
    if form == "unknown" and i == len(VERSIONS) - 1:
        extra["prefix_cache_info"] = UNKNOWN_PREFIX
    return make_sample(
        index=i,
        group_index=i // 2,
        tokens=list(range(10, 10 + prompt + response)),
        response_length=response,
        reward=float(i % 2),
        weight_versions=versions,
        spec_info=spec,
        **extra,
    )


def write_drift_run(root: Path, form: Form, *, schema_version: int | None = 1) -> Path:
    """One step (``STEP``) of six samples in ``form``; ``dashboard/meta.json`` records ``schema_version``."""
    samples = [_sample(i, form) for i in range(len(VERSIONS))]
    write_step(root, STEP, samples, {}, ParallelLayout(tp=1, pp=1, cp=1, dp=2))
    meta: dict[str, Any] = {"run_name": f"drift-{form}", "start_ts": 1_700_000_000.0, "args": {}}
    if schema_version is not None:
        meta["schema_version"] = schema_version
    write_json(root / "dashboard" / "meta.json", meta)
    return root
