"""The command palette's own commands (ctrl+p): go to a step, open each view, follow, poll interval.

Textual's system commands (theme, quit, keys) stay beside these. Typing a number (``12``,
``step 12``, ``eval 12``) offers that step first (and its eval step, when the run has one), or says
the run has no such step; the poll intervals are offered only to a query that says ``poll``, so a
number never lands on one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from miles_tui.tui.formatting import significant
from miles_tui.tui.palette.baseline_commands import baseline_commands, baseline_path_hit

if TYPE_CHECKING:
    from miles_tui.tui.model.monitor_app import MonitorApp

POLL_CHOICES = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
"""Poll intervals the palette offers, in seconds."""

_STEP_QUERY = re.compile(r"\s*(?:(step|eval|s|e)\s*)?#?(\d+)\s*", re.IGNORECASE)

_STEP_SCORE = 100.0
"""Above any fuzzy score (those grow past 1), so a step the number names is always listed first."""


def _commands(app: MonitorApp) -> list[tuple[str, str, Callable[[], object]]]:
    """(name, help, callback) of every command but the poll intervals, as the app stands now."""
    commands: list[tuple[str, str, Callable[[], object]]] = [
        ("Metrics", "every dashboard series as charts (m)", app.navigation.metrics),
        ("GPUs", "utilisation, memory and phases per GPU (u)", app.navigation.compute),
        ("Scatter", "reward vs response length of the step in view (p on a step)", app.navigation.show_scatter),
        (
            "Batch anatomy",
            "each sample's lifecycle in the step in view: queued, generating, tool calls, consumed (a on a step)",
            app.navigation.show_anatomy,
        ),
        ("Outliers", "tokens and samples that stand out in the step in view (O)", app.navigation.show_outliers),
        ("Compare", "the step in view against the previous one (c)", app.navigation.show_compare),
        ("Advisories", "what needs attention, on the overview (a)", app.navigation.show_advisories),
        (
            "Advisory log",
            "every advisory the run has had: first and last step, active or cleared (a a)",
            app.navigation.show_advisory_log,
        ),
        ("Track newest on", "move to the newest step as it lands (f)", partial(app.set_follow, True)),
        ("Track newest off", "stay where you are when new steps land (f)", partial(app.set_follow, False)),
    ]
    link = app.wandb()
    if link is not None and link.url is not None:
        page = "the run's page" if link.run_known else "the project's page: the run id is not recorded"
        commands.append(("Copy W&B run URL", f"{page} (W)", app.action_copy_wandb))
    commands += baseline_commands(app)
    for action in ("engines",):
        method = getattr(app, f"action_{action}", None)
        if callable(method):
            commands.insert(2, (action.capitalize(), "inference engines: requests, KV cache, throughput", method))
    return commands


def _poll_commands(app: MonitorApp) -> list[tuple[str, str, Callable[[], object]]]:
    """(name, help, callback) of each poll interval the palette offers."""
    now = significant(app.poll_seconds, 6)
    return [
        (f"Poll every {significant(seconds, 6)} s", f"how often to look for new data (now {now} s)",
         partial(app.set_poll, seconds))
        for seconds in POLL_CHOICES
    ]  # fmt: skip


def _step_list(ids: tuple[int, ...]) -> str:
    """The visible steps of one kind, short: ``0–3`` when they run on, else the first few."""
    if not ids:
        return "none"
    if list(ids) == list(range(ids[0], ids[-1] + 1)) and len(ids) > 2:
        return f"{ids[0]}–{ids[-1]}"
    shown = ", ".join(str(rid) for rid in ids[:6])
    return shown + (", …" if len(ids) > 6 else "")


class RunCommands(Provider):
    """Commands that know the run: steps, views, follow and polling."""

    @property
    def miles(self) -> MonitorApp:
        return cast("MonitorApp", self.app)

    async def discover(self) -> Hits:
        latest = self.miles.model.latest
        if latest is not None:
            yield DiscoveryHit(
                f"Go to step {latest}", partial(self.miles.navigation.open_step, latest), help="the newest step"
            )
        for name, help_text, callback in _commands(self.miles) + _poll_commands(self.miles):
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        path_hit = baseline_path_hit(self.miles, query)
        if path_hit is not None:
            yield path_hit
        step = _STEP_QUERY.fullmatch(query)
        if step is not None:
            for hit in self._step_hits(int(step.group(2)), (step.group(1) or "").lower()):
                yield hit
            return
        matcher = self.matcher(query)
        commands = _commands(self.miles)
        if "poll" in query.lower():
            commands += _poll_commands(self.miles)
        for name, help_text, callback in commands:
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)

    def _step_hits(self, rid: int, prefix: str) -> list[Hit]:
        """The steps a number names: the train step first, then the eval step; or why there is none.

        ``eval 3`` names only the eval step; ``3`` and ``step 3`` name both kinds, so a step that
        exists only as an eval step is still found.
        """
        model = self.miles.model
        kinds = (True,) if prefix in ("eval", "e") else (False, True)
        hits = []
        for rank, evaluation in enumerate(kinds):
            if rid in (model.evaluation if evaluation else model.train):
                label = f"Go to step {rid}{' eval' if evaluation else ''}"
                help_text = "the eval batch of that step" if evaluation else None
                hits.append(
                    Hit(
                        _STEP_SCORE - rank,
                        label,
                        partial(self.miles.navigation.open_step, rid, evaluation),
                        help=help_text,
                    )
                )
        if hits:
            return hits
        kind = "eval step" if kinds == (True,) else "step"
        visible = _step_list(model.evaluation if kinds == (True,) else model.train)
        seen = f"{kind}s: {visible}"
        if kinds != (True,) and model.evaluation:
            seen += f"; eval steps: {_step_list(model.evaluation)}"
        message = f"no {kind} {rid}"
        return [
            Hit(
                _STEP_SCORE,
                message,
                partial(self.miles.notify, f"the run has {message} ({seen})", timeout=4),
                help=seen,
            )
        ]
