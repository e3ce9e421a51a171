"""A run directory whose every string carries terminal escape sequences, written as an attacker would.

The run is a deterministic demo run (``miles_tui.core.synth.writer`` via ``miles_tui.core.synth.demo``) whose
strings are then rewritten: the run name in ``meta.json``, every string of
every rollout sample (status, weight versions, prompt, response), every
string of the conversation sidecars (roles, names, content, tool calls),
every key and string of the telemetry streams (metric names, step keys, phase
names, node names), the token texts of a ``tokenizer/tokenizer.json``, and the
folder's own name. Each carries :data:`EVIL`: an OSC 52 clipboard write, an
OSC 0 title, a clear-screen, a C1 CSI, a bidi override and a NUL.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from miles_tui.core.base.inert_text import UNSAFE_CHARACTERS
from miles_tui.core.dump.pt.pt_archive import load_pt
from miles_tui.core.synth.dump_files import save_rollout
from tests.conftest import EPOCH, stamp, write_demo_run

CLIPBOARD = "\x1b]52;c;SElKQUNLRUQ=\x1b\\"
"""OSC 52: put "HIJACKED" on the clipboard (a tmux paste buffer with set-clipboard on)."""
TITLE = "\x1b]0;PWNED\x07"
"""OSC 0: retitle the window / tmux pane."""
CLEAR = "\x1b[2J\x1b[H"
"""Clear the screen."""
EVIL = f"{CLIPBOARD}{TITLE}{CLEAR}\x9b7m\u202eLIVE\x00"
"""Appended to every string of the run."""

VISIBLE_ESC = "\\x1b"
"""How an ESC from the run must show."""


def unsafe(text: str) -> list[str]:
    """The characters of ``text`` a terminal could act on (empty: the text is inert)."""
    return UNSAFE_CHARACTERS.findall(text)


def _evil(value: Any) -> Any:
    """Every string inside ``value`` (not dict keys) with EVIL appended."""
    if isinstance(value, str):
        return value + EVIL
    if isinstance(value, dict):
        return {k: _evil(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_evil(v) for v in value]
    return value


def _rewrite_jsonl(path: Path, transform: Callable[[Any], Any]) -> None:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    path.write_text("".join(json.dumps(transform(line)) + "\n" for line in lines))  # ensure_ascii: \u001b


def _sample(sample: dict[str, Any]) -> dict[str, Any]:
    out = dict(sample)
    for key in ("status", "response", "prompt", "weight_versions", "label"):
        out[key] = _evil(sample.get(key))
    return out


def _telemetry_record(record: Any) -> Any:
    out = dict(record)
    for key in ("name", "node", "role", "step_key"):
        if isinstance(out.get(key), str):
            out[key] = out[key] + EVIL
    if isinstance(out.get("metrics"), dict):
        out["metrics"] = {name + EVIL: value for name, value in out["metrics"].items()}
    return out


def _tokenizer(root: Path, vocab_size: int) -> None:
    tokenizers = __import__("tokenizers")
    vocab = {f"t{i}" + (EVIL if i % 3 == 0 else ""): i for i in range(vocab_size)}
    model = tokenizers.models.WordLevel(vocab=vocab, unk_token="t1")
    tokenizer = tokenizers.Tokenizer(model)
    (root / "tokenizer").mkdir(exist_ok=True)
    tokenizer.save(str(root / "tokenizer" / "tokenizer.json"))


def write_hostile_run(parent: Path, steps: int = 2) -> Path:
    """The hostile run (its folder name carries an OSC 0 title too); files stamped 10 minutes before EPOCH."""
    root = write_demo_run(parent / "hostile", steps)
    for rid in range(steps):
        path = root / "rollout_data" / f"{rid}.pt"
        payload = load_pt(path, use_mmap=False)
        save_rollout(root, rid, [_sample(dict(s)) for s in payload["samples"]], metadata=payload["metadata"])
    for path in sorted((root / "trajectory").glob("*.jsonl")):
        _rewrite_jsonl(path, lambda record: {**_evil(record), "sample_index": record["sample_index"]})
    dashboard = root / "dashboard"
    meta = json.loads((dashboard / "meta.json").read_text())
    meta["run_name"] = "hostile" + EVIL + "\ud800"
    (dashboard / "meta.json").write_text(json.dumps(meta))
    for path in [dashboard / "metrics.jsonl", *sorted(dashboard.glob("*/*.jsonl"))]:
        _rewrite_jsonl(path, _telemetry_record)
    with contextlib.suppress(ImportError):  # no tokenizers package: token ids only
        _tokenizer(root, 4096)
    named = root.with_name("hostile" + TITLE)
    os.rename(root, named)
    stamp(named, EPOCH - 600)
    return named
