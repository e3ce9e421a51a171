"""Copy and export from the UI: TSV text for the clipboard, CSV text for a file.

Text for the clipboard is presentation, so it lives here, not in core; the
values are core's, untouched (no rounding): a cell is empty where core has
None (never 0), booleans are ``true``/``false`` as in ``export --format csv``.
Copying goes through :meth:`textual.app.App.copy_to_clipboard`, which keeps
the text in ``app.clipboard`` and writes it to the terminal as an OSC 52
escape (the terminal, or tmux with ``set -g set-clipboard on``, puts it on
the system clipboard; over SSH it reaches the local machine).
The CSV of a rollout table is :func:`miles_tui.core.commands.export.rows_csv`: the ROW columns,
exactly what ``miles-tui export --step N --format csv`` prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from textual.app import App

from miles_tui.core.base.inert_text import inert
from miles_tui.core.base.json_out import clean
from miles_tui.core.commands.export import not_a_formula, rows_csv
from miles_tui.core.dump import ROW_COLUMNS, SERIES, SampleRow, TokenView, token_payload
from miles_tui.core.telemetry import WandbLink

LARGE_COPY = 100_000
"""Characters above which a copy may be cut by the terminal: OSC 52 limits vary (tmux, some terminals)."""

TOKEN_COLUMNS: tuple[str, ...] = ("position", "response_position", "token_id", "text", "loss_mask", *SERIES)
"""Columns of a copied token window: token position, response index (empty on the prompt), id, text, mask, series."""


def _cell(value: Any) -> str:
    """One TSV cell: empty for None, true/false for booleans, tabs and newlines escaped, controls made inert,
    text a spreadsheet would run as a formula quoted (a pasted row is a spreadsheet's input too)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value) if isinstance(value, int | float) else not_a_formula(str(value))
    return inert(text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r"))


def _tsv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["\t".join(header)]
    lines += ["\t".join(_cell(value) for value in row) for row in rows]
    return "\n".join(lines) + "\n"


def sample_row_tsv(row: SampleRow) -> str:
    """A sample's ROW as two TSV lines: the column names, then its values."""
    values = clean(row.to_dict())
    return _tsv(ROW_COLUMNS, [[values[name] for name in ROW_COLUMNS]])


def token_window_tsv(view: TokenView, start: int, stop: int, texts: Sequence[str] | None) -> str:
    """Per-token values of token positions ``[start, stop)`` as TSV (one line per token).

    Values are :func:`miles_tui.core.dump.token_view.token_payload`'s: series cells are empty on
    prompt tokens and at loss-masked positions (the engine never scored them).
    ``texts`` are the decoded tokens of the whole sequence (None: ids only).
    """
    payload = token_payload(view, None, start, stop)
    lo, prompt = payload["start"], view.prompt_length
    response_start = max(lo, prompt)
    lines = []
    for offset, token_id in enumerate(payload["token_ids"]):
        position = lo + offset
        r = position - response_start  # index into the payload's response arrays
        in_response = position >= prompt
        mask = payload["loss_mask"]
        line: list[Any] = [
            position,
            position - prompt if in_response else None,
            token_id,
            texts[position] if texts is not None and position < len(texts) else None,
            mask[r] if in_response and mask is not None else None,
        ]
        for name in SERIES:
            values = payload[name]
            line.append(values[r] if in_response and values is not None else None)
        lines.append(line)
    return _tsv(TOKEN_COLUMNS, lines)


def rows_csv_text(rows: Sequence[SampleRow]) -> str:
    """The shown rollout rows, in the order shown, as ``export --format csv`` writes them."""
    return rows_csv({"samples": [clean(row.to_dict()) for row in rows]})


def copy_sample_row(app: App[Any], row: SampleRow) -> str:
    """Copy a sample's ROW (header + values, TSV) to the clipboard; returns the text."""
    text = sample_row_tsv(row)
    app.copy_to_clipboard(text)
    app.notify(f"copied sample {row.sample_index}'s row ({len(ROW_COLUMNS)} columns, TSV)", timeout=3)
    return text


def copy_token_window(app: App[Any], view: TokenView, start: int, stop: int, texts: Sequence[str] | None) -> str:
    """Copy the per-token values of token positions ``[start, stop)`` (TSV) to the clipboard; returns the text."""
    text = token_window_tsv(view, start, stop, texts)
    count = text.count("\n") - 1
    app.copy_to_clipboard(text)
    message = f"copied {count} tokens ({start}–{stop - 1}) of sample {view.sample_index} with every series (TSV)"
    if len(text) > LARGE_COPY:
        app.notify(
            f"{message}: {len(text) // 1000} kB, more than some terminals (and tmux) accept; w picks a smaller window",
            severity="warning",
            timeout=6,
        )
    else:
        app.notify(message, timeout=3)
    return text


def default_csv_path(rollout_id: int, evaluation: bool, run_dir: Path, cwd: Path | None = None) -> Path:
    """``./step_{rid}.csv`` (``step_eval_{rid}.csv``) in the working directory; the home folder
    when the working directory is inside the run directory (a CSV never goes into RUN_DIR)."""
    name = f"step_{'eval_' if evaluation else ''}{rollout_id}.csv"
    here = (cwd or Path.cwd()).resolve()
    if here.is_relative_to(run_dir.resolve()):
        here = Path.home()
    return here / name


def copy_wandb_url(app: App[Any], link: WandbLink | None) -> str | None:
    """Copy the run's W&B URL (core built it from validated parts); returns it, or None when there is none
    (the user is told why: no W&B project in meta.json's args, or which argument was not usable)."""
    if link is None:
        app.notify(
            "this run's meta.json names no W&B project (--wandb-project)", severity="warning", timeout=4, markup=False
        )
        return None
    if link.url is None:
        app.notify(f"no W&B URL: {inert(link.note)}", severity="warning", timeout=5, markup=False)
        return None
    app.copy_to_clipboard(link.url)
    app.notify(f"copied the {inert(link.note)} URL: {inert(link.url)}", timeout=4, markup=False)
    return link.url
