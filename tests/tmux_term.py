"""The real app in a real terminal, for tests: one tmux session on a private server, read with capture-pane.

Contract: :class:`Tmux` runs a shell script in a detached session of its own tmux server (a socket in the
test's folder, no config file read), so neither the user's server nor its environment is involved (a
running server gives new sessions its own environment, not the caller's). Its script's last lines echo
``EXITED-<status>`` and sleep, so a test reads the exit status on the screen. :meth:`Tmux.kill` ends the
server; the ``tmux`` fixture (conftest) calls it after the test and skips the test where tmux is missing.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

WAIT_SECONDS = 30.0
"""How long :meth:`Tmux.wait_for` waits by default."""


class Tmux:
    """See the module docstring."""

    def __init__(self, folder: Path, session: str = "t") -> None:
        self.folder = folder
        self.socket = str(folder / "tmux.sock")  # also leaves no socket file in /tmp/tmux-UID
        self.session = session

    def __call__(self, *args: str) -> str:
        """One tmux command on this server; what it printed."""
        done = subprocess.run(["tmux", "-S", self.socket, "-f", "/dev/null", *args], check=False, capture_output=True)
        return done.stdout.decode(errors="replace")

    def start(self, body: str, *, width: int, height: int, options: Mapping[str, str] = {}) -> None:
        """Run the shell lines ``body`` in the session (a ``width`` x ``height`` pane), then show their status.

        ``options`` are set globally before the session is made, so they hold from the script's first byte.
        """
        script = self.folder / "run.sh"
        script.write_text(f"{body.rstrip()}\necho EXITED-$?\nsleep 60\n")
        settings = [part for name, value in options.items() for part in ("set", "-g", name, value, ";")]
        size = ("-x", str(width), "-y", str(height))
        self("start-server", ";", *settings, "new-session", "-d", "-s", self.session, *size, f"bash {script}")

    def start_cli(
        self,
        *args: str | Path,
        width: int,
        height: int,
        exports: Mapping[str, str | Path] = {},
        exec_: bool = False,
        options: Mapping[str, str] = {},
    ) -> None:
        """``miles-tui ARGS`` in the session (from the repo, TERM=xterm-256color, no NO_COLOR, a user cache dir in
        the test's folder unless ``exports`` names one); ``exec_``: the pane's process is the monitor itself."""
        variables = {"MILES_TUI_CACHE_DIR": self.folder / "cache", "TERM": "xterm-256color", **exports}
        assignments = " ".join(f"{name}={shlex.quote(str(value))}" for name, value in variables.items())
        command = shlex.join([sys.executable, "-m", "miles_tui.tui.cli", *map(str, args)])
        self.start(
            f"cd {shlex.quote(str(REPO))}\nexport {assignments}\nunset NO_COLOR\n{'exec ' if exec_ else ''}{command}",
            width=width,
            height=height,
            options=options,
        )

    def screen(self, history: int = 0) -> str:
        """The pane's text (and ``history`` lines scrolled off above it)."""
        return self("capture-pane", "-p", *(("-S", f"-{history}") if history else ()), "-t", self.session)

    def wait_until(self, test: Callable[[str], bool], what: str, timeout: float = WAIT_SECONDS) -> str:
        """The first screen ``test`` accepts (polled every 0.2 s); AssertionError naming ``what`` after ``timeout``."""
        deadline, screen = time.monotonic() + timeout, ""
        while time.monotonic() < deadline:
            screen = self.screen(history=100)
            if test(screen):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{what} never appeared; the screen was:\n{screen}")

    def wait_for(self, text: str, timeout: float = WAIT_SECONDS) -> str:
        """The first screen showing ``text``."""
        return self.wait_until(lambda screen: text in screen, repr(text), timeout)

    def keys(self, *keys: str) -> None:
        """Type ``keys`` (tmux key names) in one write."""
        self("send-keys", "-t", self.session, *keys)

    def pane_pid(self) -> int:
        """The pid of the process the pane runs (the script's shell, or what it exec'd)."""
        return int(self("display", "-p", "-t", self.session, "#{pane_pid}"))

    def kill(self) -> None:
        """End the server and its session."""
        self("kill-server")
