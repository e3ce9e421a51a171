"""The compare view's rows and headline: column specs and cell formatters, from core's comparison values.

A delta reads without colour too: an arrow and its size (``↑0.25``, ``↓3.0``, ``=``), coloured
only as a hint (green better, red worse, cyan neither). Unreadable rewards read UNREAD.
"""

from __future__ import annotations

from rich.text import Text

from miles_tui.core.analysis import (
    Delta,
    GroupComparison,
    GroupInStep,
    StepComparison,
)
from miles_tui.core.dump import group_reward
from miles_tui.tui.formatting import MISSING, number, percent, points, status_text, unread_text, unreadable
from miles_tui.tui.views.lazy_rows import TableRow
from miles_tui.tui.views.table_layout import Column

BETTER_UP = {"reward_mean": True, "truncated_frac": False, "avg_staleness": False, "zero_std_group_frac": False}
BETTER_UP |= {"mean_abs_lp_diff": False, "mixed_version_frac": False, "alignment_failed": False}
"""Figures where a rise is good (True) or bad (False); any other figure's change is neutral."""

FRACTIONS = frozenset({"truncated_frac", "zero_std_group_frac", "mixed_version_frac"})
"""Figures shown as percentages."""

HEADLINE = (
    ("reward_mean", "reward"),
    ("reward_std", "reward σ"),
    ("response_length_mean", "resp len"),
    ("truncated_frac", "trunc"),
    ("zero_std_group_frac", "zero-std groups"),
    ("avg_staleness", "stale"),
    ("mean_abs_lp_diff", "|lpΔ|"),
    ("mean_entropy", "entropy"),
    ("n_samples", "samples"),
)
"""Step-level figures in the header, in order (mixed versions and unreadable samples join when non-zero)."""

SLOT_WARNING = (
    "group slots, not prompts: numbering restarts each step, so slot g of A and of B are usually different "
    "prompts (the figures above compare the whole steps)"
)
"""Said on the per-group table itself: its deltas compare slots (core's compare module says why)."""

GROUP_COLUMNS = (
    Column("group", "slot", 5, grow=10, pinned=True),
    Column("n", "n A/B", 5, grow=13),
    Column("reward_a", "reward A", 6),
    Column("reward_b", "reward B", 6),
    Column("reward_d", "reward Δ", 7),
    Column("std_a", "σ A", 6),
    Column("std_b", "σ B", 6),
    Column("std_d", "σ Δ", 7),
    Column("zero_std", "zero-std A/B", 17, "center"),
    Column("len_a", "resp A", 6),
    Column("len_b", "resp B", 6),
    Column("len_d", "resp Δ", 7),
    Column("trunc_a", "trunc A", 5),
    Column("trunc_b", "trunc B", 5),
    Column("trunc_d", "trunc Δ", 6),
    Column("stale_a", "stale A", 5),
    Column("stale_b", "stale B", 5),
    Column("stale_d", "stale Δ", 6),
)

TRACE_COLUMNS = (
    Column("step", "step", 7, "left", grow=12, pinned=True),
    Column("sample", "sample", 7, grow=12),
    Column("n", "n", 3, grow=6),
    Column("reward", "reward", 7),
    Column("std", "σ", 6),
    Column("zero_std", "zero-std", 8, "center"),
    Column("len", "resp", 6),
    Column("trunc", "trunc", 5),
    Column("stale", "stale", 5),
    Column("status", "status", 10, "left", grow=20),
)


def figure_text(name: str, value: float | None) -> str:
    """A figure's value as the tables show it."""
    if name in FRACTIONS:
        return percent(value)
    if name in ("n", "n_samples", "alignment_failed"):
        return MISSING if value is None else str(round(value))
    if name in ("response_length_mean",):
        return number(value, 1)
    if name == "avg_staleness":
        return number(value, 2)
    return number(value)


def delta_text(delta: Delta) -> Text:
    """B − A as an arrow and a size (readable without colour), coloured by whether the change is good."""
    if delta.delta is None:
        return Text.styled(MISSING, "dim")
    if delta.delta == 0:
        return Text.styled("=", "dim")
    up = delta.delta > 0
    size = abs(delta.delta)
    shown = points(size) if delta.name in FRACTIONS else figure_text(delta.name, size)
    better = BETTER_UP.get(delta.name)
    style = "cyan" if better is None else ("green" if better == up else "red")
    return Text.styled(("↑" if up else "↓") + shown, style)


def headline(comparison: StepComparison, width: int) -> Text:
    """The step-level figures, ``reward 0.500→0.417 ↓0.083`` each, wrapped between figures to ``width`` cells."""
    extra = [
        (name, label)
        for name, label in (("mixed_version_frac", "mixed"), ("alignment_failed", "unreadable"))
        if comparison.figure(name).a or comparison.figure(name).b
    ]
    text, used = Text(), 0
    for name, label in [*HEADLINE, *extra]:
        delta = comparison.figure(name)
        chip = Text.assemble(
            (f"{label} ", "dim"), f"{figure_text(name, delta.a)}→{figure_text(name, delta.b)} ", delta_text(delta)
        )
        if used and used + 3 + chip.cell_len > width:
            text.append("\n")
            used = 0
        elif used:
            text.append(" │ ", style="dim")
            used += 3
        text.append_text(chip)
        used += chip.cell_len
    return text


def _zero_std(group: GroupComparison, unread_a: bool, unread_b: bool) -> Text:
    def mark(present: bool, zero: bool, unread: bool) -> str:
        return MISSING if not present else ("?" if unread else "zero-std" if zero else "·")

    a = mark(group.a is not None, group.a is not None and group.a.zero_std, unread_a)
    b = mark(group.b is not None, group.b is not None and group.b.zero_std, unread_b)
    return Text.styled(f"{a}/{b}", "yellow" if "zero-std" in (a + b) else "")


def group_cells(group: GroupComparison, unread_a: bool = False, unread_b: bool = False) -> tuple[Text, ...]:
    """One group slot: A | B | Δ for each figure; ``unread_a``/``unread_b``: a reward of the group in that step
    is unreadable, so its reward figures there (and their deltas) read UNREAD (``?`` for degenerate)."""
    cells: list[Text] = [Text(MISSING if group.group_index is None else str(group.group_index))]
    n = group.delta("n")
    cells.append(Text(f"{figure_text('n', n.a)}/{figure_text('n', n.b)}"))
    for name in ("reward_mean", "reward_std"):
        delta = group.delta(name)
        a = unread_text() if unread_a else Text(figure_text(name, delta.a))
        b = unread_text() if unread_b else Text(figure_text(name, delta.b))
        cells += [a, b, unread_text() if unread_a or unread_b else delta_text(delta)]
        if name == "reward_std":
            cells.append(_zero_std(group, unread_a, unread_b))
    for name in ("response_length_mean", "truncated_frac", "avg_staleness"):
        delta = group.delta(name)
        cells += [Text(figure_text(name, delta.a)), Text(figure_text(name, delta.b)), delta_text(delta)]
    return tuple(cells)


def _zero_std_mark(zero_std: bool) -> Text:
    return Text.styled("zero-std", "yellow") if zero_std else Text.styled("·", "dim")


def trace_rows(trace: tuple[GroupInStep, ...], a: int, b: int, evaluation: bool) -> list[TableRow]:
    """A group slot in every step: a bold line per step, then its samples (unreadable rewards read UNREAD)."""
    reward_column = "reward" if evaluation else "raw_reward"
    rows = []
    for found in trace:
        f = found.figures
        marker = " A" if f.rollout_id == a else (" B" if f.rollout_id == b else "")
        unread = any(unreadable(row, reward_column) for row in found.rows)
        rows.append(
            TableRow(
                ("step", f.rollout_id),
                (
                    Text(f"{f.rollout_id}{marker}"),
                    Text.styled("group", "dim"),
                    Text(str(f.n)),
                    unread_text() if unread else Text(number(f.reward_mean)),
                    unread_text() if unread else Text(number(f.reward_std)),
                    Text("?")
                    if unread
                    else Text.styled("zero-std", "yellow")
                    if f.zero_std
                    else Text.styled("·", "dim"),
                    Text(number(f.response_length_mean, 1)),
                    Text(percent(f.truncated_frac)),
                    Text(number(f.avg_staleness, 2)),
                    Text(""),
                ),
                "bold",
            )
        )
        for row in found.rows:
            rows.append(
                TableRow(
                    ("sample", f.rollout_id, row.sample_index),
                    (
                        Text(""),
                        Text(str(row.sample_index)),
                        Text(""),
                        unread_text()
                        if unreadable(row, reward_column)
                        else Text(number(group_reward(row, evaluation))),
                        Text(""),
                        Text(""),
                        Text(str(row.response_length)),
                        Text.styled("yes" if row.truncated else "no", "yellow" if row.truncated else "dim"),
                        Text(number(row.staleness)),
                        status_text(row, "" if row.status == "completed" else "yellow"),
                    ),
                    "dim" if row.remove_sample else "",
                )
            )
    return rows
