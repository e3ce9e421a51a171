"""The last line of defence: no control character ever reaches the terminal inside drawn text.

Strings from the run are made visible and inert where they become text
(:func:`miles_tui.core.base.inert_text.inert`). This filter, applied by the app to every line
of every widget after layout, removes any such character that a view still
let through, so a missed call can hide a character but never let the
terminal act on it. The characters it removes are zero cells wide, so
layout is unchanged; a lone surrogate (one cell, and not encodable) becomes
U+FFFD. Segments Textual marks as control codes are its own, and are kept.
"""

from __future__ import annotations

import re

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

from miles_tui.core.base.inert_text import UNSAFE_CHARACTERS


def _drop(match: re.Match[str]) -> str:
    return "\ufffd" if 0xD800 <= ord(match.group()) <= 0xDFFF else ""


class InertLineFilter(LineFilter):
    """Remove control, bidi and separator characters from the text of drawn segments."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        search = UNSAFE_CHARACTERS.search
        if not any(search(segment.text) for segment in segments if not segment.control):
            return segments
        return [
            segment
            if segment.control or not search(segment.text)
            else Segment(UNSAFE_CHARACTERS.sub(_drop, segment.text), segment.style, segment.control)
            for segment in segments
        ]
