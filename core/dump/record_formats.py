"""The shapes a rollout sample's ``spec_info`` and ``weight_versions`` come in, and what is read from each.

Contract:

- ``spec_info`` is a dict of counters under either key set miles has written:
  ``spec_accept_token_num`` / ``spec_draft_token_num`` (before miles PR #2598)
  or ``spec_num_correct_drafts`` / ``spec_num_proposed_drafts`` (after it).
  Each counter is read under its new name first, then its old one, as miles'
  own ``SpecInfo.from_dict`` does. An empty dict or None holds no counters.
- ``weight_versions`` is either the flat list of one version per generation
  call (``["3", "4"]``) or, after miles' per-call span refactor, one list per
  call of spans ``{"version", "abs_start", "abs_end"}``. The versions read
  from spans are every span's version in call and span order; the turns are
  the calls (a call the engine never stamped has no span but is a turn), as
  miles' ``_weight_version_summary`` counts them. With one span per call the
  two forms give the same versions, so staleness, the last version and
  ``mixed_version`` are the same figures.
- ``prefix_cache_info`` holds ``cached_tokens`` and ``total_prompt_tokens``.
- Any other shape is :class:`Unrecognised`: the reader does not guess, the
  ROW columns derived from that field (:data:`DERIVED_COLUMNS`) read
  :data:`UNKNOWN_FORMAT`, and the step's advisory names the field.
- Pure functions of values already type-checked by
  :mod:`miles_tui.core.dump.record_schema`; never raise on any input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

UNKNOWN_FORMAT: Final = "unknown format"
"""What a cell derived from a field of an unrecognised shape reads, in the monitor and in ``export``."""

SPEC_COUNTERS: Final = (
    ("spec_num_correct_drafts", "spec_accept_token_num"),
    ("spec_num_proposed_drafts", "spec_draft_token_num"),
)
"""(current name, name before miles PR #2598) of the accepted and the drafted counter."""

SPAN_KEYS: Final = frozenset({"version", "abs_start", "abs_end"})
"""The keys of one weight-version span (miles' ``WeightVersionSpan``)."""

PREFIX_COUNTERS: Final = ("cached_tokens", "total_prompt_tokens")
"""The counters of a ``prefix_cache_info`` (miles' ``PrefixCacheInfo``)."""

DERIVED_COLUMNS: Final[Mapping[str, tuple[str, ...]]] = {
    "spec_info": ("spec_accept_rate",),
    "prefix_cache_info": ("prefix_cache_hit_rate",),
    "weight_versions": ("weight_version", "weight_version_min", "mixed_version", "staleness", "turns"),
}
"""Record field -> the ROW columns computed from it."""


@dataclass(frozen=True, slots=True)
class Unrecognised:
    """A field whose shape this reader does not know."""

    field: str
    """The record's key (``spec_info``, ``weight_versions``)."""


@dataclass(frozen=True, slots=True)
class Versions:
    """What a sample's ``weight_versions`` says."""

    versions: tuple[Any, ...]
    """Every version in generation order (str or int, as dumped)."""
    turns: int
    """Generation calls."""


def _counter(spec: Mapping[str, Any], names: tuple[str, str]) -> tuple[bool, Any]:
    """(found, value) of one counter, under its current name first."""
    for name in names:
        if name in spec:
            return True, spec[name]
    return False, None


def spec_counts(spec: Any) -> tuple[Any, Any] | Unrecognised:
    """(accepted, drafted) counters of a ``spec_info`` (None, None when it holds none)."""
    if not spec:
        return None, None
    if not isinstance(spec, Mapping):
        return Unrecognised("spec_info")
    (has_accepted, accepted), (has_drafted, drafted) = (_counter(spec, names) for names in SPEC_COUNTERS)
    if not (has_accepted and has_drafted):
        return Unrecognised("spec_info")
    return accepted, drafted


def prefix_counts(info: Any) -> tuple[Any, Any] | Unrecognised:
    """(cached, prompt) token counters of a ``prefix_cache_info`` (None, None when it holds none)."""
    if not info:
        return None, None
    if not isinstance(info, Mapping) or not all(name in info for name in PREFIX_COUNTERS):
        return Unrecognised("prefix_cache_info")
    return info[PREFIX_COUNTERS[0]], info[PREFIX_COUNTERS[1]]


def _is_version(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _is_span(value: Any) -> bool:
    return isinstance(value, Mapping) and value.keys() >= SPAN_KEYS and _is_version(value["version"])


def read_versions(weight_versions: Any) -> Versions | Unrecognised:
    """The versions and turns of a ``weight_versions`` in either form (empty or None: none, no turns)."""
    if not weight_versions:
        return Versions((), 0)
    if not isinstance(weight_versions, Sequence) or isinstance(weight_versions, str):
        return Unrecognised("weight_versions")
    if all(_is_version(v) for v in weight_versions):
        return Versions(tuple(weight_versions), len(weight_versions))
    calls = list(weight_versions)
    if all(isinstance(call, list | tuple) and all(_is_span(s) for s in call) for call in calls):
        return Versions(tuple(span["version"] for call in calls for span in call), len(calls))
    return Unrecognised("weight_versions")


def unknown_columns(unknown_format: str | None) -> frozenset[str]:
    """The ROW columns that read :data:`UNKNOWN_FORMAT`, from a row's ``unknown_format`` (space-separated fields)."""
    if not unknown_format:
        return frozenset()
    return frozenset(column for name in unknown_format.split() for column in DERIVED_COLUMNS.get(name, ()))


def marked(record: dict[str, Any]) -> dict[str, Any]:
    """A ROW dict (``SampleRow.to_dict()``) with each column of an unrecognised field set to :data:`UNKNOWN_FORMAT`."""
    for column in unknown_columns(record.get("unknown_format")):
        record[column] = UNKNOWN_FORMAT
    return record
