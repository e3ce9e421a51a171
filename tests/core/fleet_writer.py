"""A synthetic fleet's ``dashboard/``: gpu_util and phases of many GPUs, for the compute view's tests and bench.

Every GPU is one training rank. Each step the ranks wait, train (high
utilisation) and update weights (low); one node can be slow (lower
utilisation, so it tops the worst-N list) and one can die (no samples and no
phases after ``dead_at``). The last step's ``actor_train`` can be left open
(an open marker with no closing record), and so is the phase a dead node was in. Phases are filed by end hour, an
open marker by its start hour, as the spec says.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Fleet:
    """What :func:`write_fleet` wrote."""

    root: Path
    """The run directory."""
    nodes: tuple[str, ...]
    """Node names, in order."""
    gpus_per_node: int
    """GPUs per node."""
    start: float
    """First sample."""
    end: float
    """Last sample of the live nodes."""
    dead_node: str | None
    """The node that stopped."""
    slow_node: str | None
    """The node running at low utilisation."""

    @property
    def lanes(self) -> int:
        """GPUs in all."""
        return len(self.nodes) * self.gpus_per_node


def _hour(ts: float) -> str:
    return time.strftime("%Y%m%d_%H", time.gmtime(ts))


def write_fleet(
    root: Path,
    *,
    nodes: int = 64,
    gpus_per_node: int = 8,
    start: float = 1_787_223_000.0,
    seconds: float = 900.0,
    period: float = 10.0,
    step_seconds: float = 50.0,
    dead_node: int | None = 3,
    dead_at: float | None = None,
    slow_node: int | None = 5,
    open_last: bool = True,
) -> Fleet:
    """Write ``root/dashboard`` for ``nodes`` × ``gpus_per_node`` GPUs over ``seconds`` (see the module docstring)."""
    dash = root / "dashboard"
    (dash / "gpu_util").mkdir(parents=True, exist_ok=True)
    (dash / "phases").mkdir(parents=True, exist_ok=True)
    meta = {"run_name": "fleet", "start_ts": start, "args": {}, "schema_version": 1}
    (dash / "meta.json").write_text(json.dumps(meta))
    names = tuple(f"10.1.{i // 250}.{i % 250 + 1}" for i in range(nodes))
    end = start + seconds
    dead = names[dead_node] if dead_node is not None else None
    died = dead_at if dead_at is not None else end - 300.0
    slow = names[slow_node] if slow_node is not None else None
    files: dict[Path, list[str]] = {}

    def train_share(t: float) -> bool:
        offset = (t - start) % step_seconds
        return 0.4 * step_seconds <= offset < 0.9 * step_seconds

    ticks = int(seconds // period) + 1
    for k in range(ticks):
        ts = start + k * period
        lines = files.setdefault(dash / "gpu_util" / f"{_hour(ts)}.jsonl", [])
        busy = train_share(ts)
        for n, node in enumerate(names):
            if node == dead and ts > died:
                continue
            for gpu in range(gpus_per_node):
                util = (92 if busy else 18) - (gpu * 7 + n * 3 + k) % 6
                if node == slow:
                    util = util // 2
                mem = 60000 + 100 * gpu
                lines.append(f'{{"ts":{ts},"node":"{node}","gpu":{gpu},"util":{util},"mem_mb":{mem},"power_w":500}}')
    steps = int(seconds // step_seconds)
    for s in range(steps):
        t0 = start + s * step_seconds
        spans = (
            ("train_wait", t0, t0 + 0.4 * step_seconds),
            ("actor_train", t0 + 0.4 * step_seconds, t0 + 0.9 * step_seconds),
            ("update_weights", t0 + 0.9 * step_seconds, t0 + step_seconds),
        )
        last = open_last and s == steps - 1
        for n, node in enumerate(names):
            for gpu in range(gpus_per_node):
                where = f'"node":"{node}","gpus":[{gpu}],"rank":{n * gpus_per_node + gpu},"role":"train"'
                for name, a, b in spans:
                    if node == dead and a > died:
                        break
                    if (last and name == "actor_train") or (node == dead and b > died):  # still running
                        lines = files.setdefault(dash / "phases" / f"{_hour(a)}.jsonl", [])
                        lines.append(f'{{"name":"{name}","t0":{a},"t1":-1,{where}}}')
                        break
                    lines = files.setdefault(dash / "phases" / f"{_hour(b)}.jsonl", [])
                    lines.append(f'{{"name":"{name}","t0":{a},"t1":{b},{where}}}')
    for path, lines in files.items():
        with path.open("a") as handle:
            handle.write("\n".join(lines) + "\n")
    return Fleet(root, names, gpus_per_node, start, end, dead, slow)
