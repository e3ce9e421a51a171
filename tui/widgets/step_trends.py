"""Trend sparklines across steps: one line per headline figure, oldest left, newest right."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, Sparkline

from core.summary import StepAggregate
from tui.formatting import number, percent

TRENDS: tuple[tuple[str, str], ...] = (
    ("reward_mean", "reward"),
    ("zero_std_group_frac", "zero-std"),
    ("truncated_frac", "truncated"),
    ("avg_staleness", "staleness"),
    ("mean_abs_lp_diff", "|lp Δ|"),
)


class StepTrends(Vertical):
    """Sparklines of step aggregates; steps without a summary yet are skipped."""

    DEFAULT_CSS = """
    StepTrends { height: auto; }
    StepTrends > Horizontal { height: 1; }
    StepTrends Label.trend-name { width: 10; }
    StepTrends Label.trend-value { width: 9; text-align: right; }
    StepTrends Sparkline { width: 1fr; height: 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        for key, label in TRENDS:
            with Horizontal():
                yield Label(label, classes="trend-name")
                yield Sparkline([], id=f"trend-{key}", summary_function=max)
                yield Label("–", id=f"trend-value-{key}", classes="trend-value")

    def show(self, aggregates: Sequence[StepAggregate]) -> None:
        """Redraw from train-step aggregates in step order (a value label only when its text changes:
        updating a label lays the screen out again)."""
        for key, _ in TRENDS:
            values = [getattr(a, key) for a in aggregates]
            present = [float(v) for v in values if v is not None]
            self.query_one(f"#trend-{key}", Sparkline).data = present
            last = next((v for v in reversed(values) if v is not None), None)
            text = percent(last) if key.endswith("_frac") else number(last, 3)
            if self._shown.get(key) != text:
                self._shown[key] = text
                self.query_one(f"#trend-value-{key}", Label).update(text)
