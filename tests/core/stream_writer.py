"""A writer process for the follow tests: appends JSONL the way a slow writer does.

Each line is written in two parts with a pause between them, so a reader that
polls meanwhile sees a partial last line. Run it in another process
(multiprocessing, spawn) to race real pollers.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import BinaryIO


def append_slowly(plan: list[tuple[str, bytes]], seed: int, pause: float = 0.001) -> None:
    """Append each ``(path, line)`` in order: a first part, flush, sleep ``pause``, the rest."""
    rng = random.Random(seed)
    handles: dict[str, BinaryIO] = {}
    try:
        for path, line in plan:
            handle = handles.get(path)
            if handle is None:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                handle = handles[path] = open(path, "ab", buffering=0)  # noqa: SIM115 (closed below)
            cut = rng.randrange(1, len(line))
            handle.write(line[:cut])  # unbuffered: on disk now, without its newline
            time.sleep(pause)
            handle.write(line[cut:])
    finally:
        for handle in handles.values():
            handle.close()
