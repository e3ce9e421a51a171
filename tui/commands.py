"""The command palette's own commands (ctrl+p): go to a step, open each view, follow, poll interval.

Textual's system commands (theme, quit, keys) stay beside these. Typing a number (``12``,
``step 12``, ``eval 12``) offers that step when the run has it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from miles_tui.tui.app import MilesApp

POLL_CHOICES = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
"""Poll intervals the palette offers, in seconds."""

_STEP_QUERY = re.compile(r"\s*(?:(step|eval|s|e)\s*)?#?(\d+)\s*", re.IGNORECASE)


def _commands(app: MilesApp) -> list[tuple[str, str, Callable[[], object]]]:
    """(name, help, callback) of every command, as the app stands now."""
    commands: list[tuple[str, str, Callable[[], object]]] = [
        ("Metrics", "every dashboard series as charts (m)", app.action_metrics),
        ("GPUs", "utilisation, memory and phases per GPU (u)", app.action_compute),
        ("Scatter", "reward vs response length of the step in view (p on a step)", app.show_scatter),
        ("Outliers", "tokens and samples that stand out in the step in view (O)", app.show_outliers),
        ("Compare", "the step in view against the previous one (c)", app.show_compare),
        ("Advisories", "what needs attention, on the overview (a)", app.show_advisories),
        ("Follow on", "follow the newest step as it lands (f)", partial(app.set_follow, True)),
        ("Follow off", "stay where you are when new steps land (f)", partial(app.set_follow, False)),
    ]
    for action in ("engines",):
        method = getattr(app, f"action_{action}", None)
        if callable(method):
            commands.insert(2, (action.capitalize(), "inference engines: requests, KV cache, throughput", method))
    commands += [
        (f"Poll every {seconds:g} s", f"how often to look for new data (now {app.poll_seconds:g} s)",
         partial(app.set_poll, seconds))
        for seconds in POLL_CHOICES
    ]  # fmt: skip
    return commands


class RunCommands(Provider):
    """Commands that know the run: steps, views, follow and polling."""

    @property
    def miles(self) -> MilesApp:
        return cast("MilesApp", self.app)

    async def discover(self) -> Hits:
        latest = self.miles.model.latest
        if latest is not None:
            yield DiscoveryHit(f"Go to step {latest}", partial(self.miles.open_step, latest), help="the newest step")
        for name, help_text, callback in _commands(self.miles):
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        step = _STEP_QUERY.fullmatch(query)
        if step is not None:
            evaluation = (step.group(1) or "").lower() in ("eval", "e")
            rid = int(step.group(2))
            visible = self.miles.model.evaluation if evaluation else self.miles.model.train
            if rid in visible:
                kind = "eval step" if evaluation else "step"
                yield Hit(1.0, f"Go to {kind} {rid}", partial(self.miles.open_step, rid, evaluation))
        matcher = self.matcher(query)
        for name, help_text, callback in _commands(self.miles):
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
