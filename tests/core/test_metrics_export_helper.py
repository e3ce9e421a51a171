"""export --metrics written by this process and a forked helper: the same document, byte for byte, to a file or
a pipe; a helper that stops before a key leaves the rest to the lead; one that stops while writing is an error."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from miles_tui.core.base.errors import MilesTuiError
from miles_tui.core.telemetry import MetricStore, write_metrics
from miles_tui.core.telemetry.metrics import metric_export
from miles_tui.core.telemetry.metrics.metric_batch import decode_block

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the helper is forked on Linux only")

PARENT = os.getpid()


def _store() -> MetricStore:
    lines = []
    for i in range(300):
        metrics: dict[str, Any] = {f"k{j}": i * j + 0.25 for j in range(7) if (i + j) % 5}
        metrics["ints"] = i
        metrics["odd"] = "text" if i % 50 == 0 else (float("nan") if i % 7 == 0 else i / 3)
        if i > 200:
            metrics["late"] = [i] if i % 11 == 0 else i
        step_key = "eval/step" if i % 9 == 0 else "train/step"
        lines.append(json.dumps({"ts": 1000.5 + i, "step_key": step_key, "step": i, "metrics": metrics}).encode())
    store = MetricStore()
    store.append_batch(decode_block(b"\n".join(lines) + b"\n", 0)[0])
    return store


def _serial(store: MetricStore, keys: list[str] | None, x_key: str | None) -> bytes:
    out = io.BytesIO()
    write_metrics(store, keys, x_key, out)
    return out.getvalue()


def _to_file(store: MetricStore, keys: list[str] | None, x_key: str | None, path: Path) -> bytes:
    with path.open("wb") as out:
        out.write(b"")  # the document starts wherever the stream is
        write_metrics(store, keys, x_key, out, helper=True)
    return path.read_bytes()


def _to_pipe(store: MetricStore, keys: list[str] | None, x_key: str | None) -> bytes:
    read, write = os.pipe()
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(read, 1 << 16), b"")))
    reader.start()
    with os.fdopen(write, "wb") as out:
        write_metrics(store, keys, x_key, out, helper=True)
    reader.join(30)
    os.close(read)
    return b"".join(chunks)


CASES = [None, ["k3"], ["k1", "k2"], ["odd", "k0", "late", "ints", "k6"], ["late", "k1"]]


@pytest.mark.parametrize("keys", CASES, ids=lambda keys: "all" if keys is None else ",".join(keys))
@pytest.mark.parametrize("x_key", [None, "eval/step"])
def test_the_document_is_the_same_byte_for_byte(tmp_path: Path, keys: list[str] | None, x_key: str | None) -> None:
    store = _store()
    want = _serial(store, keys, x_key)
    assert json.loads(want)["metrics"]  # a real document
    assert _to_file(store, keys, x_key, tmp_path / "doc.json") == want
    assert _to_pipe(store, keys, x_key) == want


def test_a_helper_that_stops_before_a_key_leaves_it_and_the_rest_to_the_lead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store()
    want = _serial(store, None, None)
    key = metric_export._Document.key

    def failing_in_the_helper(self: metric_export._Document, index: int) -> list[bytes]:
        if os.getpid() != PARENT and index == 5:
            raise MemoryError("the helper runs out of memory")
        return key(self, index)

    monkeypatch.setattr(metric_export._Document, "key", failing_in_the_helper)
    assert _to_file(store, None, None, tmp_path / "doc.json") == want


def test_a_helper_that_stops_while_writing_is_an_error_never_a_silently_short_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store()
    write_all = metric_export._write_all

    def dying_in_the_helper(fd: int, parts: list[bytes]) -> None:
        if os.getpid() != PARENT and b'"k2"' in parts[0]:
            os.write(fd, parts[0][:5])
            os._exit(9)
        write_all(fd, parts)

    forked: list[int] = []
    fork = os.fork

    def recorded_fork() -> int:
        pid = fork()
        forked.append(pid)
        return pid

    monkeypatch.setattr(metric_export, "_write_all", dying_in_the_helper)
    monkeypatch.setattr(os, "fork", recorded_fork)
    with pytest.raises(MilesTuiError, match="helper process stopped while writing 'k2'"):
        _to_file(store, None, None, tmp_path / "doc.json")
    [helper] = forked
    with pytest.raises(ChildProcessError):
        os.waitpid(helper, os.WNOHANG)  # it was reaped


_CLI = """
import sys
from miles_tui.core.commands import export
from miles_tui.core.telemetry.metrics import metric_export
forks = []
fork = metric_export._write_with_helper
metric_export._write_with_helper = lambda *args: (forks.append(1), fork(*args))[1]
export.LONG_EXPORT_BYTES = int(sys.argv[2])
from miles_tui.tui.cli import main
status = main(["export", sys.argv[1], "--metrics"])
print(len(forks), status, file=sys.stderr)
"""


def test_the_cli_exports_a_long_file_with_the_helper_and_prints_the_same_document(tmp_path: Path) -> None:
    dash = tmp_path / "run" / "dashboard"
    dash.mkdir(parents=True)
    records = [{"ts": 5.0 + i, "step_key": "s", "step": i, "metrics": {"a": i / 7, "b": i}} for i in range(50)]
    lines = [json.dumps(record) for record in records]
    (dash / "metrics.jsonl").write_text("\n".join(lines) + "\n")

    def export(long_bytes: int) -> tuple[bytes, str]:
        done = subprocess.run([sys.executable, "-c", _CLI, str(dash.parent), str(long_bytes)], capture_output=True,
                              check=True, timeout=120)  # fmt: skip
        return done.stdout, done.stderr.decode()

    helped, plain = export(0), export(1 << 40)
    two_cpus = len(os.sched_getaffinity(0)) > 1
    assert helped[1] == ("1 0\n" if two_cpus else "0 0\n") and plain[1] == "0 0\n"  # nothing else on stderr
    assert helped[0] == plain[0] and json.loads(plain[0])["metrics"]["a"]["value"][7] == 1.0


def test_a_reader_that_goes_away_is_a_broken_pipe_as_without_the_helper() -> None:
    """``export --metrics | head``: the command exits quietly on BrokenPipeError; whichever process was
    writing when the reader left, that is what the caller gets, never the 'helper stopped' error."""
    records = [{"ts": 7.5 + i, "step_key": "s", "step": i, "metrics": {f"k{j}": i / (j + 3) for j in range(4)}}
               for i in range(20_000)]  # fmt: skip
    lines = [json.dumps(record) for record in records]
    store = MetricStore()
    store.append_batch(decode_block("\n".join(lines).encode() + b"\n", 0)[0])
    whole = _serial(store, None, None)
    starts = [whole.index(f'"k{j}":'.encode()) for j in range(4)]
    assert starts[2] - starts[1] > 256 << 10  # a key far longer than a pipe holds (64 KB): its writer blocks in it
    for cut in (starts[1] + 1000, starts[3] + 1000, starts[2] + 1000):  # in the helper's keys, then the lead's
        # the reader is another process, as `head` is: a pipe end of this process would be the helper's too
        reader = subprocess.Popen([sys.executable, "-c", _HEAD, str(cut)], stdin=subprocess.PIPE)
        assert reader.stdin is not None
        with pytest.raises(BrokenPipeError):
            write_metrics(store, None, None, reader.stdin, helper=True)
        assert reader.wait(30) == 0
        with contextlib.suppress(BrokenPipeError):
            reader.stdin.close()


_HEAD = """
import os, sys
left = int(sys.argv[1])
while left > 0 and (chunk := os.read(0, min(1 << 16, left))):
    left -= len(chunk)
"""
