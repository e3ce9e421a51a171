"""The rollout table's `/` filter language, parsed into a predicate over core's SampleRow.

Terms are separated by spaces and must all hold:
- ``COLUMN OP VALUE`` with OP one of ``= != > >= < <= ~`` (``~`` is substring),
  e.g. ``reward>0.5``, ``stale>=2``, ``status=truncated``, ``version~v1``;
- a bare word: a status (``truncated``, ``aborted`` ...), ``unreadable`` (per-token
  data could not be placed), ``mixed`` (several weight versions), ``removed``,
  ``zero-std`` (in a degenerate group), or ``not-WORD`` for the opposite.
A value compared with a missing (None) cell never matches.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from miles_tui.core.dump.summary import ROW_COLUMNS, SampleRow

ALIASES = {
    "idx": "sample_index",
    "sample": "sample_index",
    "index": "sample_index",
    "group": "group_index",
    "grp": "group_index",
    "stale": "staleness",
    "len": "response_length",
    "length": "response_length",
    "total": "total_length",
    "raw": "raw_reward",
    "norm": "normalized_reward",
    "version": "weight_version",
    "ver": "weight_version",
    "trunc": "truncated",
    "removed": "remove_sample",
    "align": "alignment_failed",
    "unreadable": "alignment_failed",
    "lp": "mean_abs_lp_diff",
    "lpdiff": "mean_abs_lp_diff",
    "maxlp": "max_abs_lp_diff",
    "ratio": "mean_imp_ratio",
    "ent": "mean_entropy",
    "entropy": "mean_entropy",
    "adv": "adv_mean",
    "rank": "dumped_rank",
    "tools": "tool_calls",
}
STATUSES = ("pending", "completed", "truncated", "aborted", "failed")
_TERM = re.compile(r"^([a-z_]+)(>=|<=|!=|=|>|<|~)(.*)$")
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}

Predicate = Callable[[SampleRow], bool]


class FilterError(ValueError):
    """A filter the user typed that does not parse; the message says why."""


@dataclass(frozen=True)
class RowFilter:
    """A parsed filter: the text it came from and its predicate."""

    text: str
    """What the user typed."""
    predicate: Predicate
    """True for rows to keep."""

    def __call__(self, row: SampleRow) -> bool:
        return self.predicate(row)


def _coerce(raw: str) -> Any:
    lowered = raw.lower()
    if lowered in ("true", "yes"):
        return True
    if lowered in ("false", "no"):
        return False
    if lowered in ("none", "null", "-", "–"):
        return None
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        return float(raw)
    except ValueError:
        return raw


def _compare(column: str, op: str, raw: str) -> Predicate:
    value = _coerce(raw)

    def check(row: SampleRow) -> bool:
        cell = getattr(row, column)
        if op == "~":
            return cell is not None and raw.lower() in str(cell).lower()
        if value is None:
            return (cell is None) == (op == "=")
        if cell is None:
            return False
        if isinstance(value, str) or isinstance(cell, str):
            left, right = str(cell).lower(), str(value).lower()
            if op in ("=", "!="):
                return _OPS[op](left, right)
            raise FilterError(f"{column} is text: use = != or ~")
        try:
            return bool(_OPS[op](cell, value))
        except TypeError as err:
            raise FilterError(f"cannot compare {column} with {raw!r}") from err

    return check


def _word(word: str, zero_std_groups: Collection[int | None]) -> Predicate:
    negate = word.startswith(("not-", "!"))
    base = word.removeprefix("not-").removeprefix("!")
    predicate: Predicate
    if base in STATUSES:

        def predicate(row: SampleRow) -> bool:
            return row.status == base or (base == "truncated" and row.truncated)

    elif base in ("unreadable", "misaligned", "alignment_failed"):

        def predicate(row: SampleRow) -> bool:
            return row.alignment_failed

    elif base in ("mixed", "mixed_version"):

        def predicate(row: SampleRow) -> bool:
            return row.mixed_version

    elif base in ("removed", "remove_sample"):

        def predicate(row: SampleRow) -> bool:
            return row.remove_sample

    elif base in ("zero-std", "zero_std", "degenerate"):

        def predicate(row: SampleRow) -> bool:
            return row.group_index in zero_std_groups

    else:
        raise FilterError(
            f"unknown word {base!r}: try a status ({', '.join(STATUSES)}), unreadable, mixed, removed, "
            "zero-std, or COLUMN>VALUE"
        )
    if negate:
        return lambda row: not predicate(row)
    return predicate


def parse_filter(text: str, zero_std_groups: Collection[int | None] = ()) -> RowFilter | None:
    """Parse the filter text; None for an empty filter; FilterError for one that does not parse."""
    terms = text.strip().lower().split()
    if not terms:
        return None
    predicates: list[Predicate] = []
    for term in terms:
        match = _TERM.match(term)
        if match:
            name, op, raw = match.groups()
            column = ALIASES.get(name, name)
            if column not in ROW_COLUMNS:
                raise FilterError(f"unknown column {name!r}")
            if not raw:
                raise FilterError(f"{term!r} needs a value after {op}")
            predicates.append(_compare(column, op, raw))
        else:
            predicates.append(_word(term, zero_std_groups))

    def all_hold(row: SampleRow) -> bool:
        return all(p(row) for p in predicates)

    return RowFilter(text.strip(), all_hold)
