"""The type of every field core reads from a dump record, checked where the record enters core.

Contract:

- :func:`sample_problems` checks one rollout sample (a dict of
  ``rollout_data/{rid}.pt``) against the types of the spec's sample table,
  for exactly the fields core reads; :func:`check_shard` checks a loaded train
  file (``train_data/{rid}_{rank}.pt``): its top-level keys and the
  ``rollout_data`` columns core reads; :func:`conversation_problems` one line
  of ``trajectory/{rid}.jsonl``. Keys core does not read are never
  looked at, so unknown or new keys never fail.
- A wrong type is reported by field name (and, inside a list, by the position
  of the first bad element): a sample's problems as :class:`FieldProblem`
  values (the caller shows that sample unreadable and goes on), a train
  file's as a :class:`CorruptFileError` naming the file and the field (the
  caller treats the file as unreadable and goes on). After a record passed,
  the ``int()``/``float()``/``str()``/``len()`` that core applies to its fields
  cannot raise.
- A value is checked for what it will be used as, not only for its type: a
  pickle holds integers of any size (LONG4), so an int that core reads as an
  int (an index, a length, a weight version) must fit in 64 bits (``str()`` of
  one over 4,300 digits raises, numpy cannot hold one), and an int that
  becomes a float (a reward, a time, the counts of ``spec_info`` and
  ``prefix_cache_info``) must fit in a float.
- None is accepted wherever the spec allows a field to be missing. Booleans
  are not integers here (``rank = True`` is a wrong type), except in loss
  masks and flags.
- numpy arrays are checked by dtype and shape only: their data (pages of a
  memory-mapped file) is never read. Lists are checked element by element,
  in one pass over the element types, except a sample's long per-token lists
  (``tokens``, ``loss_mask``, ``rollout_log_probs``): on entry only their
  container is checked (a cold open of a 1,000-sample step does not pay a pass
  over every token), and their elements when they are read, by
  :func:`field_array`, which every reader of them uses.
- Never converts, copies or mutates a record; never reads files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from miles_tui.core.base.errors import CorruptFileError

MAX_CP_SIZE = 4096
"""Largest context-parallel size accepted in a train file (real runs use at most a few dozen)."""

_INTS: frozenset[type] = frozenset({int, *(np.dtype(code).type for code in np.typecodes["AllInteger"])})
_FLAGS: frozenset[type] = _INTS | {bool, np.bool_}
_NUMBERS: frozenset[type] = _FLAGS | {float, *(np.dtype(code).type for code in np.typecodes["Float"])}


@dataclass(frozen=True)
class Expected:
    """What one field may hold."""

    label: str
    """How the spec names it: ``a list of ints``, ``an int or None`` ..."""
    scalars: frozenset[type] = frozenset()
    """Accepted scalar types (exact types: ``bool`` is not an ``int`` unless listed)."""
    containers: tuple[type, ...] = ()
    """Accepted non-list containers (``str``, ``dict``)."""
    elements: frozenset[type] | None = None
    """When a list (or tuple) is accepted: the types its elements may have (empty: any)."""
    array_kinds: str = ""
    """When a numpy array is accepted: its dtype kinds (``"iu"``: integers)."""
    optional: bool = True
    """Whether None is accepted."""
    elements_when_read: bool = False
    """A long per-token list: its elements are checked when it is read (:func:`field_array`), not on entry."""
    as_float: bool = False
    """Whether core reads a number of this field as a float (an int must fit a float, not 64 bits)."""
    number_keys: tuple[str, ...] = ()
    """When a dict is accepted: the keys whose numbers core reads as floats (each must fit a float)."""


def _type_name(value: Any) -> str:
    return "None" if value is None else type(value).__name__


INT_BOUND = 2**63
"""Python ints read as ints must lie in [-INT_BOUND, INT_BOUND): what numpy's int64 holds."""


def int_problem(value: int, as_float: bool) -> str | None:
    """Why a Python int cannot be used as an int (64 bits) or, ``as_float``, as a float (None: it can)."""
    if -INT_BOUND <= value < INT_BOUND:
        return None
    if as_float:
        try:
            float(value)
        except OverflowError:
            return f"got an int of {value.bit_length()} bits, more than a float holds"
        return None
    return f"got an int of {value.bit_length()} bits, more than 64"


def _list_problem(values: list[Any] | tuple[Any, ...], allowed: frozenset[type]) -> str | None:
    """Why a list's elements do not fit (None when every element's type is allowed and every int fits 64 bits)."""
    types = set(map(type, values))
    if not allowed or (types <= allowed and int not in types):
        return None
    for position, value in enumerate(values):
        if allowed and type(value) not in allowed:
            return f"got {_type_name(value)} at position {position}"
        if type(value) is int:
            reason = int_problem(value, as_float=False)
            if reason is not None:
                return f"{reason} at position {position}"
    return None


def value_problem(value: Any, expected: Expected) -> str | None:
    """Why ``value`` does not fit ``expected`` (None when it does)."""
    if value is None:
        return None if expected.optional else "got None"
    kind = type(value)
    if kind is int and kind in expected.scalars:
        return int_problem(value, expected.as_float)
    if kind in expected.scalars:
        return None
    if expected.containers and isinstance(value, expected.containers):
        return _number_keys_problem(value, expected.number_keys) if expected.number_keys else None
    if expected.elements is not None and kind in (list, tuple):
        return None if expected.elements_when_read else _list_problem(value, expected.elements)
    if expected.array_kinds and isinstance(value, np.ndarray):
        if value.dtype.kind not in expected.array_kinds:
            return f"got an array of {value.dtype}"
        return None
    return f"got {_type_name(value)}"


def _number_keys_problem(record: Any, keys: tuple[str, ...]) -> str | None:
    """Why a dict's numbers at ``keys`` cannot be read as floats (None: they can, or are not numbers)."""
    for key in keys:
        number = record.get(key)
        if type(number) is int:
            reason = int_problem(number, as_float=True)
            if reason is not None:
                return f"{reason} at {key!r}"
    return None


@dataclass(frozen=True)
class FieldProblem:
    """One field of a record whose value does not have the spec's type."""

    field: str
    """The key, as in the record."""
    expected: str
    """What the spec says it holds."""
    reason: str
    """What it holds instead (``got int``, ``got str at position 3``)."""

    def describe(self) -> str:
        return f"'{self.field}' should be {self.expected}, {self.reason}"


INT = Expected("an int", _INTS, optional=False)
INT_OR_NONE = Expected("an int or None", _INTS)
NUMBER_OR_NONE = Expected("a number or None", _NUMBERS, as_float=True)
FLAG_OR_NONE = Expected("a bool or None", _FLAGS)
STR_OR_NONE = Expected("a string or None", frozenset({str}))
DICT_OR_NONE = Expected("a dict or None", containers=(dict,))
TOKEN_IDS = Expected("a list of ints", elements=_INTS, array_kinds="iu", elements_when_read=True)
MASK_LIST = Expected("a list of 0/1 ints", elements=_FLAGS, array_kinds="biu", elements_when_read=True)
FLOAT_LIST = Expected("a list of floats", elements=_NUMBERS, array_kinds="biuf", elements_when_read=True)
VERSION_LIST = Expected(
    "a list of strings or of per-call span lists", elements=frozenset({str, list, tuple, dict}) | _INTS
)
"""Its structure (flat, per-call spans, or a shape no miles writes) is :mod:`~miles_tui.core.dump.record_formats`'."""

SAMPLE_FIELDS: Mapping[str, Expected] = {
    "index": INT,
    "group_index": INT_OR_NONE,
    "prompt": Expected("a string or a list of chat messages", frozenset({str}), elements=frozenset()),
    "tokens": TOKEN_IDS,
    "response_length": INT_OR_NONE,
    "total_length": INT_OR_NONE,
    "reward": Expected("a number, a dict or None", _NUMBERS, containers=(dict,), as_float=True),
    "loss_mask": MASK_LIST,
    "weight_versions": VERSION_LIST,
    "rollout_log_probs": FLOAT_LIST,
    "status": STR_OR_NONE,
    "remove_sample": FLAG_OR_NONE,
    "non_generation_time": NUMBER_OR_NONE,
    "spec_info": Expected(
        "a dict or None",
        containers=(dict,),
        number_keys=(
            "spec_accept_token_num",
            "spec_draft_token_num",
            "spec_num_correct_drafts",
            "spec_num_proposed_drafts",
        ),
    ),
    "prefix_cache_info": Expected(
        "a dict or None", containers=(dict,), number_keys=("cached_tokens", "total_prompt_tokens")
    ),
}
"""Every sample field core reads, with its type (spec: "rollout_data/{rid}.pt")."""


class FieldTypeError(ValueError):
    """A field whose elements do not have the spec's type, found when it was read."""

    def __init__(self, problem: FieldProblem) -> None:
        self.problem = problem
        """The field and what is wrong with it."""
        super().__init__(problem.describe())


def field_array(name: str, value: Any, expected: Expected, dtype: type[np.generic]) -> npt.NDArray[Any]:
    """A sample's per-token list (or array) as a flat array of ``dtype``, its elements checked first.

    An array of a fitting dtype is not copied. A list is converted once (what a
    reader does anyway), and refused when numpy had to widen it to strings,
    objects, nested lists or a kind the field does not allow: ``[1, "2"]`` is
    never read as ``[1, 2]`` and ``[1.5]`` never as token ``1``.
    """
    if isinstance(value, np.ndarray):
        array = value
    elif type(value) in (list, tuple):
        if not value:
            return np.zeros(0, dtype=dtype)
        try:
            array = np.asarray(value)
        except (ValueError, TypeError, OverflowError):  # ragged nesting
            array = np.asarray(None, dtype=object)
    else:
        raise FieldTypeError(FieldProblem(name, expected.label, f"got {_type_name(value)}"))
    if array.dtype.kind not in expected.array_kinds or (array.ndim != 1 and not isinstance(value, np.ndarray)):
        if type(value) in (list, tuple):
            detail = _list_problem(value, expected.elements or frozenset()) or "got a list that is not flat numbers"
        else:
            detail = f"got an array of {array.dtype}"
        raise FieldTypeError(FieldProblem(name, expected.label, detail))
    return array.reshape(-1).astype(dtype, copy=False)


def sample_problems(sample: Any) -> tuple[FieldProblem, ...]:
    """The fields of one rollout sample that do not have the spec's type (empty: the sample is readable)."""
    if not isinstance(sample, dict):
        return (FieldProblem("(sample)", "a dict", f"got {_type_name(sample)}"),)
    return _record_problems(sample, SAMPLE_FIELDS)


CONVERSATION_FIELDS: Mapping[str, Expected] = {
    "sample_index": INT,
    "group_index": INT_OR_NONE,
    "status": STR_OR_NONE,
    "messages": Expected("a list of messages", elements=frozenset({dict})),
}
"""Fields of a ``trajectory/{rid}.jsonl`` line core reads (a message's own fields are read leniently)."""


def conversation_problems(record: Any) -> tuple[FieldProblem, ...]:
    """The fields of one parsed conversation line that do not have the spec's type."""
    if not isinstance(record, dict):
        return (FieldProblem("(line)", "a JSON object", f"got {_type_name(record)}"),)
    return _record_problems(record, CONVERSATION_FIELDS)


def _record_problems(record: Mapping[str, Any], fields: Mapping[str, Expected]) -> tuple[FieldProblem, ...]:
    problems = []
    for name, expected in fields.items():
        if name not in record and not expected.optional:
            problems.append(FieldProblem(name, expected.label, "it is missing"))
            continue
        reason = value_problem(record.get(name), expected)
        if reason is not None:
            problems.append(FieldProblem(name, expected.label, reason))
    return tuple(problems)


_SCALAR_CELL_KINDS = {"ints": "iu", "numbers": "biuf", "flags": "biu"}

SHARD_KEYS: Mapping[str, Expected] = {
    "rank": INT_OR_NONE,
    "cp_rank": INT_OR_NONE,
    "cp_size": INT_OR_NONE,
    "qkv_format": STR_OR_NONE,
}
"""Top-level train-file keys core reads (``rollout_data`` is checked by column)."""

SCALAR_COLUMNS: Mapping[str, str] = {
    "sample_indices": "ints",
    "response_lengths": "ints",
    "total_lengths": "ints",
    "max_seq_lens": "ints",
    "rewards": "numbers",
    "raw_reward": "numbers",
    "truncated": "flags",
}
"""Columns holding one scalar per row (``raw_reward``: per rollout sample), by kind of scalar."""

_CELL_TYPES = {"ints": _INTS, "numbers": _NUMBERS, "flags": _FLAGS}

PER_TOKEN_FIELDS: tuple[str, ...] = (
    "log_probs",
    "rollout_log_probs",
    "ref_log_probs",
    "entropy",
    "ref_entropy",
    "advantages",
    "returns",
)
"""Per-token train fields that context parallelism shards (the rest are full length)."""

PER_ROW_ARRAY_COLUMNS: tuple[str, ...] = ("loss_masks", *PER_TOKEN_FIELDS)
"""Columns holding one array per row (a tensor, or a list of numbers)."""


def _scalar_column_problem(values: Any, kind: str) -> str | None:
    """Why a column of scalars does not fit: a list of scalars (or size-1 arrays), or a 1-D array."""
    kinds = _SCALAR_CELL_KINDS[kind]
    if isinstance(values, np.ndarray):
        if values.ndim != 1 or values.dtype.kind not in kinds:
            return f"got an array of {values.dtype} with shape {values.shape}"
        return None
    if type(values) not in (list, tuple):
        return f"got {_type_name(values)}"
    allowed = _CELL_TYPES[kind]
    types = set(map(type, values))
    if types <= allowed and int not in types:
        return None
    for row, cell in enumerate(values):
        if type(cell) is int:
            reason = int_problem(cell, as_float=kind == "numbers")
            if reason is not None:
                return f"{reason} at row {row}"
            continue
        if type(cell) in allowed:
            continue
        if isinstance(cell, np.ndarray) and cell.size == 1 and cell.dtype.kind in kinds:
            continue  # a 0-d tensor
        return f"got {_type_name(cell)} at row {row}"
    return None


def _array_column_problem(values: Any, kind: str) -> str | None:
    """Why a column of per-row arrays does not fit: a list whose entries are numeric arrays or number lists."""
    if type(values) not in (list, tuple):
        return f"got {_type_name(values)}"
    kinds = "biu" if kind == "mask" else "biuf"
    allowed = _FLAGS if kind == "mask" else _NUMBERS
    for row, cell in enumerate(values):
        if cell is None:
            continue
        if isinstance(cell, np.ndarray):
            if cell.dtype.kind not in kinds:
                return f"got an array of {cell.dtype} at row {row}"
        elif type(cell) in (list, tuple):
            reason = _list_problem(cell, allowed)
            if reason is not None:
                return f"{reason} in row {row}"
        else:
            return f"got {_type_name(cell)} at row {row}"
    return None


def shard_problems(payload: Any) -> tuple[FieldProblem, ...]:
    """The keys and columns of a loaded train file that do not have the spec's type."""
    if not isinstance(payload, dict):
        return (FieldProblem("(file)", "a dict", f"got {_type_name(payload)}"),)
    columns = payload.get("rollout_data")
    if not isinstance(columns, dict):
        return (FieldProblem("rollout_data", "a dict of columns", f"got {_type_name(columns)}"),)
    problems = []
    for name, expected in SHARD_KEYS.items():
        reason = value_problem(payload.get(name), expected)
        if reason is not None:
            problems.append(FieldProblem(name, expected.label, reason))
    if not problems:
        problems += _layout_problems(payload)
    if columns.get("sample_indices") is None:
        problems.append(FieldProblem("rollout_data.sample_indices", "a list of ints", "it is missing"))
    for name, kind in SCALAR_COLUMNS.items():
        values = columns.get(name)
        reason = None if values is None else _scalar_column_problem(values, kind)
        if reason is not None:
            label = "a list of ints" if kind == "ints" else f"a list of {kind}"
            problems.append(FieldProblem(f"rollout_data.{name}", label, reason))
    for name in PER_ROW_ARRAY_COLUMNS:
        values = columns.get(name)
        kind = "mask" if name == "loss_masks" else "values"
        reason = None if values is None else _array_column_problem(values, kind)
        if reason is not None:
            problems.append(FieldProblem(f"rollout_data.{name}", "a list of numeric arrays, one per row", reason))
    return tuple(problems)


def _layout_problems(payload: Mapping[str, Any]) -> list[FieldProblem]:
    """cp_size in 1..MAX_CP_SIZE, cp_rank in 0..cp_size-1, qkv_format thd or bshd (already well typed)."""
    problems = []
    cp_rank, cp_size, qkv = payload.get("cp_rank"), payload.get("cp_size"), payload.get("qkv_format")
    if cp_size is not None and not 1 <= int(cp_size) <= MAX_CP_SIZE:
        problems.append(FieldProblem("cp_size", f"between 1 and {MAX_CP_SIZE}", f"got {int(cp_size)}"))
    elif cp_rank is not None and not 0 <= int(cp_rank) < int(cp_size if cp_size is not None else MAX_CP_SIZE):
        problems.append(FieldProblem("cp_rank", "between 0 and cp_size - 1", f"got {int(cp_rank)}"))
    if qkv is not None and qkv not in ("thd", "bshd"):
        problems.append(FieldProblem("qkv_format", "'thd' or 'bshd'", f"got {str(qkv)[:20]!r}"))
    return problems


def check_shard(payload: Any, path: Path) -> None:
    """Raise :class:`CorruptFileError` naming the file and its first mistyped field, if any."""
    problems = shard_problems(payload)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise CorruptFileError(f"not a readable train shard: {problems[0].describe()}{more}", path)
