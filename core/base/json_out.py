"""Strict JSON values: what the headless output writes (NaN and ±Infinity become null).

Shared by ``export`` and the streamed metrics export; imports nothing of the project.
"""

from __future__ import annotations

import math
from typing import Any


def clean(value: Any) -> Any:
    """Replace non-finite floats by None, recursively, so the JSON is strict."""
    # Finite floats, ints and None are by far the most common items: kept without a call.
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {
            k: v if v is None or type(v) is int or (type(v) is float and math.isfinite(v)) else clean(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [
            v if v is None or type(v) is int or (type(v) is float and math.isfinite(v)) else clean(v) for v in value
        ]
    return value
