"""Resolve each sample's train row from a step's sharded train files.

Contract (the spec's "Resolving one sample's train row"):
- Every loaded shard of a step is indexed once; every (shard, row) holding a
  sample is collected, in global-rank order.
- Per sample, the context-parallel layout comes from the recorded
  ``cp_rank``/``cp_size`` or, for legacy dumps, from grouping the holders by
  identical ``rollout_log_probs`` content, accepted only when the group widths
  are exactly what :mod:`miles_tui.core.dump.cp` gives each rank (bshd offsets when the files
  carry ``max_seq_lens``; never assumed thd).
- Per field, holders are the shards that have it (pipeline stages without
  model outputs simply do not), one holder per CP rank is kept (the lowest
  global rank, so the result does not depend on listing order), and the
  slices are reassembled with :func:`miles_tui.core.dump.cp.assemble_response`.
- A field that cannot be placed or is not ``response_length`` long is None and
  the row is ``alignment_failed``; :class:`FieldState` records whether a None
  means never dumped or unreadable. Values are never guessed.
- Whether a field can be placed is decided from the slices' widths, without
  copying a value: a row keeps views of its slices (of the memory-mapped files)
  and assembles a field as float64 each time it is read, so a resolved step
  costs no more memory than the pages of the values actually read.
- Lengths that disagree between holders raise :class:`InconsistentDumpError`
  naming the files. This module reads no files; it works on loaded shards.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from miles_tui.core.base.errors import CorruptFileError, InconsistentDumpError
from miles_tui.core.dump.cp import QkvFormat, RankRanges, group_ranges, place_slices, widths_match
from miles_tui.core.dump.record_schema import PER_TOKEN_FIELDS, check_shard

FloatArray = npt.NDArray[np.float64]


class FieldState(enum.Enum):
    """Why a per-token field has (or lacks) a value."""

    OK = "ok"
    """Resolved to exactly response_length values."""
    NOT_DUMPED = "not_dumped"
    """No file of the step holds this field for the sample (flag off, or no train row)."""
    UNREADABLE = "unreadable"
    """The field was dumped but its slices could not be placed: never shown as absent or zero."""


@dataclass(frozen=True)
class Shard:
    """One loaded train file of a step."""

    path: Path
    """The file it was loaded from."""
    rank: int
    """Global rank of the writer."""
    cp_rank: int | None
    """Recorded CP rank (None in legacy dumps)."""
    cp_size: int | None
    """Recorded CP size (None in legacy dumps)."""
    qkv_format: str | None
    """Recorded qkv format (None in legacy dumps)."""
    columns: Mapping[str, Any]
    """The file's ``rollout_data`` columns."""
    row_of: Mapping[int, int]
    """Sample index -> row of this shard."""

    @staticmethod
    def from_payload(path: Path, rank: int, payload: Any) -> Shard:
        """Validate a loaded train file's fields (:func:`check_shard`) and index its rows."""
        check_shard(payload, path)
        columns = payload["rollout_data"]
        indices = columns["sample_indices"]
        row_of: dict[int, int] = {}
        for row, index in enumerate(_as_list(indices)):
            row_of.setdefault(int(index), row)
        cp_rank, cp_size = payload.get("cp_rank"), payload.get("cp_size")
        qkv = payload.get("qkv_format")
        return Shard(
            path=path,
            rank=int(payload.get("rank", rank)) if payload.get("rank") is not None else rank,
            cp_rank=None if cp_rank is None else int(cp_rank),
            cp_size=None if cp_size is None else int(cp_size),
            qkv_format=None if qkv is None else str(qkv),
            columns=columns,
            row_of=row_of,
        )

    @property
    def legacy(self) -> bool:
        """Whether the file predates the recorded CP layout."""
        return self.cp_rank is None or self.cp_size is None


@dataclass(frozen=True)
class TrainRow:
    """A sample's resolved train-side data."""

    sample_index: int
    """Run-global sample id."""
    response_length: int
    """Response tokens, as every holder agrees."""
    total_length: int
    """Prompt + response tokens, as every holder agrees."""
    loss_mask: npt.NDArray[np.int64] | None
    """Full-response loss mask from the train files (None if no holder has it)."""
    per_token: Mapping[str, FloatArray | None]
    """Each of PER_TOKEN_FIELDS, full response length, or None (resolution gives a
    :class:`PerTokenFields`, which assembles a field each time it is read)."""
    field_state: Mapping[str, FieldState]
    """Why each per-token field is (or is not) present."""
    alignment_failed: bool
    """Some dumped per-token field could not be placed."""
    dumped_rank: int
    """Global rank of the lowest-ranked file holding the row."""
    normalized_reward: float | None
    """The ``rewards`` column of the row."""
    truncated: bool | None
    """The ``truncated`` column of the row, when dumped."""
    cp_size: int
    """CP size the row was resolved with."""
    holders: tuple[Path, ...] = field(default=())
    """Files holding the row, in rank order."""
    alignment_reason: str | None = None
    """Why per-token data could not be placed, for the UI (None when it could)."""


def _as_list(values: Any) -> list[Any]:
    if isinstance(values, np.ndarray):
        return list(values.tolist())
    return list(values)


def _cell(shard: Shard, column: str, row: int) -> Any:
    values = shard.columns.get(column)
    if values is None:
        return None
    try:
        return values[row]
    except (IndexError, KeyError, TypeError):
        return None


def _as_slice(value: Any) -> npt.NDArray[Any]:
    """A per-token cell as a flat numeric array, without copying a numeric tensor view."""
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        array = np.asarray(value, dtype=np.float64)
    return array.reshape(-1)


@dataclass(frozen=True)
class _Slices:
    """One per-token field of one sample as its CP slices, checked to fit; assembled when read."""

    pieces: tuple[npt.NDArray[Any], ...]
    """The slices in CP-rank order (views of their files); one piece when cp_size is 1."""
    ranges: tuple[RankRanges, ...] | None
    """Where each piece goes (:func:`miles_tui.core.dump.cp.group_ranges`); None when cp_size is 1."""
    response_length: int

    def assemble(self) -> FloatArray:
        if self.ranges is None:
            return np.asarray(self.pieces[0], dtype=np.float64)
        out = np.empty(self.response_length, dtype=np.float64)
        place_slices(self.pieces, self.ranges, out)
        return out


class PerTokenFields(Mapping[str, "FloatArray | None"]):
    """A resolved row's per-token fields: each assembled (float64, full response) when read.

    Nothing is kept between reads, so holding every row of a big step costs no
    copies; a reader that needs a field twice keeps the array it got.
    """

    __slots__ = ("_fields",)

    def __init__(self, fields: Mapping[str, _Slices | None]) -> None:
        self._fields = fields

    def __getitem__(self, name: str) -> FloatArray | None:
        slices = self._fields[name]
        return None if slices is None else slices.assemble()

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def __repr__(self) -> str:
        present = [name for name, slices in self._fields.items() if slices is not None]
        return f"PerTokenFields(present={present})"


def _fits(chunks: Mapping[int, npt.NDArray[Any]], ranges: Sequence[RankRanges]) -> bool:
    """Whether every CP rank has a slice of exactly the width its ranges give (as assemble_response checks)."""
    if set(chunks) != set(range(len(ranges))):
        return False
    return all(chunks[rank].size == (b - a) + (d - c) for rank, ((a, b), (c, d)) in enumerate(ranges))


def _scalar(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.item() if value.size == 1 else None
    if isinstance(value, np.generic):
        return value.item()
    return value


@dataclass(frozen=True)
class _Layout:
    cp_size: int
    rank_of: Mapping[int, int]
    """holder position -> cp rank (only holders that could be placed)."""
    complete: bool
    qkv_format: QkvFormat
    max_seq_len: int | None
    problem: str | None = None
    """Why the layout is incomplete or refused."""


def _layout(holders: Sequence[tuple[Shard, int]], total_length: int, response_length: int) -> _Layout:
    max_seq_len = None
    for shard, row in holders:
        value = _scalar(_cell(shard, "max_seq_lens", row))
        if value is not None:
            max_seq_len = int(value)
            break
    if all(not shard.legacy for shard, _ in holders):
        sizes = {shard.cp_size for shard, _ in holders}
        formats = {shard.qkv_format for shard, _ in holders}
        qkv: QkvFormat = "bshd" if formats == {"bshd"} else "thd"
        if len(sizes) != 1 or len(formats) != 1:
            return _Layout(1, {}, False, qkv, max_seq_len, "its train files disagree on cp_size or qkv_format")
        cp_size = int(next(iter(sizes)) or 1)
        rank_of = {i: int(shard.cp_rank or 0) for i, (shard, _) in enumerate(holders)}
        missing = sorted(set(range(cp_size)) - set(rank_of.values()))
        problem = None
        if missing:
            problem = (
                f"no readable train file holds CP rank{'s' if len(missing) > 1 else ''} "
                + ", ".join(str(m) for m in missing)
                + f" of {cp_size} (a rank's file is missing or failed to load)"
            )
        return _Layout(cp_size, rank_of, not missing, qkv, max_seq_len, problem)

    # Legacy: the qkv format is not recorded; a max_seq_lens column means bshd.
    qkv = "bshd" if max_seq_len is not None else "thd"
    groups: dict[bytes, int] = {}
    widths: list[int] = []
    rank_of = {}
    any_content = False
    for i, (shard, row) in enumerate(holders):
        values = _cell(shard, "rollout_log_probs", row)
        if values is None:
            continue
        any_content = True
        array = np.ascontiguousarray(np.asarray(values))
        key = array.tobytes() + str(array.dtype).encode()
        if key not in groups:
            groups[key] = len(groups)
            widths.append(int(array.size))
        rank_of[i] = groups[key]
    if not any_content:
        return _Layout(1, dict.fromkeys(range(len(holders)), 0), True, qkv, max_seq_len)
    cp_size = len(groups)
    if cp_size > 1 and not widths_match(widths, total_length, response_length, qkv, max_seq_len):
        return _Layout(
            cp_size,
            {},
            False,
            qkv,
            max_seq_len,
            "this legacy dump has no cp_rank/cp_size, and its context-parallel slices cannot be placed "
            f"from their content (slice widths {widths} do not fit the {qkv} zigzag rule)",
        )
    return _Layout(cp_size, rank_of, True, qkv, max_seq_len)


def _lengths(sample_index: int, holders: Sequence[tuple[Shard, int]]) -> tuple[int, int]:
    seen: dict[tuple[int, int], list[Path]] = {}
    for shard, row in holders:
        response = _scalar(_cell(shard, "response_lengths", row))
        total = _scalar(_cell(shard, "total_lengths", row))
        if response is None or total is None:
            raise CorruptFileError(
                f"row {row} (sample {sample_index}) lacks response_lengths/total_lengths", shard.path
            )
        seen.setdefault((int(response), int(total)), []).append(shard.path)
    if len(seen) > 1:
        described = "; ".join(
            f"response {r}, total {t} in {', '.join(p.name for p in paths)}" for (r, t), paths in seen.items()
        )
        first = next(iter(seen.values()))[0]
        raise InconsistentDumpError(
            f"sample {sample_index}: train files disagree on its lengths ({described}); "
            "the step mixes dumps of different runs or a file is corrupt",
            first.parent,
        )
    return next(iter(seen))


def resolve_row(sample_index: int, holders: Sequence[tuple[Shard, int]]) -> TrainRow:
    """Resolve one sample from every (shard, row) holding it, in global-rank order."""
    holders = sorted(holders, key=lambda h: h[0].rank)
    response_length, total_length = _lengths(sample_index, holders)
    layout = _layout(holders, total_length, response_length)
    alignment_failed = False
    ranges: tuple[RankRanges, ...] | None = None
    if layout.cp_size > 1 and layout.complete:
        try:
            ranges = group_ranges(total_length, response_length, layout.cp_size, layout.qkv_format, layout.max_seq_len)
        except ValueError:
            ranges = None  # e.g. bshd without max_seq_lens: nothing can be placed
    per_token: dict[str, _Slices | None] = {}
    states: dict[str, FieldState] = {}
    for name in PER_TOKEN_FIELDS:
        cells = [(i, _cell(shard, name, row)) for i, (shard, row) in enumerate(holders)]
        having = [(i, cell) for i, cell in cells if cell is not None]
        if not having:
            per_token[name], states[name] = None, FieldState.NOT_DUMPED
            continue
        chunks: dict[int, npt.NDArray[Any]] = {}
        for i, cell in having:  # already rank-ordered: lowest rank wins per cp rank
            if i in layout.rank_of and layout.rank_of[i] not in chunks:
                chunks[layout.rank_of[i]] = _as_slice(cell)
        value: _Slices | None = None
        if layout.cp_size == 1 and chunks:
            only = chunks[0] if 0 in chunks else next(iter(chunks.values()))
            value = _Slices((only,), None, response_length) if only.size == response_length else None
        elif ranges is not None and len(chunks) == layout.cp_size and _fits(chunks, ranges):
            # Assembled, slices of exactly these widths give response_length values.
            value = _Slices(tuple(chunks[rank] for rank in range(layout.cp_size)), ranges, response_length)
        per_token[name] = value
        states[name] = FieldState.OK if value is not None else FieldState.UNREADABLE
        alignment_failed = alignment_failed or value is None

    first_shard, first_row = holders[0]
    mask_value = None
    for shard, row in holders:
        mask_value = _cell(shard, "loss_masks", row)
        if mask_value is not None:
            break
    loss_mask = None if mask_value is None else np.asarray(mask_value, dtype=np.int64).reshape(-1)
    if loss_mask is not None and len(loss_mask) != response_length:
        loss_mask = None
    reward = _scalar(_cell(first_shard, "rewards", first_row))
    truncated = _scalar(_cell(first_shard, "truncated", first_row))
    return TrainRow(
        sample_index=sample_index,
        response_length=response_length,
        total_length=total_length,
        loss_mask=loss_mask,
        per_token=PerTokenFields(per_token),
        field_state=states,
        alignment_failed=alignment_failed,
        dumped_rank=min(shard.rank for shard, _ in holders),
        normalized_reward=None if reward is None else float(reward),
        truncated=None if truncated is None else bool(truncated),
        cp_size=layout.cp_size,
        holders=tuple(shard.path for shard, _ in holders),
        alignment_reason=(layout.problem or "a per-token field is not response_length long")
        if alignment_failed
        else None,
    )


def resolve_rows(shards: Sequence[Shard], known_samples: set[int] | None = None) -> dict[int, TrainRow]:
    """Resolve every sample held by ``shards``.

    ``known_samples`` (the rollout file's sample ids) makes a shard naming an
    unknown sample an :class:`InconsistentDumpError` naming that shard.
    """
    holders: dict[int, list[tuple[Shard, int]]] = {}
    for shard in sorted(shards, key=lambda s: s.rank):
        for index, row in shard.row_of.items():
            if known_samples is not None and index not in known_samples:
                raise InconsistentDumpError(
                    f"holds sample {index}, which the step's rollout file does not have: "
                    "the train and rollout files come from different runs or steps",
                    shard.path,
                )
            holders.setdefault(index, []).append((shard, row))
    return {index: resolve_row(index, found) for index, found in holders.items()}


def raw_reward_at(shards: Sequence[Shard], position: int) -> float | None:
    """The batch-global ``raw_reward`` of the sample at rollout ``position`` (never a shard row)."""
    for shard in sorted(shards, key=lambda s: s.rank):
        values = shard.columns.get("raw_reward")
        if values is not None and 0 <= position < len(values):
            value = _scalar(values[position])
            return None if value is None else float(value)
    return None
