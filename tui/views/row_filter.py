"""The rollout table's `/` filter language, parsed into a predicate over core's SampleRow.

Terms are separated by spaces and must all hold:
- ``COLUMN OP VALUE`` with OP one of ``= != > >= < <= ~`` (``~`` is substring),
  e.g. ``reward>0.5``, ``stale>=2``, ``status=truncated``, ``version~v1``;
  ``version`` matches what the table shows (``v4``, ``v3–v5``) or the dumped
  string (``4``), and ``version>8`` compares numeric versions (digits only);
- a bare word: a status (``truncated``, ``aborted`` ...), ``unreadable`` (per-token
  data could not be placed), ``mixed`` (several weight versions), ``removed``,
  ``zero-std`` (in a degenerate group), or ``not-WORD`` for the opposite.
A value compared with a missing (None) cell never matches. A term that cannot
hold (``status>3``, ``reward>abc``) is a FilterError when the filter is parsed,
never while rows are filtered.
"""

from __future__ import annotations

import difflib
import operator
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from miles_tui.core.dump import ROW_COLUMNS, SampleRow
from miles_tui.tui.formatting import version_span

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
    "resp": "response_length",
    "maxh": "max_entropy",
    "return": "return_mean",
    "spec": "spec_accept_rate",
    "cache": "prefix_cache_hit_rate",
    "ngen": "non_generation_time",
}
"""Short names a filter takes for a column: every one-word header of the rollout table among them
(``tests/tui/test_row_filter.py`` holds the table's headers to it)."""
STATUSES = ("pending", "completed", "truncated", "aborted", "failed")
_OP = r"(>=|<=|!=|==|=|>|<|~)"
_TERM = re.compile(rf"^([a-z_]+){_OP}(.*)$")
_SPACED_OP = re.compile(rf"\s*{_OP}\s*")
"""An operator with spaces around it (``reward > 0.5``): one term, as without them."""
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


_TEXT_COLUMNS = frozenset({"status", "weight_version"})
_BOOL_COLUMNS = frozenset({"remove_sample", "mixed_version", "truncated", "alignment_failed"})
_DIGITS = re.compile(r"^[0-9]+$")


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


def _version(op: str, raw: str) -> Predicate:
    """The weight version as the table shows it (``v4``, ``v3–v5``) or as dumped (``4``); > < on numbers."""
    if op in ("=", "!=", "~"):
        needle = raw.lower()

        def text(row: SampleRow) -> bool:
            if row.weight_version is None:
                return False
            shown, dumped = version_span(row).lower(), row.weight_version.lower()
            if op == "~":
                return needle in shown or needle in dumped
            return (needle in (shown, dumped)) == (op == "=")

        return text
    number = raw.lower().removeprefix("v")
    if not _DIGITS.match(number):
        raise FilterError(f"version {op} needs a version number (version>8 or version>v8), not {raw!r}")
    bound = int(number)

    def numeric(row: SampleRow) -> bool:
        last = row.weight_version
        return last is not None and bool(_DIGITS.match(last)) and bool(_OPS[op](int(last), bound))

    return numeric


def _compare(column: str, op: str, raw: str) -> Predicate:
    """A predicate for ``COLUMN OP RAW``; FilterError now (never while rows are filtered) when it cannot hold."""
    if column == "weight_version":
        return _version(op, raw)
    value = _coerce(raw)
    if op == "~":
        needle = raw.lower()
        return lambda row: (cell := getattr(row, column)) is not None and needle in str(cell).lower()
    if value is None:
        if op not in ("=", "!="):
            raise FilterError(f"none can only be compared with = or !=, not {op}")
        return lambda row: (getattr(row, column) is None) == (op == "=")
    if column in _TEXT_COLUMNS:
        if op not in ("=", "!="):
            raise FilterError(f"{column} is text: use = != or ~")
        text = str(raw).lower()
        return lambda row: (cell := getattr(row, column)) is not None and _OPS[op](str(cell).lower(), text)
    if column in _BOOL_COLUMNS:
        if value in (0, 1) and not isinstance(value, float):
            value = bool(value)
        if not isinstance(value, bool) or op not in ("=", "!="):
            raise FilterError(f"{column} is yes/no: use {column}=yes or {column}=no")
        return lambda row: bool(_OPS[op](getattr(row, column), value))
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FilterError(f"{column} is a number: {raw!r} is not one")

    def check(row: SampleRow) -> bool:
        cell = getattr(row, column)
        return cell is not None and bool(_OPS[op](cell, value))

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

    elif ALIASES.get(base, base) in ROW_COLUMNS:
        raise FilterError(f"{base!r} is a column: compare it, e.g. {base}>0.5 or {base}=1")
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
    terms = _SPACED_OP.sub(r"\1", text.strip().lower()).split()
    if not terms:
        return None
    predicates: list[Predicate] = []
    for term in terms:
        match = _TERM.match(term)
        if match:
            name, op, raw = match.groups()
            op = "=" if op == "==" else op
            column = ALIASES.get(name, name)
            if column not in ROW_COLUMNS:
                close = difflib.get_close_matches(name, [*ROW_COLUMNS, *ALIASES], n=3)
                hint = f"did you mean {', '.join(close)}?" if close else "? lists the columns"
                raise FilterError(f"unknown column {name!r} ({hint})")
            if not raw:
                raise FilterError(f"{term!r} needs a value after {op}")
            predicates.append(_compare(column, op, raw))
        else:
            predicates.append(_word(term, zero_std_groups))

    def all_hold(row: SampleRow) -> bool:
        return all(p(row) for p in predicates)

    return RowFilter(text.strip(), all_hold)
