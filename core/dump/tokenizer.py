"""Detokenize token ids with the run's own tokenizer, offline.

Contract: looks only at ``RUN_DIR/tokenizer/tokenizer.json`` (a Hugging Face
``tokenizers`` file); never downloads anything, never runs code from the
folder. The file is read through :mod:`miles_tui.core.run_files` (a regular file, at most
``TOKENIZER_MAX_BYTES``) and parsed from memory. No tokenizer, or one that fails
to load, means ids only: callers get None and show ids, and ``status`` says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from miles_tui.core.errors import UnreadableFileError
from miles_tui.core.run_files import TOKENIZER_MAX_BYTES, os_error_message, read_capped, stat_regular


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
        try:
            st = stat_regular(self._path)
        except (FileNotFoundError, NotADirectoryError):
            return
        except UnreadableFileError as err:
            self.status = TokenizerStatus(False, f"{err}: showing token ids")
            return
        except OSError as err:
            self.status = TokenizerStatus(
                False, f"{self._path}: {os_error_message(self._path, err)}: showing token ids"
            )
            return
        self._tokenizer, reason = _load(str(self._path), st.st_mtime_ns, st.st_size)
        self.status = TokenizerStatus(self._tokenizer is not None, reason)

    def texts(self, ids: Sequence[int]) -> list[str] | None:
        """The text of each token, decoded on its own; None without a tokenizer."""
        if self._tokenizer is None:
            return None
        decoded: list[str] = self._tokenizer.decode_batch([[int(i)] for i in ids], skip_special_tokens=False)
        return decoded


@lru_cache(maxsize=4)
def _load(path: str, mtime_ns: int, size: int) -> tuple[Any, str | None]:
    """(tokenizer, None), or (None, why not): at most ``TOKENIZER_MAX_BYTES`` read, through a safe open."""
    failed = f"{path} could not be loaded: showing token ids"
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None, failed
    try:
        text = read_capped(path, TOKENIZER_MAX_BYTES, "tokenizer file").decode("utf-8")
    except UnreadableFileError as err:
        return None, f"{err}: showing token ids"
    except (OSError, UnicodeDecodeError):
        return None, failed
    try:
        return Tokenizer.from_str(text), None
    except Exception:  # a malformed tokenizer.json must not stop the monitor
        return None, failed
