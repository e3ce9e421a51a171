"""The palette's baseline commands: add a baseline run (a path), compare with each baseline.

``Add baseline run…`` opens a modal asking for the folder; typing ``baseline PATH``
(or ``add baseline PATH``) into the palette offers that folder directly.
``Compare with baseline X`` compares the step in view with baseline X's step of
the same id (compare's ``b`` key does the same from the compare view).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from textual.command import Hit

from miles_tui.core.base.inert_text import inert

if TYPE_CHECKING:
    from miles_tui.tui.model.monitor_app import MonitorApp

_PATH_QUERY = re.compile(r"\s*(?:add\s+)?baseline\s+(\S.*?)\s*", re.IGNORECASE)

PATH_SCORE = 100.0
"""Above any fuzzy score: a path typed after ``baseline`` is what the user means."""


def _ask_path(app: MonitorApp) -> None:
    app.navigation.show_baseline_path()


def baseline_commands(app: MonitorApp) -> list[tuple[str, str, Callable[[], object]]]:
    """(name, help, callback) of the baseline commands, as the app stands now."""
    commands: list[tuple[str, str, Callable[[], object]]] = [
        (
            "Add baseline run…",
            "overlay another run on every metrics chart, Δ at the same step (or type: baseline PATH)",
            partial(_ask_path, app),
        )
    ]
    for baseline in app.baselines:
        commands.append(
            (
                f"Compare with baseline {baseline.mark}",
                inert(f"the step in view against {baseline.name}'s same step ({baseline.path})"),
                partial(app.navigation.show_compare, None, False, baseline=baseline.mark),
            )
        )
    return commands


def baseline_path_hit(app: MonitorApp, query: str) -> Hit | None:
    """``baseline PATH`` typed into the palette: a hit that adds that folder (None for any other query)."""
    match = _PATH_QUERY.fullmatch(query)
    if match is None:
        return None
    path = match.group(1)
    return Hit(
        PATH_SCORE,
        inert(f"Add baseline run {path}"),
        partial(app.add_baseline, path),
        help="follow it read-only beside this run",
    )
