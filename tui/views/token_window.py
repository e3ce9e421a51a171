"""Where the sample screen's token cursor is, and which token positions its panels show.

Contract: a :class:`TokenWindow` is a value (frozen): the cursor's response
position, the chosen window size (256 / 1k / 4k / all tokens, sizes not
smaller than the sequence left out), the visible ``[start, stop)`` token
positions and the rank of the outlier the cursor was last sent to. Every
move returns a new value; nothing here draws or reads. The window keeps the
cursor inside: it stays put while the cursor moves within it; when the
cursor leaves it forward, it is placed with the cursor three quarters in (so
reading on shows what comes next), otherwise (backward, a new size, a new
sample) a quarter in; always clamped to the sequence. An empty response
keeps the cursor at 0.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

WINDOWS: tuple[int | None, ...] = (256, 1024, 4096, None)
"""Visible window sizes in tokens, ``w`` cycles; None is the whole sequence."""


@dataclass(frozen=True, eq=False)
class OutlierStep:
    """What a step through the outliers did."""

    window: TokenWindow
    """The window after the step (unchanged when it did not move)."""
    note: str | None
    """Why the cursor did not move (None when it did)."""


@dataclass(frozen=True, eq=False)
class TokenWindow:
    """The token cursor and the visible window over one sample's tokens."""

    prompt_length: int
    """Tokens before the response."""
    response_length: int
    """Response tokens (the cursor moves over these)."""
    outliers: npt.NDArray[np.int64]
    """Response positions by |lpΔ|, largest first (core's ``outlier_positions``)."""
    cursor: int = 0
    """Response position under the cursor."""
    choice: int = 0
    """Index into :meth:`sizes`."""
    window: tuple[int, int] = (0, 0)
    """Visible token positions ``[start, stop)``; (0, 0) before the first move."""
    outlier_rank: int = -1
    """Rank of the outlier last jumped to (-1: none)."""

    @property
    def total_length(self) -> int:
        return self.prompt_length + self.response_length

    @property
    def position(self) -> int:
        """The cursor as a token position (prompt included)."""
        return self.prompt_length + self.cursor

    def sizes(self) -> list[int | None]:
        """The window sizes this sample offers (a size as long as the sequence is just 'all')."""
        return [size for size in WINDOWS if size is None or size < self.total_length]

    @property
    def size(self) -> int | None:
        """The chosen window size in tokens (None: all)."""
        return self.sizes()[self.choice]

    def for_sample(self, prompt_length: int, response_length: int, outliers: npt.NDArray[np.int64]) -> TokenWindow:
        """This window's size choice on another sample, cursor on its first response token."""
        fresh = TokenWindow(prompt_length, response_length, outliers)
        fresh = replace(fresh, choice=min(self.choice, len(fresh.sizes()) - 1))
        return fresh.moved_to(0)

    def moved_to(self, response_position: int) -> TokenWindow:
        """The cursor on a response position (clamped to the response), the window around it."""
        length = self.response_length
        cursor = max(0, min(response_position, length - 1)) if length else 0
        return replace(self, cursor=cursor, window=self._place(self.prompt_length + cursor))

    def moved_by(self, delta: int) -> TokenWindow:
        return self.moved_to(self.cursor + delta)

    def at_end(self, last: bool) -> TokenWindow:
        """The cursor on the first or last response token."""
        return self.moved_to(self.response_length - 1 if last else 0)

    def cycled(self) -> TokenWindow:
        """The next window size, placed afresh around the cursor."""
        choice = (self.choice + 1) % len(self.sizes())
        return replace(self, choice=choice, window=(0, 0)).moved_to(self.cursor)

    def outlier_step(self, step: int) -> OutlierStep:
        """The cursor on the next (``step`` 1) or previous (-1) outlier, or a note why not."""
        if len(self.outliers) == 0:
            return OutlierStep(self, "no lpΔ for this sample (needs train and rollout log-probs): no outliers")
        rank = self.outlier_rank + step
        if not 0 <= rank < len(self.outliers):
            return OutlierStep(self, "no more outliers" if step > 0 else "already at the largest |lpΔ|")
        return OutlierStep(replace(self, outlier_rank=rank).moved_to(int(self.outliers[rank])), None)

    def on_outlier(self) -> int | None:
        """The outlier rank the cursor stands on (None when it has moved off it)."""
        rank = self.outlier_rank
        if 0 <= rank < len(self.outliers) and self.outliers[rank] == self.cursor:
            return rank
        return None

    def _place(self, position: int) -> tuple[int, int]:
        total = self.total_length
        size = self.size or total
        start, stop = self.window
        if stop - start == size and start <= position < stop:
            return self.window
        lead = size * 3 // 4 if position >= stop and stop - start == size else size // 4
        start = max(0, min(position - lead, total - size))
        return start, start + size
