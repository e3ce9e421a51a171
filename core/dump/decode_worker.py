"""The child process that holds a run's tokenizer and decodes token ids for :mod:`miles_tui.core.dump.tokenizer`.

    python -m miles_tui.core.dump.decode_worker PATH MEM_MB

Contract: a ``tokenizer.json`` is the run's, so anyone who can write the run
chose its decoder: a ``Replace`` step with a backtracking regex can take
minutes per token, and past the regex engine's limit the Rust binding panics
(``pyo3_runtime.PanicException``, a ``BaseException``) and prints the panic to
fd 2. Here all of that happens in a child: its address space is limited to
what it uses after start-up plus ``MEM_MB`` MiB (a huge vocabulary fails
here, never in the monitor), its fd 2 is ``/dev/null`` (nothing of the binding
reaches the terminal), and every call into the binding catches
``BaseException``. The parent owns the clock: it kills a child that does not
answer in time.

Protocol, one JSON object per line. The child answers the load with
``{"vocab": N}`` or ``{"error": WHY}``; then, unasked, the probe: the longest
:data:`PROBE_TOKENS` tokens of the vocabulary are decoded one by one and run
through the normalizer, ``{"probed": SECONDS}`` or ``{"error": WHY}`` (the
parent refuses a tokenizer whose probe does not finish within its budget).
Then each request ``{"ids": [...]}`` (ids the parent checked against the
vocabulary) is answered ``{"texts": [...]}`` or ``{"error": WHY}``; end of input
ends the child.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from typing import Any

PROBE_TOKENS = 64
"""How many of the vocabulary's longest tokens the probe decodes and normalizes."""


def _limit_memory(mem_mb: int) -> None:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[0])
    limit = pages * resource.getpagesize() + mem_mb * 2**20
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:  # a parent under a limit of its own: never ask for more than it allows
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _reply(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _why(err: BaseException) -> str:
    """A one-line reason for a failure of the binding (its panic text is long, multi-line and the run's)."""
    if isinstance(err, MemoryError):
        return "it needs more memory than a tokenizer is allowed"
    return f"the tokenizers library failed ({type(err).__name__})"


def _longest(tokenizer: Any) -> list[tuple[str, int]]:
    """The vocabulary's longest tokens (part of the load: a 400,000-token vocabulary takes a second here)."""
    vocab: dict[str, int] = tokenizer.get_vocab(with_added_tokens=True)
    return sorted(vocab.items(), key=lambda item: len(item[0]), reverse=True)[:PROBE_TOKENS]


def _probe(tokenizer: Any, longest: list[tuple[str, int]]) -> None:
    tokenizer.decode_batch([[token_id] for _, token_id in longest], skip_special_tokens=False)
    normalizer = tokenizer.normalizer
    if normalizer is not None:
        for text, _ in longest:
            normalizer.normalize_str(text)


def main(argv: list[str]) -> int:
    path, mem_mb = argv[0], int(argv[1])
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)  # the binding's panics and warnings never reach a terminal
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        _limit_memory(mem_mb)
        from tokenizers import Tokenizer

        from miles_tui.core.base.run_files import TOKENIZER_MAX_BYTES, read_capped

        text = read_capped(path, TOKENIZER_MAX_BYTES, "tokenizer file").decode("utf-8")
        tokenizer = Tokenizer.from_str(text)
        del text
        vocab_size = int(tokenizer.get_vocab_size(with_added_tokens=True))
        longest = _longest(tokenizer)
    except BaseException as err:  # a PanicException is a BaseException
        _reply({"error": str(err) if type(err).__name__ == "UnreadableFileError" else _why(err)})
        return 0
    _reply({"vocab": vocab_size})
    started = time.monotonic()
    try:
        _probe(tokenizer, longest)
    except BaseException as err:
        _reply({"error": _why(err)})
        return 0
    _reply({"probed": time.monotonic() - started})
    for line in sys.stdin:
        try:
            ids = json.loads(line)["ids"]
            texts = tokenizer.decode_batch([[token_id] for token_id in ids], skip_special_tokens=False)
        except BaseException as err:
            _reply({"error": _why(err)})
            continue
        _reply({"texts": texts})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
