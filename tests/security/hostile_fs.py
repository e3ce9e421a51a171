"""Building hostile run directories the way an attacker (or an unlucky filesystem) would, and
running the real command line on them in a child process under a time and memory limit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MEMORY_LIMIT = 1 << 30
"""Address space for a child: reading /dev/zero until memory runs out fails fast instead of swapping."""


@dataclass(frozen=True)
class Outcome:
    """How a command ended."""

    returncode: int | None
    """None: it was still running at the timeout (hung) and was killed."""
    stdout: str
    stderr: str

    @property
    def hung(self) -> bool:
        return self.returncode is None


_LIMIT = f"import resource\nresource.setrlimit(resource.RLIMIT_AS, ({MEMORY_LIMIT}, {MEMORY_LIMIT}))\n"
"""The child's first lines: the limit applies to all it does after (no preexec_fn: pytest has threads)."""


Env = dict[str, str | None]
"""Environment changes for a child: a value of None removes the variable."""


def _run(command: list[str], timeout: float, env: Env | None) -> Outcome:
    merged = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    child_env = {key: value for key, value in merged.items() if value is not None}
    with subprocess.Popen(
        command,
        cwd=REPO,
        env=child_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as child:
        try:
            out, err = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
            return Outcome(None, out, err)
        return Outcome(child.returncode, out, err)


def cli(*args: str | Path, timeout: float = 60.0, env: Env | None = None) -> Outcome:
    """``miles-tui ARGS`` in a child process (memory-limited); a hang is an outcome, not a stuck test."""
    run = "runpy.run_module('miles_tui.tui.cli', run_name='__main__')"
    code = f"{_LIMIT}import runpy, sys\nsys.argv[0] = 'miles-tui'\n{run}\n"
    return _run([sys.executable, "-c", code, *map(str, args)], timeout, env)


def python(code: str, timeout: float = 60.0, env: Env | None = None) -> Outcome:
    """Python ``code`` in a child process (memory-limited), for a core call that might hang or blow up."""
    return _run([sys.executable, "-c", _LIMIT + code], timeout, env)


def fifo(path: Path) -> Path:
    """Replace ``path`` by a FIFO nobody writes to (an open() for reading blocks forever)."""
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    return path


def symlink(path: Path, target: str | Path) -> Path:
    """Replace ``path`` by a symbolic link to ``target`` (``path.name`` itself for a loop)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    path.symlink_to(target)
    return path


def age(path: Path, mtime: float) -> None:
    """Set a file's (or a link's own) modification time without following it or opening it."""
    os.utime(path, (mtime, mtime), follow_symlinks=False)
