"""Per-token values of one sample: what the token panels and ``export --tokens`` show.

Contract: a :class:`TokenView` is the sample's token ids, its prompt length,
its full-response loss mask and every per-token series over the response,
with values at loss-masked positions set to NaN-free *None* in the payload
(the engine never scored them: a gap, never 0). ``lp_diff`` and
``imp_ratio`` are derived here and nowhere else. Windows ``[start, end)`` of
token positions cut ids and the response overlap consistently;
``response_offset`` (where the response starts within the window's ids) is
clamped to the number of ids returned (miles' rule), so a window that ends
inside the prompt has ``response_offset == len(token_ids)``. A sample whose
token ids do not cover its response (missing or unreadable ``tokens``) has no
view: :class:`CorruptFileError` naming the rollout file, never a negative
prompt length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from miles_tui.core.base.errors import CorruptFileError, StepNotFoundError
from miles_tui.core.dump.record_schema import PER_TOKEN_FIELDS, SAMPLE_FIELDS, FieldTypeError, field_array
from miles_tui.core.dump.resolve import FieldState
from miles_tui.core.dump.step import OpenStep
from miles_tui.core.dump.tokenizer import Detokenizer

FloatArray = npt.NDArray[np.float64]

SERIES = (
    "rollout_log_probs",
    "train_log_probs",
    "ref_log_probs",
    "lp_diff",
    "imp_ratio",
    "entropy",
    "ref_entropy",
    "advantages",
    "returns",
)
"""The per-token series of a token view, in display order."""

_SOURCE_FIELD = {"train_log_probs": "log_probs", "lp_diff": "log_probs", "imp_ratio": "log_probs"}


@dataclass(frozen=True)
class TokenView:
    """Every per-token value of one sample (arrays span the whole response)."""

    rollout_id: int
    """The step."""
    sample_index: int
    """The sample."""
    evaluation: bool
    """Whether the step is an eval step."""
    token_ids: tuple[int, ...]
    """Prompt + response token ids."""
    prompt_length: int
    """Tokens before the response."""
    loss_mask: npt.NDArray[np.int64] | None
    """Full-response loss mask (None when the dump has none)."""
    series: Mapping[str, FloatArray | None]
    """Each of SERIES over the response, unmasked (None: blank)."""
    states: Mapping[str, FieldState]
    """Why each series is present or blank."""

    @property
    def total_length(self) -> int:
        return len(self.token_ids)

    @property
    def response_length(self) -> int:
        return self.total_length - self.prompt_length

    def trained(self) -> npt.NDArray[np.bool_]:
        """Response positions the loss counts (all of them without a mask)."""
        if self.loss_mask is None:
            return np.ones(self.response_length, dtype=bool)
        return self.loss_mask > 0

    def masked(self, name: str) -> FloatArray | None:
        """A series with NaN at loss-masked positions (for drawing gaps)."""
        values = self.series.get(name)
        if values is None:
            return None
        out = values.astype(np.float64, copy=True)
        out[~self.trained()] = np.nan
        return out

    def outlier_positions(self) -> npt.NDArray[np.int64]:
        """Response positions ordered by |lp diff|, largest first (trained positions only)."""
        diff = self.masked("lp_diff")
        if diff is None:
            return np.zeros(0, dtype=np.int64)
        magnitude = np.abs(diff)
        order = np.argsort(-np.nan_to_num(magnitude, nan=-1.0), kind="stable")
        return order[~np.isnan(magnitude[order])].astype(np.int64)


def sample_array(step: OpenStep, sample_index: int, name: str, dtype: type[np.generic]) -> npt.NDArray[Any]:
    """A per-token list of a rollout sample, its elements checked (missing: empty)."""
    value = step.sample(sample_index).get(name)
    if value is None:
        return np.zeros(0, dtype=dtype)
    try:
        return field_array(name, value, SAMPLE_FIELDS[name], dtype)
    except FieldTypeError as err:
        raise CorruptFileError(
            f"sample {sample_index} of step {step.summary.rollout_id} is unreadable: {err}", step.rollout_path
        ) from None


def token_view(step: OpenStep, sample_index: int) -> TokenView:
    """Build the token view of one sample of an open step."""
    sample = step.sample(sample_index)
    tokens: list[int] = sample_array(step, sample_index, "tokens", np.int64).tolist()
    train = step.train_rows.get(sample_index)
    row = step.row(sample_index)
    response_length = train.response_length if train is not None else row.response_length
    if train is not None and train.total_length != len(tokens):
        tokens = tokens[: train.total_length]
    if len(tokens) < response_length:
        reason = step.summary.alignment_reason(sample_index)
        raise CorruptFileError(
            f"sample {sample_index} of step {step.summary.rollout_id} has {len(tokens)} token ids for a "
            f"{response_length}-token response, so its tokens cannot be shown" + (f" ({reason})" if reason else ""),
            step.rollout_path,
        )
    prompt_length = len(tokens) - response_length
    loss_mask = None
    if train is not None and train.loss_mask is not None:
        loss_mask = train.loss_mask
    elif sample.get("loss_mask") is not None:
        candidate = sample_array(step, sample_index, "loss_mask", np.int64)
        loss_mask = candidate if len(candidate) == response_length else None

    fields: dict[str, FloatArray | None] = {}
    for name in PER_TOKEN_FIELDS:
        fields[name] = train.per_token.get(name) if train is not None else None
    rollout = fields["rollout_log_probs"]
    if rollout is None and sample.get("rollout_log_probs") is not None:
        candidate_lp = sample_array(step, sample_index, "rollout_log_probs", np.float64)
        rollout = candidate_lp if len(candidate_lp) == response_length else None
    log_probs = fields["log_probs"]
    diff = log_probs - rollout if log_probs is not None and rollout is not None else None
    series: dict[str, FloatArray | None] = {
        "rollout_log_probs": rollout,
        "train_log_probs": log_probs,
        "ref_log_probs": fields["ref_log_probs"],
        "lp_diff": diff,
        "imp_ratio": None if diff is None else np.exp(diff),
        "entropy": fields["entropy"],
        "ref_entropy": fields["ref_entropy"],
        "advantages": fields["advantages"],
        "returns": fields["returns"],
    }
    states = {}
    for name in SERIES:
        if series[name] is not None:
            states[name] = FieldState.OK
        else:
            states[name] = step.field_state(sample_index, _SOURCE_FIELD.get(name, name))
    return TokenView(
        rollout_id=step.summary.rollout_id,
        sample_index=sample_index,
        evaluation=step.summary.evaluation,
        token_ids=tuple(tokens),
        prompt_length=prompt_length,
        loss_mask=loss_mask,
        series=series,
        states=states,
    )


def _nullable(values: Sequence[float] | FloatArray, keep: npt.NDArray[np.bool_] | None) -> list[float | None]:
    """The values as floats, None where they are not finite or not trained on."""
    array = np.asarray(values, dtype=np.float64)
    out: list[float | None] = array.tolist()
    blank = ~np.isfinite(array)
    if keep is not None:
        blank |= ~keep
    for position in np.flatnonzero(blank).tolist():
        out[position] = None
    return out


def token_payload(
    view: TokenView, detokenizer: Detokenizer | None, start: int | None = None, end: int | None = None
) -> dict[str, Any]:
    """The ``export --tokens`` payload for token positions ``[start, end)``."""
    total = view.total_length
    lo = 0 if start is None else max(0, min(int(start), total))
    hi = total if end is None else max(lo, min(int(end), total))
    prompt = view.prompt_length
    r_lo, r_hi = max(lo - prompt, 0), max(hi - prompt, 0)
    r_lo = min(r_lo, view.response_length)
    r_hi = min(r_hi, view.response_length)
    mask = None if view.loss_mask is None else np.asarray(view.loss_mask[r_lo:r_hi])
    keep = None if mask is None else mask > 0
    ids = list(view.token_ids[lo:hi])
    decoded = detokenizer.decode(ids) if detokenizer is not None else None
    payload: dict[str, Any] = {
        "rollout_id": view.rollout_id,
        "sample_index": view.sample_index,
        "evaluation": view.evaluation,
        "total_len": total,
        "prompt_len": prompt,
        "start": lo,
        "end": hi,
        # where the response starts in token_ids: never past them when the window ends in the prompt
        "response_offset": min(max(prompt - lo, 0), hi - lo),
        "token_ids": ids,
        "token_text": None if decoded is None else decoded.texts,
        "token_text_notice": None if decoded is None else decoded.notice,
        "loss_mask": None if mask is None else mask.astype(np.int64).tolist(),
    }
    for name in SERIES:
        values = view.series[name]
        payload[name] = None if values is None else _nullable(values[r_lo:r_hi], keep)
    return payload


def find_view(step: OpenStep, sample_index: int) -> TokenView:
    """token_view with a clear error for an unknown sample."""
    if all(row.sample_index != sample_index for row in step.summary.rows):
        raise StepNotFoundError(
            f"step {step.summary.rollout_id} has no sample {sample_index}; "
            "list the step's samples with `miles-tui export RUN_DIR --step N`",
            None,
        )
    return token_view(step, sample_index)
