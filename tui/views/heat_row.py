"""One line of the heat rows (``label  heat strip  suffix``) as data: what a view hands the widget to draw.

The rows modules build these; :class:`~miles_tui.tui.widgets.heat_rows.HeatRows` lays them out and draws them.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from rich.style import Style
from rich.text import Text

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class HeatRow:
    """One line: a label, a strip of values (or categories, or plain text in the strip's place) and a suffix."""

    key: Hashable
    """Stable identity (a lane, a phase band)."""
    label: Text
    """Left column."""
    values: FloatArray | None = None
    """Binned values on ``[0, scale]`` (NaN: no data); None draws ``text`` instead."""
    suffix: Text | None = None
    """Right column."""
    scale: float = 100.0
    """The value drawn as a full cell."""
    styles: tuple[Style, ...] = ()
    """A style per level (one: all levels alike); empty: the heat palette."""
    text: Text | None = None
    """Drawn in the strip's place when there are no values (an axis, a message)."""
    kinds: IntArray | None = None
    """A category per bin (-1: none), drawn as ``marks[k]`` in ``styles[k]`` in the strip's place (a phase band)."""
    marks: tuple[str, ...] = ()
    """The character of each category."""
