"""The two forms of a sample's ``spec_info`` and ``weight_versions`` that miles writes, for fixtures.

Contract:

- :func:`spec_info` builds the counters dict under the key set of either
  miles release: ``"legacy"`` (``spec_accept_token_num``,
  ``spec_draft_token_num``, ``spec_verify_ct``, ``completion_token_num``) or
  ``"current"`` (miles PR #2598: ``spec_num_correct_drafts``,
  ``spec_num_proposed_drafts``, ``spec_verify_ct``, ``completion_tokens``),
  key for key what ``Sample.SpecInfo.to_dict`` writes.
- :func:`span_calls` turns the flat one-version-per-call list into miles'
  per-call span lists (``[[{"version", "abs_start", "abs_end"}], ...]``, what
  ``Sample.to_dict`` writes after the per-call span refactor): the response
  of ``response_length`` tokens ending at ``total_length`` is cut into one
  contiguous run of tokens per call, each call one span of its version.
- :func:`train_weight_versions` is the train shard's ``weight_versions`` cell
  of one sample: the flat list as strings, anything else (the span lists) as written.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Literal

SpecKeys = Literal["legacy", "current"]


def spec_info(
    accepted: int, drafted: int, verify_ct: int, completion_tokens: int, keys: SpecKeys = "legacy"
) -> dict[str, int]:
    """A ``spec_info`` dict under the ``keys`` of one miles release."""
    if keys == "current":
        return {
            "spec_num_correct_drafts": accepted,
            "spec_num_proposed_drafts": drafted,
            "spec_verify_ct": verify_ct,
            "completion_tokens": completion_tokens,
        }
    return {
        "spec_accept_token_num": accepted,
        "spec_draft_token_num": drafted,
        "spec_verify_ct": verify_ct,
        "completion_token_num": completion_tokens,
    }


def span_calls(versions: Sequence[Any], total_length: int, response_length: int) -> list[list[dict[str, Any]]]:
    """One call per version, each one span over its share of the response (a call with no token has no span)."""
    calls: list[list[dict[str, Any]]] = []
    start = total_length - response_length
    n = len(versions)
    for i, version in enumerate(versions):
        begin = start + response_length * i // n
        end = start + response_length * (i + 1) // n
        calls.append([{"version": str(version), "abs_start": begin, "abs_end": end}] if begin < end else [])
    return calls


def train_weight_versions(weight_versions: Sequence[Any] | None) -> list[Any]:
    """A sample's ``weight_versions`` as miles puts it in the train shard's column."""
    values = list(weight_versions or [])
    if all(isinstance(v, str | int) and not isinstance(v, bool) for v in values):
        return [str(v) for v in values]
    return copy.deepcopy(values)
