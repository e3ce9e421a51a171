"""Context-parallel (zigzag) slicing of per-token response values, and its inverse.

Under context parallelism of size C a sequence of total length T is cut into
2C chunks of ``cs`` tokens; CP rank r holds chunks r and 2C-1-r. Logits are
shifted by one (position p predicts token p+1), so a chunk ``[a, b)`` covers
logit range ``[max(a, P-1), min(b, T-1))`` and logit position p is response
position ``p - (P-1)``, where P = T - R is the prompt length.

``slice_response`` and ``assemble_response`` share :func:`response_ranges`, the
one offset function, so slicing for every rank and assembling is the identity
by construction (and by property test). Assembling an incomplete group is
refused. This module never reads files and never guesses a layout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from miles_tui.core.base.errors import CpLayoutError

QkvFormat = Literal["thd", "bshd"]


def chunk_size(total_length: int, cp_size: int, qkv_format: QkvFormat = "thd", max_seq_len: int | None = None) -> int:
    """Tokens per zigzag chunk: ceil(T / 2C) for thd, ceil(max_seq_len / 2C) for bshd."""
    if cp_size < 1:
        raise ValueError(f"cp_size must be >= 1, got {cp_size}")
    if qkv_format == "bshd":
        if max_seq_len is None:
            raise ValueError("bshd chunking needs max_seq_len (the max_seq_lens column)")
        length = max_seq_len
    else:
        length = total_length
    return -(-length // (2 * cp_size))


def response_ranges(
    total_length: int,
    response_length: int,
    cp_rank: int,
    cp_size: int,
    qkv_format: QkvFormat = "thd",
    max_seq_len: int | None = None,
) -> tuple[tuple[int, int], tuple[int, int]]:
    """The two response-position ranges ``[lo, hi)`` CP rank ``cp_rank`` holds, in slice order.

    An empty range is returned as ``(x, x)``. The slice of rank r is the values
    of its first range followed by those of its second.
    """
    if not 0 <= cp_rank < cp_size:
        raise ValueError(f"cp_rank {cp_rank} out of range for cp_size {cp_size}")
    prompt_length = total_length - response_length
    cs = chunk_size(total_length, cp_size, qkv_format, max_seq_len)
    first_logit = prompt_length - 1
    ranges = []
    for chunk in (cp_rank, 2 * cp_size - cp_rank - 1):
        lo = max(chunk * cs, first_logit)
        hi = min((chunk + 1) * cs, total_length - 1)
        if hi <= lo:
            ranges.append((0, 0))
        else:
            ranges.append((lo - first_logit, hi - first_logit))
    return ranges[0], ranges[1]


def slice_width(
    total_length: int,
    response_length: int,
    cp_rank: int,
    cp_size: int,
    qkv_format: QkvFormat = "thd",
    max_seq_len: int | None = None,
) -> int:
    """How many response values CP rank ``cp_rank`` holds."""
    first, second = response_ranges(total_length, response_length, cp_rank, cp_size, qkv_format, max_seq_len)
    return (first[1] - first[0]) + (second[1] - second[0])


def slice_response(
    values: npt.ArrayLike,
    total_length: int,
    cp_rank: int,
    cp_size: int,
    qkv_format: QkvFormat = "thd",
    max_seq_len: int | None = None,
) -> npt.NDArray[np.generic]:
    """CP rank ``cp_rank``'s slice of a full-response array (what a training rank dumps)."""
    full = np.asarray(values)
    (a, b), (c, d) = response_ranges(total_length, len(full), cp_rank, cp_size, qkv_format, max_seq_len)
    return np.concatenate([full[a:b], full[c:d]])


def assemble_response(
    slices: Mapping[int, npt.ArrayLike],
    total_length: int,
    response_length: int,
    cp_size: int,
    qkv_format: QkvFormat = "thd",
    max_seq_len: int | None = None,
) -> npt.NDArray[np.generic]:
    """Put every CP rank's slice back in response order: the inverse of :func:`slice_response`.

    Raises :class:`CpLayoutError` when a rank is missing, a rank is out of
    range, or a slice does not have the width the offset rule gives its rank.
    """
    missing = sorted(set(range(cp_size)) - set(slices))
    extra = sorted(set(slices) - set(range(cp_size)))
    if missing or extra:
        raise CpLayoutError(
            f"cannot assemble a partial CP group: cp_size {cp_size}, missing ranks {missing}, unexpected ranks {extra}"
        )
    arrays = {rank: np.asarray(value) for rank, value in slices.items()}
    dtype = np.result_type(*arrays.values()) if arrays else np.float32
    out = np.empty(response_length, dtype=dtype)
    ranges = group_ranges(total_length, response_length, cp_size, qkv_format, max_seq_len)
    for rank, ((a, b), (c, d)) in enumerate(ranges):
        piece = arrays[rank]
        if piece.ndim != 1 or len(piece) != (b - a) + (d - c):
            raise CpLayoutError(
                f"CP rank {rank} holds {len(piece)} values but the slicing rule gives it {(b - a) + (d - c)}"
            )
    place_slices([arrays[rank] for rank in range(cp_size)], ranges, out)
    return out


RankRanges = tuple[tuple[int, int], tuple[int, int]]
"""The two response ranges of one CP rank, as :func:`response_ranges` gives them."""


def group_ranges(
    total_length: int,
    response_length: int,
    cp_size: int,
    qkv_format: QkvFormat = "thd",
    max_seq_len: int | None = None,
) -> tuple[RankRanges, ...]:
    """:func:`response_ranges` of every CP rank, in rank order (one sample's whole layout)."""
    return tuple(
        response_ranges(total_length, response_length, rank, cp_size, qkv_format, max_seq_len)
        for rank in range(cp_size)
    )


def place_slices(pieces: Sequence[npt.NDArray[Any]], ranges: Sequence[RankRanges], out: npt.NDArray[Any]) -> None:
    """Write each rank's slice (rank order) into ``out`` at its two ranges, casting to ``out``'s dtype.

    The placement step of :func:`assemble_response`, for callers that checked
    the widths against :func:`group_ranges` once and assemble many fields.
    """
    for piece, ((a, b), (c, d)) in zip(pieces, ranges, strict=True):
        out[a:b] = piece[: b - a]
        out[c:d] = piece[b - a :]


def widths_match(
    widths: Sequence[int],
    total_length: int,
    response_length: int,
    qkv_format: QkvFormat = "thd",
    max_seq_len: int | None = None,
) -> bool:
    """Whether slice widths (listed in CP-rank order) are exactly what the rule gives.

    This is the check behind legacy layout recovery: the widths must sum to the
    response length and each must equal its rank's width.
    """
    cp_size = len(widths)
    if cp_size < 1 or sum(widths) != response_length:
        return False
    return all(
        width == slice_width(total_length, response_length, rank, cp_size, qkv_format, max_seq_len)
        for rank, width in enumerate(widths)
    )
