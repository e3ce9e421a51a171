"""Detokenize token ids with the run's own tokenizer, offline.

Contract: looks only at ``RUN_DIR/tokenizer/tokenizer.json`` (a Hugging Face
``tokenizers`` file); never downloads anything, never runs code from the
folder. No tokenizer, or one that fails to load, means ids only: callers get
None and show ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TokenizerStatus:
    """Whether token text is available, and why not when it is not."""

    available: bool
    """A tokenizer was loaded."""
    reason: str | None
    """Why there is no text (no folder, unreadable file), for the UI."""


class Detokenizer:
    """Token id -> text for one run's tokenizer."""

    def __init__(self, tokenizer_dir: Path) -> None:
        self._path = tokenizer_dir / "tokenizer.json"
        self._tokenizer: Any = None
        self.status = TokenizerStatus(False, "the run has no tokenizer/ folder: showing token ids")
        if self._path.is_file():
            self._tokenizer = _load(str(self._path), self._path.stat().st_mtime)
            if self._tokenizer is None:
                self.status = TokenizerStatus(False, f"{self._path} could not be loaded: showing token ids")
            else:
                self.status = TokenizerStatus(True, None)

    def texts(self, ids: Sequence[int]) -> list[str] | None:
        """The text of each token, decoded on its own; None without a tokenizer."""
        if self._tokenizer is None:
            return None
        decoded: list[str] = self._tokenizer.decode_batch([[int(i)] for i in ids], skip_special_tokens=False)
        return decoded


@lru_cache(maxsize=4)
def _load(path: str, mtime: float) -> Any:
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    try:
        return Tokenizer.from_file(path)
    except Exception:  # a malformed tokenizer.json must not stop the monitor
        return None
