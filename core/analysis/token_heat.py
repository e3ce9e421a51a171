"""One per-token statistic of a sample, ranked into deciles of that sample: what the sample view colours text by.

Contract: :func:`token_heat` takes a sample's
:class:`~miles_tui.core.dump.token_view.TokenView` and a
:class:`HeatStatistic` (any of the nine per-token series: |lpΔ|, entropy, advantage, ratio, return, ref
entropy and the train, rollout and ref log-probs) and returns a
:class:`TokenHeat`: the statistic at every response position and a *level*
for each. A trained position with a value has its decile among the sample's
own values (0 lowest … 9 top: above the 90th percentile); a loss-masked
position is :data:`MASKED` (the engine never scored it); a trained position
without a value (NaN in the dump, or a series that is UNREADABLE or NOT_DUMPED
for this sample) is :data:`NO_VALUE`. Neither is ever a decile, so a missing
value never passes for a low one. Deciles are cut over the finite trained
values only; ``+inf`` ranks top and ``-inf`` bottom. A level counts the cut
points strictly below the value, so tied values share a level and a series
that is the same at every trained token has no top decile (``spread`` is
False). Pure: no I/O, never formats a value for display.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from miles_tui.core.dump import FieldState, TokenView

FloatArray = npt.NDArray[np.float64]
LevelArray = npt.NDArray[np.int8]

DECILES: Final = 10
"""Levels 0 … 9 for positions with a value."""
TOP: Final = DECILES - 1
"""The top decile's level."""
MASKED: Final = -1
"""Level of a loss-masked position: not trained, so never scored."""
NO_VALUE: Final = -2
"""Level of a trained position with no value (NaN, or the series is unreadable or not dumped)."""


class HeatStatistic(enum.Enum):
    """A statistic the token text can be coloured by (the value is its name on screen)."""

    LP_DIFF = "|lpΔ|"
    ENTROPY = "entropy"
    ADVANTAGE = "advantage"
    RATIO = "ratio"
    RETURN = "return"
    REF_ENTROPY = "ref entropy"
    TRAIN_LOGP = "train logp"
    ROLLOUT_LOGP = "rollout logp"
    REF_LOGP = "ref logp"

    @property
    def series(self) -> str:
        """The token-view series it is read from."""
        return _SERIES[self]


_SERIES = {
    HeatStatistic.LP_DIFF: "lp_diff",
    HeatStatistic.ENTROPY: "entropy",
    HeatStatistic.ADVANTAGE: "advantages",
    HeatStatistic.RATIO: "imp_ratio",
    HeatStatistic.RETURN: "returns",
    HeatStatistic.REF_ENTROPY: "ref_entropy",
    HeatStatistic.TRAIN_LOGP: "train_log_probs",
    HeatStatistic.ROLLOUT_LOGP: "rollout_log_probs",
    HeatStatistic.REF_LOGP: "ref_log_probs",
}
"""Every per-token series a token view has (the nine miles' dashboard colours tokens by)."""


@dataclass(frozen=True, eq=False)
class TokenHeat:
    """One statistic over a sample's response, each position with its level."""

    statistic: HeatStatistic
    """What is ranked."""
    state: FieldState
    """Whether the series behind it is OK, NOT_DUMPED or UNREADABLE for this sample."""
    values: FloatArray
    """The statistic at each response position (NaN where there is none; |lpΔ| is the absolute)."""
    levels: LevelArray
    """Per response position: 0 … 9 (decile), :data:`MASKED` or :data:`NO_VALUE`."""
    cuts: tuple[float, ...]
    """The 10th … 90th percentiles of the finite trained values (empty when there are none)."""
    counted: int
    """How many trained positions have a finite value (what the deciles are over)."""
    low: float | None
    """The smallest finite trained value."""
    high: float | None
    """The largest finite trained value."""

    @property
    def spread(self) -> bool:
        """Whether the values differ at all (else no position is in the top decile)."""
        return self.low is not None and self.high is not None and self.high > self.low

    @property
    def top_cut(self) -> float | None:
        """Values strictly above this are the top decile (None without values)."""
        return self.cuts[-1] if self.cuts else None

    def top(self) -> npt.NDArray[np.bool_]:
        """Response positions in the top decile."""
        return np.asarray(self.levels == TOP)


def token_heat(view: TokenView, statistic: HeatStatistic) -> TokenHeat:
    """Rank ``statistic`` over ``view``'s response into the sample's own deciles."""
    length = view.response_length
    trained = view.trained()
    raw = view.series.get(statistic.series)
    state = view.states.get(statistic.series, FieldState.NOT_DUMPED)
    if raw is None or state is not FieldState.OK:
        levels = np.where(trained, NO_VALUE, MASKED).astype(np.int8)
        return TokenHeat(statistic, state, np.full(length, np.nan), levels, (), 0, None, None)
    values = np.asarray(raw, dtype=np.float64)
    if statistic is HeatStatistic.LP_DIFF:
        values = np.abs(values)
    values = np.where(trained, values, np.nan)
    finite = values[np.isfinite(values)]
    levels = np.full(length, MASKED, dtype=np.int8)
    levels[trained] = NO_VALUE
    if finite.size == 0:  # nothing to cut deciles over: infinities still rank at their end
        levels[values == np.inf] = TOP
        levels[values == -np.inf] = 0
        return TokenHeat(statistic, state, values, levels, (), 0, None, None)
    cuts = np.quantile(finite, np.arange(1, DECILES) / DECILES)
    valued = ~np.isnan(values)  # trained, finite or infinite
    levels[valued] = np.searchsorted(cuts, values[valued], side="left").astype(np.int8)
    low, high = float(finite.min()), float(finite.max())
    return TokenHeat(statistic, state, values, levels, tuple(float(c) for c in cuts), int(finite.size), low, high)
