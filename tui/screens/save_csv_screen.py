"""A small modal that saves the rows a table shows as CSV, outside the run directory.

Contract: :class:`SaveCsvScreen` writes :func:`miles_tui.tui.views.clipboard.rows_csv_text`
(the ROW columns, as ``export --format csv``) of exactly the rows it was given,
in their order, to a path the user confirms. It never writes inside RUN_DIR
(the monitor only reads a run), asks before replacing a file, and shows every
failure as one line in the modal, never a traceback. The write runs in a thread.
Dismisses with the written path, or None when cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from miles_tui.core.base.inert_text import inert
from miles_tui.core.dump import SampleRow
from miles_tui.tui.views.clipboard import rows_csv_text


class CsvPathError(ValueError):
    """A path the CSV cannot be written to (the message is for the user)."""


def csv_target(text: str, run_dir: Path, cwd: Path | None = None) -> Path:
    """The absolute path typed in ``text``; :class:`CsvPathError` when it cannot take the CSV."""
    typed = text.strip()
    if not typed:
        raise CsvPathError("type a file path")
    path = Path(typed).expanduser()
    if not path.is_absolute():
        path = (cwd or Path.cwd()) / path
    path = path.resolve()  # symlinks too: a link into the run directory is still the run directory
    run = run_dir.resolve()
    if path == run or path.is_relative_to(run):
        raise CsvPathError(f"{path} is inside the run directory {run}: miles-tui never writes there")
    if path.is_dir():
        raise CsvPathError(f"{path} is a folder: add a file name")
    if not path.parent.is_dir():
        raise CsvPathError(f"the folder {path.parent} does not exist")
    return path


class SaveCsvScreen(ModalScreen[Path | None]):
    """Save rows as CSV: a path input with a default, an overwrite check, errors in place."""

    CSS_PATH = "save_csv_screen.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, rows: Sequence[SampleRow], default_path: Path | str, run_dir: Path | str) -> None:
        super().__init__()
        self.rows = tuple(rows)
        self.default_path = Path(default_path)
        self.run_dir = Path(run_dir)
        self._confirm: Path | None = None
        """A path that exists and was submitted once: the next submit replaces it."""

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Content.from_markup("[b]Save the shown rows as CSV[/b]"), id="title")
            yield Static(
                Content(f"{len(self.rows)} rows · every sample column, as `miles-tui export --step N --format csv`"),
                id="what",
            )
            yield Input(str(self.default_path), id="path", select_on_focus=False)
            yield Static("", id="message")
            yield Static(Content("enter: save · esc: cancel"), id="hint")

    def on_mount(self) -> None:
        self.query_one("#path", Input).focus()

    def _say(self, text: str, style: str) -> None:
        self.query_one("#message", Static).update(Content.styled(text, style))

    @on(Input.Changed, "#path")
    def _path_changed(self, event: Input.Changed) -> None:
        """A new path needs its own overwrite confirmation."""
        self._confirm = None
        self._say("", "")

    @on(Input.Submitted, "#path")
    def _submitted(self, event: Input.Submitted) -> None:
        """Check the path, ask before overwriting, then write."""
        try:
            path = csv_target(event.value, self.run_dir)
        except CsvPathError as err:
            self._say(f"✗ {err}", "bold $text-error")
            return
        if path.exists() and path != self._confirm:
            self._confirm = path
            self._say(f"⚠ {path.name} exists: enter again to overwrite it, or change the path", "$text-warning")
            return
        self._write(path)

    @work(exclusive=True, group="save-csv", exit_on_error=False)
    async def _write(self, path: Path) -> None:
        self._say(f"writing {path}…", "$text-muted")
        try:
            await asyncio.to_thread(_write_csv, path, self.rows)
        except OSError as err:
            self._confirm = None
            self._say(f"✗ could not write {path}: {err.strerror or err}", "bold $text-error")
            return
        self.app.notify(inert(f"wrote {len(self.rows)} rows to {path}"), markup=False, timeout=4)
        self.dismiss(path)

    def action_cancel(self) -> None:
        self.dismiss(None)


def _write_csv(path: Path, rows: Sequence[SampleRow]) -> None:
    path.write_text(rows_csv_text(rows), encoding="utf-8")
