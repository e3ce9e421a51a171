"""The real app in a terminal, for benchmarks: bytes it writes, what it shows, its RSS and CPU over time.

:class:`PtyApp` starts ``python -m miles_tui.tui.cli ARGS`` on a fresh pty of a given
size, drains and counts everything the app writes (a thread, so the app never
blocks on a full pty), and reads the monitor's RSS and CPU time from /proc.
Nothing emulates the terminal there: only bytes are counted. :class:`TmuxApp`
runs it in a tmux pane instead, where the screen's content and key latency
are what a person sees and feels.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import shlex
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Usage:
    """One reading of a process tree."""

    at: float
    """Seconds since the app started."""
    rss_mb: float
    """Resident set of the monitor process (MB)."""
    cpu_s: float
    """CPU seconds used by the monitor and its helper processes (not the demo writer)."""
    written: int
    """Bytes the app has written to the terminal so far."""


def _stat_fields(pid: int) -> list[str]:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rindex(")") + 2 :].split()


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int(_stat_fields(int(entry.name))[1]) == pid:
                    out.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return out


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _is_demo_writer(pid: int) -> bool:
    try:
        return b"miles_tui.core.synth.demo" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


class PtyApp:
    """``miles-tui`` running on a pty of ``cols`` x ``rows``."""

    def __init__(self, args: list[str], *, env: dict[str, str], cols: int = 120, rows: int = 40) -> None:
        self.args = args
        self.env = {**os.environ, **env, "TERM": env.get("TERM", "xterm-256color")}
        self.env.pop("NO_COLOR", None)
        self.cols, self.rows = cols, rows
        self.pid = 0
        self.fd = -1
        self.started = 0.0
        self.written = 0
        self.log: list[tuple[float, int]] = []
        """(seconds since start, bytes) of every read from the pty."""
        self.capture: bytearray | None = None
        self._reader: threading.Thread | None = None
        self._stop = threading.Event()
        self._dead_cpu = 0.0

    def start(self, capture: bool = False) -> None:
        self.capture = bytearray() if capture else None
        pid, fd = pty.fork()
        if pid == 0:  # the child: become the app
            os.chdir(REPO)
            os.execve(sys.executable, [sys.executable, "-m", "miles_tui.tui.cli", *self.args], self.env)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", self.rows, self.cols, 0, 0))
        self.started = time.monotonic()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if not ready:
                continue
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            self.written += len(data)
            self.log.append((time.monotonic() - self.started, len(data)))
            if self.capture is not None:
                self.capture += data

    def send(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def bytes_between(self, start: float, end: float) -> int:
        """Bytes written between two times (seconds since start)."""
        return sum(n for t, n in list(self.log) if start <= t < end)

    def helpers(self) -> list[int]:
        """The monitor's helper processes (a process pool), not the demo writer."""
        return [p for p in _children(self.pid) if not _is_demo_writer(p)]

    def usage(self) -> Usage:
        cpu = cpu_seconds(self.pid)
        for child in self.helpers():
            try:
                cpu += cpu_seconds(child)
            except OSError:
                continue
        # Children that already exited (a finished process pool) count through the parent's cutime.
        fields = _stat_fields(self.pid)
        reaped = (int(fields[13]) + int(fields[14])) / CLOCK_TICKS
        return Usage(time.monotonic() - self.started, rss_mb(self.pid), cpu + reaped, self.written)

    def wait_for_output(self, quiet: float, timeout: float) -> None:
        """Wait until the app has written nothing for ``quiet`` seconds (or ``timeout`` passed)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            last = self.log[-1][0] if self.log else 0.0
            if time.monotonic() - self.started - last >= quiet:
                return
            time.sleep(0.1)

    def stop(self) -> int | None:
        """Quit with ``q``; kill it when it does not go within 10 s. Returns the exit status."""
        status = None
        try:
            self.send("q")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                done, raw = os.waitpid(self.pid, os.WNOHANG)
                if done:
                    status = os.waitstatus_to_exitcode(raw)
                    break
                time.sleep(0.1)
            else:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
        finally:
            self._stop.set()
            if self._reader is not None:
                self._reader.join(2)
            os.close(self.fd)
        return status


def miles_tui_command() -> list[str]:
    """The ``miles-tui`` script installed beside this interpreter (what a person runs), else ``python -m``."""
    script = Path(sys.executable).with_name("miles-tui")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "miles_tui.tui.cli"]


class TmuxApp:
    """``miles-tui`` in a tmux pane of ``cols`` x ``rows`` (``tmux new -d -x COLS -y ROWS``, ``send-keys``,
    ``capture-pane``): what a person sees, keys as a person types them."""

    def __init__(self, args: list[str], *, env: dict[str, str], cols: int = 120, rows: int = 40) -> None:
        self.session = f"miles-bench-{os.getpid()}-{int(time.monotonic() * 1000) % 100000}"
        self.args, self.env, self.cols, self.rows = args, env, cols, rows
        self.pid = 0
        self.started = 0.0

    def start(self) -> None:
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        command = f"cd {shlex.quote(str(REPO))} && exec env -u NO_COLOR TERM=xterm-256color {exports} "
        command += " ".join(shlex.quote(a) for a in (*miles_tui_command(), *self.args))
        self.started = time.monotonic()
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", self.session, "-x", str(self.cols), "-y", str(self.rows), command],
            check=True,
        )
        shown = subprocess.run(
            ["tmux", "display", "-p", "-t", self.session, "#{pane_pid}"], capture_output=True, text=True, check=True
        )
        self.pid = int(shown.stdout.strip())

    def screen(self, escapes: bool = False) -> str:
        """The pane's text (with ``escapes``: colours too, so a moved highlight shows)."""
        args = ["tmux", "capture-pane", "-p", "-t", self.session] + (["-e"] if escapes else [])
        return subprocess.run(args, capture_output=True, text=True, check=False).stdout

    def send(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.session, *keys], check=True)

    def wait_for(self, found: Callable[[str], bool], timeout: float, every: float = 0.05) -> float | None:
        """Seconds since start when ``found(screen)`` first held (None: not within ``timeout``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if found(self.screen()):
                return time.monotonic() - self.started
            time.sleep(every)
        return None

    def key_latency(self, key: str, timeout: float = 10.0) -> float | None:
        """Seconds from sending ``key`` until the pane (colours included) changes."""
        before = self.screen(escapes=True)
        sent = time.monotonic()
        self.send(key)
        while time.monotonic() - sent < timeout:
            if self.screen(escapes=True) != before:
                return time.monotonic() - sent
            time.sleep(0.01)
        return None

    def usage(self) -> Usage:
        """CPU of the app and its helpers (as :meth:`PtyApp.usage`); ``written`` is not known here."""
        cpu = cpu_seconds(self.pid)
        for child in _children(self.pid):
            if not _is_demo_writer(child):
                try:
                    cpu += cpu_seconds(child)
                except OSError:
                    continue
        fields = _stat_fields(self.pid)
        reaped = (int(fields[13]) + int(fields[14])) / CLOCK_TICKS
        return Usage(time.monotonic() - self.started, rss_mb(self.pid), cpu + reaped, 0)

    def stop(self) -> None:
        try:
            self.send("q")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and Path(f"/proc/{self.pid}").exists():
                time.sleep(0.1)
        finally:
            subprocess.run(["tmux", "kill-session", "-t", self.session], check=False, capture_output=True)
