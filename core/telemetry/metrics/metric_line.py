"""One metrics.jsonl line decoded by msgspec, including the NaN/Infinity literals miles writes when exact.

Contract: :data:`decode_line` decodes a line of the record's shape (msgspec
raises on anything else); :func:`nonfinite_line` decodes a line holding
``NaN``/``Infinity``/``-Infinity`` literals (which msgspec refuses) only when
the result is provably what ``json.loads`` gives, else returns None and the
caller asks ``json.loads``. Split from :mod:`metric_batch`, which turns lines
into columns.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

import msgspec


class Line(msgspec.Struct):
    """The shape of a metrics.jsonl line msgspec decodes directly (any other shape goes through json.loads)."""

    ts: int | float
    step_key: str
    step: Any
    metrics: dict[str, int | float | None]


decode_line = msgspec.json.Decoder(Line).decode


_NONFINITE: Final = {b"NaN": math.nan, b"Infinity": math.inf, b"-Infinity": -math.inf}
_TOKEN_AFTER_KEY: Final = re.compile(rb"[ \t\n\r]*:[ \t\n\r]*(-Infinity|Infinity|NaN)")


def nonfinite_line(line: bytes) -> Line | None:
    """msgspec's decode of a line holding NaN/Infinity/-Infinity literals, or None when it cannot be proved to be
    exactly ``json.loads``' (the caller then asks ``json.loads``).

    Every literal is written ``null`` and the line decoded; it is taken only when

    - there are exactly as many null metric values as literals in the line: each literal became a metric's
      value, so none was inside a string (a key, the step key), in ``step``, in an ignored field, or
      overridden by a duplicate key (one glued to another token leaves a line msgspec refuses too);
    - each null metric's key, found quoted in the line (once: a duplicate key is left to json.loads), is
      followed (after ``:``) by a literal, the value it gets back: no null of the line's own is taken for one.

    A line with a ``null`` or a backslash of its own goes to json.loads at once (the checks above would refuse
    it where it matters; a key with an escape is not found quoted).
    """
    if b"null" in line or b"\\" in line:
        return None
    literals = line.count(b"NaN") + line.count(b"Infinity")
    if not literals:
        return None
    try:
        record = decode_line(line.replace(b"-Infinity", b"null").replace(b"Infinity", b"null").replace(b"NaN", b"null"))
    except (msgspec.DecodeError, ValueError, RecursionError):
        return None
    metrics = record.metrics
    nulls = [key for key, value in metrics.items() if value is None]
    if len(nulls) != literals:
        return None
    for key in nulls:
        quoted = b'"' + key.encode("utf-8") + b'"'
        at = line.find(quoted)
        if at < 0 or line.find(quoted, at + 1) >= 0:
            return None
        found = _TOKEN_AFTER_KEY.match(line, at + len(quoted))
        if found is None:
            return None
        metrics[key] = _NONFINITE[found.group(1)]
    return record
