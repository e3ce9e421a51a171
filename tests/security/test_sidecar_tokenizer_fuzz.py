"""Fuzz the sidecar and tokenizer readers: generated records and mutated lines, each read in a child.

A sidecar case is a ``trajectory/1.jsonl`` built from a hypothesis strategy of conversation records
(every field sometimes of a wrong type or size, hash-colliding indices, huge integers), with lines
damaged and hostile lines (empty objects by the thousand, deep nesting) mixed in; the child reads it
as the conversation view does and builds every conversation's document. A tokenizer case is a
``tokenizer.json`` with a generated decoder and normalizer (backtracking and broken regexes among
them), sometimes damaged; the child decodes ids through the detokenizer (its own decode child) and
checks it stayed within its budgets. Acceptable outcomes: a value or the project's own error naming
the file; a crash, a hang past the per-case timeout or a MemoryError fails, and the case is kept.

CI runs a short budget (~20 s per test); ``MILES_TUI_FUZZ_MINUTES`` runs each longer and prints figures.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given

from tests.security.fuzzing import Worker, sidecar_file, tokenizer_file
from tests.security.test_unpickle_fuzz import BATCH, _keep, _keep_dir, _run

pytest.importorskip("tokenizers")


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Worker]:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    w = Worker(scratch)
    w.start()
    yield w
    w.stop()


def test_generated_sidecars(worker: Worker, tmp_path: Path) -> None:
    keep = _keep_dir(tmp_path)

    def batch(failures: list[str]) -> None:
        @BATCH
        @given(data=sidecar_file())
        def case(data: bytes) -> None:
            verdict = worker.load(data, "sidecar")
            if not verdict.ok:
                _keep(keep, data, "sidecar", verdict.detail, failures)

        case()

    _run(worker, "sidecars", batch, keep)


def test_generated_tokenizers(worker: Worker, tmp_path: Path) -> None:
    keep = _keep_dir(tmp_path)

    def batch(failures: list[str]) -> None:
        @BATCH
        @given(data=tokenizer_file())
        def case(data: bytes) -> None:
            verdict = worker.load(data, "tokenizer")
            if not verdict.ok:
                _keep(keep, data, "tokenizer", verdict.detail, failures)

        case()

    _run(worker, "tokenizers", batch, keep)


def test_the_worker_reads_a_sidecar_and_a_tokenizer(worker: Worker) -> None:
    """The harness itself: a good case of each kind is a value, a backtracking decoder is refused in time."""
    tokenizers = pytest.importorskip("tokenizers")
    line = b'{"sample_index": 1, "messages": [{"role": "user", "content": "hi"}]}\n'
    assert worker.load(line, "sidecar").ok
    model = tokenizers.models.WordLevel(vocab={"t0": 0, "t1": 1, "a" * 40 + "c": 2}, unk_token="t0")
    document = json.loads(tokenizers.Tokenizer(model).to_str())
    assert worker.load(json.dumps(document).encode(), "tokenizer").ok
    document["decoder"] = {"type": "Replace", "pattern": {"Regex": "(a+)+b"}, "content": ""}
    verdict = worker.load(json.dumps(document).encode(), "tokenizer")
    assert verdict.ok, verdict.detail
