"""Detokenize token ids with the run's own tokenizer, offline, in a child process under time and memory budgets.

Contract: looks only at ``RUN_DIR/tokenizer/tokenizer.json`` (a Hugging Face
``tokenizers`` file); never downloads anything, never runs code from the
folder. The file is the run's, so it is treated as hostile:

- It is loaded lazily (on the first decode, never when a run is opened) and in
  a child process (:mod:`miles_tui.core.dump.decode_worker`) whose address
  space is bounded (:data:`WORKER_MEMORY_MB`), whose stderr is ``/dev/null``
  (a panic of the Rust binding never writes over the UI) and which catches
  ``BaseException`` from the binding. The file is read through
  :mod:`miles_tui.core.base.run_files` (a regular file, at most ``TOKENIZER_MAX_BYTES``).
- Each answer of the child has a deadline: the load :data:`LOAD_SECONDS`; the
  probe (the vocabulary's longest tokens decoded and normalized)
  :data:`PROBE_SECONDS`, and a tokenizer whose probe does not finish in time
  (a backtracking regex in a ``Replace`` decoder or normalizer) is refused,
  naming the file; each sample's decode :func:`decode_budget`. A child that
  misses a deadline is killed and the tokenizer is not used again (its
  decoder is pathological); the caller shows ids, with a notice.
- Ids are checked against the vocabulary before they reach the binding (its
  ids are u32: ``-1`` or ``2**40`` raise OverflowError there): a sample with
  an id outside ``[0, vocabulary size)`` is shown as ids, with a notice
  naming the id.
- No tokenizer, or one that fails, means ids only: callers get ``texts`` None
  and ``notice`` (or ``status``) says why, in one line naming the file.

Decoding blocks the calling thread for at most the budget: never call it on
the UI's event loop. Calls from several threads are serialized.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from miles_tui.core.base.errors import UnreadableFileError
from miles_tui.core.base.run_files import TOKENIZER_MAX_BYTES, os_error_message, stat_regular

LOAD_SECONDS: Final = 60.0
"""Starting the child and parsing tokenizer.json (a 124 MB one takes ~10 s on a busy login node)."""
PROBE_SECONDS: Final = 2.0
"""Decoding and normalizing the vocabulary's longest tokens: milliseconds for any real tokenizer."""
DECODE_SECONDS: Final = 3.0
"""A sample's decode: the fixed part of :func:`decode_budget`."""
DECODE_SECONDS_PER_TOKEN: Final = 0.0002
"""A sample's decode: the part per token (real decoders take a few µs per token)."""
WORKER_MEMORY_MB: Final = 3072
"""Address space the child may use beyond its start-up: a real vocabulary takes a few hundred MB."""
MAX_REPLY_BYTES: Final = 1 << 30
"""A reply longer than this (decoded text of a sample) is refused."""


def decode_budget(count: int) -> float:
    """Seconds a decode of ``count`` ids may take."""
    return DECODE_SECONDS + DECODE_SECONDS_PER_TOKEN * count


@dataclass(frozen=True)
class TokenizerStatus:
    """Whether token text is available, and why not when it is not."""

    available: bool
    """A tokenizer was found (it is loaded on the first decode, which may still refuse it)."""
    reason: str | None
    """Why there is no text (no folder, unreadable or refused file), for the UI."""


@dataclass(frozen=True)
class Decoded:
    """The texts of a sequence of ids, or why there are none."""

    texts: list[str] | None
    """Each id's text, decoded on its own; None: show ids."""
    notice: str | None
    """Why ``texts`` is None although the run has a tokenizer (one line naming the file), else None."""


class _WorkerFailed(Exception):
    """The child did not answer in time, died, or answered with an error."""


class _Worker:
    """One decode child: started, probed, asked, killed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        argv = [sys.executable, "-m", "miles_tui.core.dump.decode_worker", str(path), str(WORKER_MEMORY_MB)]
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            env={**os.environ, "TOKENIZERS_PARALLELISM": "false", "RUST_BACKTRACE": "0"},
        )
        self._buffer = b""
        self._finalizer = weakref.finalize(self, _kill, self.process)

    def close(self) -> None:
        self._finalizer()

    def answer(self, seconds: float, what: str) -> dict[str, Any]:
        """The child's next reply within ``seconds`` (kills it and raises :class:`_WorkerFailed` otherwise)."""
        stdout = self.process.stdout
        assert stdout is not None
        deadline = time.monotonic() + seconds
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise _WorkerFailed(f"{what} took over {seconds:g} s")
            ready, _, _ = select.select([stdout], [], [], left)
            if not ready:
                continue
            chunk = os.read(stdout.fileno(), 1 << 20)
            if not chunk or len(self._buffer) > MAX_REPLY_BYTES:
                self.close()
                raise _WorkerFailed(f"{what} failed (the decoder process ended: out of memory?)")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise _WorkerFailed(f"{what} failed: {reply['error']}")
        return reply

    def ask(self, ids: Sequence[int], seconds: float) -> list[str]:
        stdin: IO[bytes] | None = self.process.stdin
        assert stdin is not None
        try:
            stdin.write(json.dumps({"ids": list(ids)}).encode() + b"\n")
            stdin.flush()
        except OSError:
            self.close()
            raise _WorkerFailed("decoding failed (the decoder process ended)") from None
        texts: list[str] = self.answer(seconds, f"decoding {len(ids)} tokens")["texts"]
        return texts


def _kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        process.kill()
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        process.wait(timeout=5)
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


class Detokenizer:
    """Token id -> text for one run's tokenizer."""

    def __init__(self, tokenizer_dir: Path) -> None:
        self._path = tokenizer_dir / "tokenizer.json"
        self._lock = threading.Lock()
        self._worker: _Worker | None = None
        self._vocab_size = 0
        self._refused: str | None = None
        self.status = TokenizerStatus(False, "the run has no tokenizer/ folder: showing token ids")
        try:
            st = stat_regular(self._path)
            if st.st_size > TOKENIZER_MAX_BYTES:  # refused now, as reading it would be: no child for it
                cap = TOKENIZER_MAX_BYTES >> 20
                raise UnreadableFileError(
                    f"larger than a tokenizer file can be ({st.st_size / 2**20:.0f} MiB, the cap is {cap} MiB),"
                    " so it was not read",
                    self._path,
                )
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
        self.status = TokenizerStatus(True, None)

    def texts(self, ids: Sequence[int]) -> list[str] | None:
        """The text of each token, decoded on its own; None without a usable tokenizer (see :meth:`decode`)."""
        return self.decode(ids).texts

    def decode(self, ids: Sequence[int]) -> Decoded:
        """Each id's text, or None with the reason; blocks for at most the load, probe and decode budgets."""
        if not self.status.available:
            return Decoded(None, self._refused)  # no tokenizer (None), or one refused (why)
        with self._lock:
            try:
                worker = self._started()
            except _WorkerFailed as err:
                self._refuse(f"{self._path}: {err}: refused, showing token ids")
                return Decoded(None, self.status.reason)
            for position, token_id in enumerate(ids):
                if not 0 <= int(token_id) < self._vocab_size:
                    return Decoded(
                        None,
                        f"token id {int(token_id)} at position {position} is outside the vocabulary of {self._path} "
                        f"(0..{self._vocab_size - 1}): showing token ids",
                    )
            if not ids:
                return Decoded([], None)
            try:
                return Decoded(worker.ask([int(i) for i in ids], decode_budget(len(ids))), None)
            except _WorkerFailed as err:
                self._refuse(f"{self._path}: {err}: its decoder is too slow or broken, showing token ids")
                return Decoded(None, self.status.reason)

    def close(self) -> None:
        """Stop the decode child, if one runs (also done when the Detokenizer is collected)."""
        with self._lock:
            if self._worker is not None:
                self._worker.close()
                self._worker = None

    def _started(self) -> _Worker:
        if self._refused is not None:
            raise _WorkerFailed(self._refused)
        if self._worker is not None and self._worker.process.poll() is None:
            return self._worker
        worker = _Worker(self._path)
        self._worker = worker
        self._vocab_size = int(worker.answer(LOAD_SECONDS, "loading it")["vocab"])
        worker.answer(PROBE_SECONDS, "decoding its longest tokens (a pathological regex in its decoder?)")
        return worker

    def _refuse(self, reason: str) -> None:
        """Never use this tokenizer again (its decoder is pathological, or it cannot load)."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        self._refused = reason
        self.status = TokenizerStatus(False, reason)
