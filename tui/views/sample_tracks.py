"""One sample prepared for the sample screen: computed once when the sample is shown, read on every key.

Contract: :meth:`SampleTracks.load` takes an open step, a sample index and
the detokenizer, and holds the sample's row, its core
:class:`~miles_tui.core.dump.token_view.TokenView`, each OK series spread over
every token position (NaN on prompt and loss-masked positions, never 0), the
band of each position (prompt / trained / masked), the outlier order and the
token texts. It reads nothing but the step it is given (and the
detokenizer's vocabulary); unknown samples raise core's errors. Loading
decodes the token texts (in the detokenizer's child, up to its time budget):
never call :meth:`SampleTracks.load` on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from miles_tui.core.dump import SERIES, Detokenizer, OpenStep, SampleRow, TokenView
from miles_tui.core.dump.token_view import token_view
from miles_tui.tui.renderers.sparkline import Band, BandArray, FloatArray


@dataclass(frozen=True, eq=False)
class TokenSeries:
    """A per-token series over every token position of a sample (compared by identity)."""

    values: FloatArray
    """One value per token position; NaN where there is none (prompt, loss-masked)."""
    bands: BandArray
    """One :class:`~miles_tui.tui.renderers.sparkline.Band` per token position."""


@dataclass(frozen=True, eq=False)
class SampleTracks:
    """One sample prepared for drawing."""

    row: SampleRow
    """The sample's row of the step summary."""
    view: TokenView
    """Its per-token values, from core."""
    tracks: dict[str, TokenSeries]
    """OK series over every token position (NaN on prompt and masked positions)."""
    bands: BandArray
    """One band per token position."""
    outliers: npt.NDArray[np.int64]
    """Response positions by |lpΔ|, largest first."""
    texts: list[str] | None
    """Each token's text (None without a tokenizer)."""
    text_notice: str | None
    """Why ``texts`` is None although the run has a tokenizer (refused, too slow, an id outside it)."""
    unreadable_note: str
    """Why an UNREADABLE series of this sample has no values."""

    @classmethod
    def load(cls, step: OpenStep, sample_index: int, detokenizer: Detokenizer | None) -> SampleTracks:
        row = step.row(sample_index)  # StepNotFoundError for an unknown sample
        view = token_view(step, sample_index)
        trained = view.trained()
        bands = np.full(view.total_length, int(Band.PROMPT), dtype=np.int8)
        bands[view.prompt_length :] = np.where(trained, int(Band.TRAINED), int(Band.MASKED))
        tracks = {}
        for name in SERIES:
            masked = view.masked(name)
            if masked is not None:
                values: FloatArray = np.full(view.total_length, np.nan)
                values[view.prompt_length :] = masked
                tracks[name] = TokenSeries(values, bands)
        decoded = detokenizer.decode(view.token_ids) if detokenizer is not None else None
        note = (
            "UNREADABLE: its train file could not be loaded"
            if sample_index in step.unreadable
            else "UNREADABLE: dumped, but its slices could not be placed"
        )
        texts, notice = (None, None) if decoded is None else (decoded.texts, decoded.notice)
        return cls(row, view, tracks, bands, view.outlier_positions(), texts, notice, note)

    def value(self, name: str, response_position: int) -> float | None:
        """A series at a response position; None where it has no value."""
        track = self.tracks.get(name)
        if track is None or not 0 <= response_position < self.view.response_length:
            return None
        value = float(track.values[self.view.prompt_length + response_position])
        return None if np.isnan(value) else value
