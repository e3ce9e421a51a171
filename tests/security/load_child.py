"""Child process: load one input under an address-space limit, touch every value, report as JSON.

    python tests/security/load_child.py pt|pickle PATH MEM_MB          one input, one JSON line
    python tests/security/load_child.py sidecar|tokenizer PATH MEM_MB  a run's trajectory/1.jsonl, tokenizer.json
    python tests/security/load_child.py telemetry RUN_DIR MEM_MB       a run's dashboard/, by every reader
    python tests/security/load_child.py serve - MEM_MB                 many: JSON requests on stdin

The last line of stdout is ``{"outcome": "value" | "error" | "crash", ...}``;
"error" means the project's own error (core/base/errors.py), with whether its
message names the input. A crash of the interpreter itself shows as the exit
status. ``serve`` mode answers one request line (``{"kind": ..., "path": ...}``)
per case, so a fuzzer pays for the imports once.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from miles_tui.core.base.errors import MilesTuiError
from miles_tui.core.dump import Detokenizer, conversation_document, read_sidecar
from miles_tui.core.dump.pt.pt_archive import load_pt, loads_pickle
from miles_tui.core.dump.tokenizer import decode_budget

TOUCH_LIMIT = 200_000
"""Values visited per load (a DAG of shared lists can spell a huge tree: visit each object once)."""


def _limit_memory(mem_mb: int) -> None:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[0])
    vsz = pages * resource.getpagesize()
    limit = vsz + mem_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _touch(value: Any) -> None:
    """What a report does with a loaded value: str() of each leaf, arithmetic on each array."""
    seen: set[int] = set()
    stack = [value]
    while stack and len(seen) < TOUCH_LIMIT:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
        elif isinstance(item, np.ndarray):
            if item.dtype.kind in "biufc" and item.size < 2**24:
                item.sum(dtype=np.float64)
            str(item)
        elif hasattr(item, "args") and hasattr(item, "state"):
            stack.append(item.args)
            stack.append(item.state)
        elif hasattr(item, "texts") and hasattr(item, "notice"):  # a tokenizer case's Decoded
            stack.append(item.texts)
            stack.append(item.notice)
        else:
            str(item)


TOKEN_IDS = [*range(64), 255, 256, 1000, -1, 2**31, 2**40]
"""Ids a tokenizer case decodes: its first ids, some past a small vocabulary, some no vocabulary holds."""


def _sidecar(path: str) -> Any:
    """What the conversation view and ``export --conversation`` do with a sidecar: every conversation's document."""
    sidecar = read_sidecar(Path(path).parents[1], 1, False)
    if sidecar is None:
        raise AssertionError("the sidecar was not found")
    documents = [conversation_document(c) for c in sidecar.conversations.values()]
    return {"documents": documents, "bad_lines": sidecar.bad_lines, "problem": sidecar.problem}


def _tokenizer(path: str) -> Any:
    """What the sample view does with a tokenizer: decode ids, within the budget, then the notice."""
    detokenizer = Detokenizer(Path(path).parent)
    started = time.monotonic()
    try:
        decoded = detokenizer.decode(TOKEN_IDS)
        decoded_again = detokenizer.decode(TOKEN_IDS[:8])
    finally:
        detokenizer.close()
    elapsed = time.monotonic() - started
    if elapsed > 60 + 2 + 2 * decode_budget(len(TOKEN_IDS)):  # load + probe + two decodes
        raise AssertionError(f"decoding took {elapsed:.1f} s, past the detokenizer's budgets")
    if decoded.texts is None and decoded.notice is None and detokenizer.status.available:
        raise AssertionError("no text and no notice")
    return [decoded, decoded_again]


def _load(kind: str, path: str, now: float | None = None) -> dict[str, Any]:
    try:
        if kind == "telemetry":
            from telemetry_child import load_telemetry  # beside this script (sys.path[0])

            kept = Path(path) / "now"  # a case the fuzzer kept says when it was read
            found = load_telemetry(Path(path), now if now is not None else float(kept.read_text()))
            return {"outcome": "value", "type": "telemetry", "found": found}
        if kind == "sidecar":
            value = _sidecar(path)
        elif kind == "tokenizer":
            value = _tokenizer(path)
        else:
            value = load_pt(path) if kind == "pt" else loads_pickle(Path(path).read_bytes(), path)
        _touch(value)
        return {"outcome": "value", "type": type(value).__name__}
    except MilesTuiError as err:
        return {"outcome": "error", "class": type(err).__name__, "message": str(err), "names_file": path in str(err)}
    except BaseException as err:  # anything else is a bug the caller reports
        return {"outcome": "crash", "class": type(err).__name__, "message": str(err)[:2000]}


def _maxrss_mb() -> float:
    """This process's peak RSS (VmHWM: unlike ru_maxrss, not inherited from the parent across exec)."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str]) -> int:
    kind, path, mem_mb = argv[0], argv[1], int(argv[2])
    _limit_memory(mem_mb)
    if kind != "serve":
        report = _load(kind, path)
        report["maxrss_mb"] = _maxrss_mb()
        print(json.dumps(report), flush=True)
        return 0
    for line in sys.stdin:
        request = json.loads(line)
        report = _load(request["kind"], request["path"], request.get("now"))
        report["maxrss_mb"] = _maxrss_mb()
        print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
