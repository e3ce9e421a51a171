"""Pure formatters from core values to short cell text: the only place numbers become strings.

Missing values render as an en dash, never as 0, so "no data" and "zero" look different.

Run strings shown in a table cell go through :func:`cell_text`: made inert, then cut to
:data:`CELL_MAX_CHARS` and normalised so that the width the table computes is the width any terminal
draws. Text is composed (NFC: ``e`` + U+0301 is ``é``); what is left whose drawn width depends on the
terminal (combining marks, zero-width and format characters such as ZWSP and ZWJ, variation selectors,
Hangul fillers like U+3164, emoji skin-tone modifiers, regional indicators) is shown as a visible
``\\uXXXX`` escape, so an emoji ZWJ sequence reads as its emoji one by one, each two cells wide.
"""

from __future__ import annotations

import math
import re
import time
import unicodedata

from rich.text import Text

from miles_tui.core.analysis import Level
from miles_tui.core.base.inert_text import inert
from miles_tui.core.dump import PER_TOKEN_STATISTICS, SampleRow

MISSING = "–"
CELL_MAX_CHARS = 256
"""Characters of a run string a table cell keeps (the widest column is a few dozen cells)."""
_UNSTABLE_CATEGORIES = frozenset({"Mn", "Me", "Mc", "Cf", "Cs", "Co", "Cn"})
"""Combining marks, format characters (ZWSP, ZWJ, soft hyphen), surrogates, private use, unassigned."""
_FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u180e")
"""Hangul fillers and the Mongolian vowel separator: blank, and drawn 0, 1 or 2 cells wide."""
_DIGITS = re.compile(r"^[0-9]+$")
"""A numeric weight version: decimal digits only ("+3", " 3 ", "-1" are labels, shown as dumped)."""


def number(value: float | int | None, digits: int = 3) -> str:
    """A compact number; en dash for None or non-finite."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return MISSING
    if value != 0 and (abs(value) >= 10 ** (digits + 2) or abs(value) < 10 ** (-digits)):
        mantissa, exponent = f"{value:.{max(digits - 1, 1)}e}".split("e")
        return f"{mantissa}e{int(exponent)}"  # 6.72e-5, not 6.72e-05: a 7-wide column keeps the exponent
    return f"{value:.{digits}f}"


OVERFLOW = "…"
"""A value no exact shorter form of fits in its cell: a visible mark, never a cut prefix of the value."""


def _scientific(value: float, mantissa_digits: int) -> str:
    mantissa, exponent = f"{value:.{mantissa_digits}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def number_within(value: float | int | None, width: int, digits: int = 3) -> str:
    """:func:`number`, or, when that is wider than ``width`` cells, the most precise shorter form that fits.

    The shorter forms are exact at the precision they show: fewer decimals (rounded), then scientific
    notation with fewer mantissa digits; when none fits, :data:`OVERFLOW`. A number is never cut: 0.018 in
    four cells reads ``0.02``, never ``0.01``.
    """
    text = number(value, digits)
    if len(text) <= width or value is None or isinstance(value, bool):
        return text
    if isinstance(value, float) and not math.isfinite(value):
        return text
    if isinstance(value, float):
        for fewer in range(digits - 1, -1, -1):
            fixed = f"{value:.{fewer}f}"
            # a fixed form that rounds a non-zero value to zero says less than scientific notation does
            if len(fixed) <= width and (value == 0 or float(fixed) != 0):
                return fixed
    for mantissa in range(max(digits - 1, 1), -1, -1):
        short = _scientific(float(value), mantissa)
        if len(short) <= width:
            return short
    return OVERFLOW


def percent(value: float | None) -> str:
    """A fraction as a percentage."""
    return MISSING if value is None else f"{value:.0%}"


def percent_fine(value: float | None) -> str:
    """A fraction as a percentage with one decimal (an MFU: ``11.6%``)."""
    return MISSING if value is None or not math.isfinite(value) else f"{value:.1%}"


def fixed(value: float, decimals: int) -> str:
    """``value`` with exactly ``decimals`` decimals, rounded: ``fixed(0.018, 2)`` is ``0.02``."""
    return f"{value:.{decimals}f}"


def significant(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, as short as that goes: ``0.5``, ``12.5``, ``1.25e+04``."""
    return f"{value:.{digits}g}"


def count_text(value: int) -> str:
    """A count with thousands separators: ``12,345``."""
    return f"{value:,}"


def points(fraction: float) -> str:
    """A difference of two fractions in whole percentage points: ``12pt``."""
    return f"{fraction * 100:.0f}pt"


def magnitude(value: float) -> str:
    """A throughput or count: ``1.25M``, ``12.5k``, ``980``, ``2.5`` (en dash when not a number)."""
    if not math.isfinite(value):
        return MISSING
    if abs(value) >= 1e6:
        return f"{value / 1e6:.2f}M"
    if abs(value) >= 1e4:
        return f"{value / 1e3:.1f}k"
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def latency(seconds: float) -> str:
    """A latency: milliseconds under a second (``12.3ms``), else seconds (``1.25s``)."""
    if not math.isfinite(seconds):
        return MISSING
    return f"{seconds * 1000:.1f}ms" if abs(seconds) < 1 else f"{seconds:.2f}s"


def memory(mem_mb: float) -> str:
    """MB as a short GiB figure: ``79.6G``, ``512M``."""
    if math.isnan(mem_mb):
        return MISSING
    return f"{mem_mb / 1024:.1f}G" if mem_mb >= 1024 else f"{mem_mb:.0f}M"


def util_text(value: float) -> str:
    """A utilisation in percent (0-100): ``87%``, en dash for none."""
    return MISSING if math.isnan(value) else f"{value:.0f}%"


def share_text(share: float) -> str:
    """A share of a window as a whole percent, ``<1%`` for a sliver (never a 0% that was there)."""
    return "<1%" if 0 < share < 0.005 else f"{share * 100:.0f}%"


def tflops(value: float | None) -> str:
    """A device peak in TFLOP/s (``989 TFLOP/s``)."""
    return MISSING if value is None or not math.isfinite(value) else f"{value:g} TFLOP/s"


def _unstable(char: str) -> bool:
    code = ord(char)
    return (
        char in _FILLERS
        or 0x1F3FB <= code <= 0x1F3FF  # skin-tone modifiers: joined to the emoji before them, or not
        or 0x1F1E6 <= code <= 0x1F1FF  # regional indicators: a pair is one flag, or two letters
        or unicodedata.category(char) in _UNSTABLE_CATEGORIES
    )


def cell_text(text: str) -> str:
    """A run string for a table cell: inert, at most CELL_MAX_CHARS, and drawn as wide as it is computed."""
    if len(text) > CELL_MAX_CHARS:
        text = text[:CELL_MAX_CHARS] + "…"
    text = inert(unicodedata.normalize("NFC", text))
    if text.isascii():
        return text
    return "".join(_escape(c) if _unstable(c) else c for c in text)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def trend_scale(low: float, high: float, fraction: bool) -> str:
    """A trend's window min and max beside its line (``0.417–0.500``, ``0%–20%``), or ``= value`` when every
    value is the same."""
    show = percent if fraction else (lambda v: number_within(v, 6))
    if low == high:
        return f"= {show(low)}"
    return f"{show(low)}–{show(high)}"


def version_span(row: SampleRow) -> str:
    """The sample's weight versions: ``v5``, or ``v3–v5`` when it spans several; others as dumped (made a
    table cell's text: :func:`cell_text`)."""
    if row.weight_version is None:
        return MISSING
    last = cell_text(row.weight_version)
    label_last = f"v{last}" if _DIGITS.match(last) else (last or "''")
    if row.mixed_version and row.weight_version_min is not None and str(row.weight_version_min) != last:
        return f"v{row.weight_version_min}–{label_last}"
    if row.mixed_version:
        return f"{label_last}*"
    return label_last


def duration(seconds: float | None, *, padded: bool = False, minutes: bool = False) -> str:
    """A duration in its two largest units, in whole seconds gone by (as a clock counts): ``45s``, ``7m30s``,
    ``1h52m``, ``3d04h``.

    ``padded``: a zero smaller unit is written (``15m00s``, ``2h00m``: an age column's width holds still),
    else left out (``15m``, ``2h``, ``2d``). ``minutes``: from a minute up, rounded to the minute (a tick
    label's ``5m``, ``1h30m``). Negative durations are 0; None or not finite is :data:`MISSING`.
    """
    if seconds is None or not math.isfinite(seconds):
        return MISSING
    total = math.floor(max(0.0, seconds))
    if minutes and total >= 60:
        total = round(seconds / 60) * 60
    if total < 60:
        return f"{total}s"
    whole_minutes, rest = divmod(total, 60)
    if whole_minutes < 60:
        return _two_units(whole_minutes, "m", rest, "s", padded)
    hours, rest = divmod(whole_minutes, 60)
    if hours < 48:
        return _two_units(hours, "h", rest, "m", padded)
    days, rest = divmod(hours, 24)
    return _two_units(days, "d", rest, "h", padded)


def cadence(seconds: float | None) -> str:
    """How often something is sampled: rounded, not floored as :func:`duration` counts time gone by (a 0.9998 s
    sampler is ``1s``, never ``0s``); under a second to one significant digit (``0.5s``); from a minute up as
    :func:`duration` with ``minutes``."""
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        return MISSING
    if seconds < 0.95:
        return f"{significant(seconds, 1)}s"
    if seconds < 59.5:
        return f"{round(seconds)}s"
    return duration(max(60.0, seconds), minutes=True)


def _two_units(large: int, large_unit: str, small: int, small_unit: str, padded: bool) -> str:
    return f"{large}{large_unit}{small:02d}{small_unit}" if small or padded else f"{large}{large_unit}"


def step_label(step: float) -> str:
    """A step as text: an integer when it is one."""
    return str(int(step)) if math.isfinite(step) and step == int(step) else number(step)


def step_range(first: float, last: float) -> str:
    """A window of steps, its ends rounded to whole steps: ``90–179``."""
    return f"{step_label(round(first))}–{step_label(round(last))}"


def metric_value(value: float) -> str:
    """A metric value to four significant digits (en dash when it is not a number)."""
    if not math.isfinite(value):
        return MISSING if math.isnan(value) else ("∞" if value > 0 else "-∞")
    if value and (abs(value) >= 1e6 or abs(value) < 1e-4):
        return f"{value:.3e}"
    return f"{value:.4g}"


def reading_text(value: float | None) -> str:
    """A per-token value as shown next to a series ("masked" when the position has none)."""
    return "masked" if value is None else number(value, 4)


def watts(value: float | None) -> str:
    """A power draw: ``603W``, en dash for none."""
    if value is None or not math.isfinite(value):
        return MISSING
    return f"{value:.0f}W"


def seconds_text(value: float | None) -> str:
    """A short duration with a decimal under a minute: ``4.2s``, else as :func:`duration` pads it."""
    if value is None or not math.isfinite(value):
        return MISSING
    return f"{value:.1f}s" if value < 60 else duration(value, padded=True)


def date_time(ts: float | None) -> str:
    """An absolute time, in UTC so every pane and ``report`` say the same: ``2026-08-20 11:40 UTC``."""
    if ts is None or not math.isfinite(ts):
        return MISSING
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts))


LEVEL_STYLE = {Level.CRITICAL: "bold red", Level.WARNING: "yellow", Level.INFO: "cyan"}
LEVEL_TAG = {Level.CRITICAL: "CRIT", Level.WARNING: "WARN", Level.INFO: "INFO"}


def level_badge(level: Level) -> Text:
    """A level as text that reads without colour too (NO_COLOR): [CRIT] / [WARN] / [INFO]."""
    return Text(f"[{LEVEL_TAG[level]}]", style=LEVEL_STYLE[level])


UNREAD = "UNREAD"
"""A value that exists in the dump but could not be read or placed: never shown as missing (–) or 0."""
UNREAD_STYLE = "bold red"

TRAIN_ROW_COLUMNS = frozenset({"raw_reward", "normalized_reward", "dumped_rank"})
"""ROW columns read from the sample's train row (unreadable when that row is in a file that failed to load)."""


def unreadable(row: SampleRow, column: str) -> bool:
    """Whether ``row``'s ``column`` is missing because its data is unreadable (not because it was never dumped).

    A sample flagged ``alignment_failed`` has per-token data that could not be placed: its missing per-token
    statistics are unreadable. When it has no train row at all (its train file failed to load), the values
    of the train row are unreadable too.
    """
    if not row.alignment_failed or getattr(row, column) is not None:
        return False
    return column in PER_TOKEN_STATISTICS or (column in TRAIN_ROW_COLUMNS and row.dumped_rank is None)


def unread_text(pending: bool = False) -> Text:
    """The cell of an unreadable value (legible without colour); ``pending``: the step is still being written."""
    return Text("…", style="yellow") if pending else Text(UNREAD, style=UNREAD_STYLE)


REMOVED = "✗ removed"
"""Said after a sample's status when the rollout removed it from training (legible without colour)."""


def status_text(row: SampleRow, style: str = "") -> Text:
    """A sample's status as a cell: ``completed``, or ``completed ✗ removed`` for a removed sample."""
    text = Text(cell_text(row.status or MISSING), style=style)
    if row.remove_sample:
        text.append(f" {REMOVED}", style="red")
    return text
