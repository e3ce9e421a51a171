"""A tokenizer.json written by an attacker: a backtracking decoder, a decoder that panics, ids it cannot hold.

The tokenizer is built with the ``tokenizers`` library as a run would hold it,
then its decoder is replaced by a ``Replace`` step whose regex ``(a+)+b``
backtracks on every token of a's (each token's decode takes ~0.1 s; past the
regex engine's retry limit, the Rust binding panics and prints the panic on
fd 2). ``export --tokens`` must finish within its budget and one warning line
naming the file, the monitor's event loop must keep turning while a sample
opens, and ids outside the vocabulary are a notice, not an internal error.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from miles_tui.core.dump import Detokenizer, Run
from miles_tui.core.dump.tokenizer import PROBE_SECONDS
from tests.conftest import EPOCH, stamp, write_demo_run
from tests.security.test_mistyped_fields import _edit_sample

tokenizers = pytest.importorskip("tokenizers")

ROOT = Path(__file__).resolve().parents[2]
VOCAB = 4096
"""Ids the demo's samples use stay below this."""


def _write_tokenizer(root: Path, a_count: int, *, backtracking: bool = True) -> Path:
    """tokenizer.json whose every token is ``a`` × a_count and a suffix; its decoder ``Replace((a+)+b)``."""
    vocab = {"a" * a_count + f"c{i}": i for i in range(VOCAB)}
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab=vocab, unk_token="a" * a_count + "c1"))
    document = json.loads(tokenizer.to_str())
    if backtracking:
        document["decoder"] = {"type": "Replace", "pattern": {"Regex": "(a+)+b"}, "content": ""}
    (root / "tokenizer").mkdir(exist_ok=True)
    path = root / "tokenizer" / "tokenizer.json"
    path.write_text(json.dumps(document))
    return path


def _run(tmp_path: Path) -> Path:
    root = write_demo_run(tmp_path / "run", 2)
    stamp(root, EPOCH - 600)
    return root


def _export_tokens(root: Path, sample: int, cache: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MILES_TUI_CACHE_DIR": str(cache)}
    argv = [sys.executable, "-m", "miles_tui.tui.cli", "export", str(root), "--step", "1"]
    argv += ["--sample", str(sample), "--tokens"]
    return subprocess.run(argv, check=False, capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout)


def _first_sample(root: Path) -> int:
    return Run(root, use_cache=False).summary(1, False, EPOCH).rows[0].sample_index


LONG_SAMPLE = 1200
"""Tokens of the long sample: ~90 s to decode with the backtracking decoder in the library."""


def _long_sample(root: Path) -> int:
    """Step 1's first sample, given LONG_SAMPLE tokens (its train files removed: the rollout record is the truth)."""
    for path in (root / "train_data").glob("1_*.pt"):
        path.unlink()
    tokens = [i % VOCAB for i in range(LONG_SAMPLE)]
    return _edit_sample(root, 1, 0, tokens=tokens, response_length=200, total_length=LONG_SAMPLE)


def test_the_backtracking_decoder_really_backtracks(tmp_path: Path) -> None:
    """The hostile file is what it claims: one token's decode takes tens of milliseconds in the library."""
    path = _write_tokenizer(tmp_path, 22)
    tokenizer = tokenizers.Tokenizer.from_file(str(path))
    started = time.monotonic()
    tokenizer.decode_batch([[1]] * 8)
    assert time.monotonic() - started > 0.2


@pytest.mark.parametrize("a_count", [22, 40], ids=["slow", "panics"])
def test_export_tokens_with_a_pathological_decoder_finishes_and_names_the_file(tmp_path: Path, a_count: int) -> None:
    root = _run(tmp_path)
    path = _write_tokenizer(root, a_count)
    sample = _long_sample(root)
    started = time.monotonic()
    done = _export_tokens(root, sample, tmp_path / "cache", timeout=60)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert elapsed < 20, elapsed
    payload = json.loads(done.stdout)
    assert payload["token_text"] is None and len(payload["token_ids"]) == LONG_SAMPLE
    (line,) = done.stderr.splitlines()  # one line: no panic text, no traceback
    assert str(path) in line and "showing token ids" in line
    assert "panicked at" not in done.stderr and "Traceback" not in done.stderr  # the binding's panic text


def test_a_refused_tokenizer_is_refused_within_the_probe_budget(tmp_path: Path) -> None:
    path = _write_tokenizer(tmp_path, 22)
    detokenizer = Detokenizer(path.parent)
    started = time.monotonic()
    decoded = detokenizer.decode([1, 2, 3])
    assert time.monotonic() - started < PROBE_SECONDS + 15
    assert decoded.texts is None and decoded.notice is not None
    assert str(path) in decoded.notice and "refused" in decoded.notice
    assert not detokenizer.status.available and detokenizer.decode([1]).notice == decoded.notice
    detokenizer.close()


def test_a_plain_tokenizer_decodes(tmp_path: Path) -> None:
    _write_tokenizer(tmp_path, 3, backtracking=False)
    detokenizer = Detokenizer(tmp_path / "tokenizer")
    decoded = detokenizer.decode([0, 5, 4095])
    assert decoded == type(decoded)(["aaac0", "aaac5", "aaac4095"], None)
    detokenizer.close()


@pytest.mark.parametrize("bad", [-1, 2**40, VOCAB], ids=["negative", "beyond-u32", "past-the-vocabulary"])
def test_ids_outside_the_vocabulary_are_a_notice_not_an_internal_error(tmp_path: Path, bad: int) -> None:
    root = _run(tmp_path)
    _write_tokenizer(root, 3, backtracking=False)
    summary = Run(root, use_cache=False).summary(1, False, EPOCH)
    row = summary.rows[0]
    tokens = [5] * (row.total_length - 2) + [bad, 7]
    index = _edit_sample(root, 1, 0, tokens=tokens)
    done = _export_tokens(root, index, tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert "internal error" not in done.stderr
    payload = json.loads(done.stdout)
    assert payload["token_text"] is None and payload["token_ids"][-2] == bad
    assert f"token id {bad}" in done.stderr and "tokenizer.json" in done.stderr


async def test_the_monitor_keeps_turning_while_a_sample_decodes(tmp_path: Path) -> None:
    """Opening a sample whose tokenizer is pathological: the event loop never stalls for the decode."""
    from tests.harness import frozen_app, settle

    root = _run(tmp_path)
    _write_tokenizer(root, 22)
    first = _first_sample(root)
    app = frozen_app(root, use_cache=False)
    gaps: list[float] = []

    async def tick() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.02)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        ticker = asyncio.create_task(tick())
        app.navigation.show_sample(1, False, first)
        started = time.monotonic()
        while app.screen.__class__.__name__ != "SampleScreen" and time.monotonic() - started < 30:
            await pilot.pause(0.05)
        ticker.cancel()
        assert app.screen.__class__.__name__ == "SampleScreen"
        assert max(gaps) < 1.0, max(gaps)
        await settle(pilot)
        text = str(app.screen.query_one("#cursor-line").render())
        assert "tokenizer.json" in text and "showing token ids" in text


BIG_VOCAB = 400_000
"""Tokens of the large tokenizer: a ~50 MB tokenizer.json that costs the library hundreds of MB to hold."""

_MEASURE = """
import json, sys
from pathlib import Path
from miles_tui.core.dump.tokenizer import Detokenizer

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

import tokenizers  # the library's own import is not what is measured
before = rss()
detokenizer = Detokenizer(Path(sys.argv[1]))
decoded = detokenizer.decode([0, 1, 2])
print(json.dumps({"grew_mb": rss() - before, "texts": decoded.texts, "notice": decoded.notice}))
"""


def _big_tokenizer(root: Path) -> Path:
    document = json.loads(tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab={"x": 0}, unk_token="x")).to_str())
    document["model"]["vocab"] = {f"{i:08d}" + "z" * 100: i for i in range(BIG_VOCAB)}
    document["model"]["unk_token"] = "0" * 8 + "z" * 100
    (root / "tokenizer").mkdir(parents=True, exist_ok=True)
    path = root / "tokenizer" / "tokenizer.json"
    path.write_text(json.dumps(document))
    return path


def _measure(root: Path, **env: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(root / "tokenizer")],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ, **env}, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_a_large_tokenizer_costs_the_reader_nothing(tmp_path: Path) -> None:
    """The library's copy of a 50 MB tokenizer.json lives in the decode child, not in the monitor."""
    path = _big_tokenizer(tmp_path)
    assert path.stat().st_size > 40 << 20
    result = _measure(tmp_path)
    assert result["texts"] == [f"{i:08d}" + "z" * 100 for i in range(3)], result
    assert isinstance(result["grew_mb"], float) and result["grew_mb"] < 60, result


def test_a_tokenizer_over_the_memory_budget_is_refused_and_named(tmp_path: Path) -> None:
    """The decode child's address space is bounded: over it, ids with a notice naming the file."""
    path = _big_tokenizer(tmp_path)
    code = "import miles_tui.core.dump.tokenizer as t; t.WORKER_MEMORY_MB = 64; exec(open(0).read())"
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "tokenizer")],
        input=_MEASURE.replace("import json, sys", "import json, sys; sys.argv = sys.argv[:1] + sys.argv[1:]"),
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["texts"] is None and str(path) in result["notice"] and "showing token ids" in result["notice"]
