"""Benchmark: following a JSONL stream whose last line never ends (issue 13.2).

For each size (default 128, 256, 512 and 1024 MiB) a stream of one complete line
followed by an unterminated tail of that size is written (real bytes), and a child
process follows it with :class:`miles_tui.core.base.tail.TailFile` (default 64 MiB line cap):

- the first poll over the whole tail: time and the child's peak RSS;
- ten polls that each find 1 MiB appended to the tail: median time (O(new bytes));
- the poll that finds the newline at last: the overlong line is reported, not held.

Goals printed beside the figures: time linear in the tail (the per-GiB rate of the
largest size within 2x of the smallest's), peak RSS about the cap plus a few blocks
(never ~2x the tail), appended-to polls independent of the tail's size.

    python bench/tail_growth.py [--sizes 128 256 512 1024] [--cap-mib 64]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RSS_SLACK_MIB = 96
"""Interpreter and modules (~30 MiB) plus a few 4 MiB blocks, above the cap."""


def _write(path: Path, tail_mib: int) -> None:
    block = b"x" * (8 << 20)
    with open(path, "wb") as out:
        out.write(b'{"a": 1}\n{"blob": "')
        left = (tail_mib << 20) - 10
        while left > 0:
            out.write(block[: min(left, len(block))])
            left -= len(block)


def child(path: Path, cap: int) -> None:
    """Follow ``path``; print JSON figures (runs in its own process so its peak RSS is the reader's)."""
    from miles_tui.core.base.tail import TailFile

    tail: TailFile[object] = TailFile(path, lambda value: value, max_line=cap)
    records: list[object] = []
    t = time.perf_counter()
    first = tail.poll(records.extend)
    first_s = time.perf_counter() - t
    assert records == [{"a": 1}] and not first.malformed
    appended = []
    for _ in range(10):
        with open(path, "ab") as out:
            out.write(b"y" * (1 << 20))
        t = time.perf_counter()
        tail.poll(records.extend)
        appended.append(time.perf_counter() - t)
    with open(path, "ab") as out:
        out.write(b'"}\n{"a": 2}\n')
    t = time.perf_counter()
    last = tail.poll(records.extend)
    last_s = time.perf_counter() - t
    assert records[-1] == {"a": 2} and len(last.malformed) == 1, (records, last)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"first": first_s, "appended": statistics.median(appended), "last": last_s, "peak": peak}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 512, 1024], metavar="MIB")
    parser.add_argument("--cap-mib", type=int, default=64)
    parser.add_argument("--child", metavar="PATH", help=argparse.SUPPRESS)
    args = parser.parse_args()
    cap = args.cap_mib << 20
    if args.child:
        child(Path(args.child), cap)
        return
    print(f"unterminated tail, line cap {args.cap_mib} MiB; goals: linear time, peak RSS <= cap + {RSS_SLACK_MIB} MiB")
    rates = []
    with tempfile.TemporaryDirectory(prefix="miles-tui-tail-") as tmp:
        path = Path(tmp) / "stream.jsonl"
        for size in args.sizes:
            _write(path, size)
            command = [sys.executable, __file__, "--child", str(path), "--cap-mib", str(args.cap_mib)]
            figures = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
            rate = figures["first"] / (size / 1024)
            rates.append(rate)
            rss_ok = figures["peak"] <= args.cap_mib + RSS_SLACK_MIB
            print(
                f"{size:5d} MiB: first poll {figures['first']:6.2f} s ({rate:5.2f} s/GiB), "
                f"1 MiB appended {figures['appended'] * 1e3:6.2f} ms, newline found {figures['last'] * 1e3:7.1f} ms, "
                f"peak RSS {figures['peak']:5.0f} MiB ({'ok' if rss_ok else 'OVER'}: tail {size} MiB)"
            )
            os.unlink(path)
    linear = rates[-1] <= 2 * rates[0]
    print(f"per-GiB rate, largest vs smallest: {rates[-1] / rates[0]:.2f}x ({'linear' if linear else 'NOT linear'})")


if __name__ == "__main__":
    main()
