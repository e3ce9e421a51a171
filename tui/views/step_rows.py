"""The rollout table's rows: core's SampleRow and GroupRow values as cells, and the columns they fill.

Pure formatting, no state: nothing is recomputed here (every statistic comes
from core); the functions only decide how a value reads. A value that exists
but cannot be read reads ``UNREAD`` (``…`` while its step is still being
written), never ``–``, which means the dump has no such value; a group whose
rewards are partly unreadable shows no reward figures and is not marked
degenerate, since its spread is not known.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.text import Text

from miles_tui.core.dump import GroupRow, SampleRow, StepSummary
from miles_tui.core.dump.record_formats import UNKNOWN_FORMAT, unknown_columns
from miles_tui.tui.formatting import (
    MISSING,
    UNREAD,
    UNREAD_STYLE,
    number,
    number_within,
    percent,
    status_text,
    unread_text,
    unreadable,
    version_span,
)
from miles_tui.tui.views.table_layout import Column

SAMPLE_COLUMNS = (
    Column("sample_index", "sample", 7, grow=14, pinned=True),
    Column("group_index", "group", 7, grow=14, pinned=True),
    Column("status", "status", 9, "left", grow=20),
    Column("reward", "reward", 7),
    Column("raw_reward", "raw", 7),
    Column("normalized_reward", "norm", 7),
    Column("staleness", "stale", 5, grow=len(UNKNOWN_FORMAT)),
    Column("weight_version", "version", 9, "left", grow=24),
    Column("response_length", "resp", 6, grow=10),
    Column("total_length", "total", 6, grow=10),
    Column("turns", "turns", 5, grow=len(UNKNOWN_FORMAT)),
    Column("tool_calls", "tools", 5, grow=8),
    Column("mean_abs_lp_diff", "|lpΔ|", 7),
    Column("max_abs_lp_diff", "max|lpΔ|", 8),
    Column("mean_imp_ratio", "ratio", 7),
    Column("mean_entropy", "entropy", 7),
    Column("max_entropy", "maxH", 7),
    Column("adv_mean", "adv", 7),
    Column("adv_std", "adv σ", 7),
    Column("return_mean", "return", 7),
    Column("dumped_rank", "rank", 5, grow=8),
    Column("spec_accept_rate", "spec", 5, grow=len(UNKNOWN_FORMAT)),
    Column("prefix_cache_hit_rate", "cache", 5, grow=len(UNKNOWN_FORMAT)),
    Column("non_generation_time", "ngen s", 7),
    Column("alignment_failed", "per-token", 11, "left"),
)

GROUP_COLUMNS = (
    Column("group_index", "group", 7, grow=14, pinned=True),
    Column("n", "n", 4, grow=8),
    Column("reward_mean", "reward", 8),
    Column("reward_std", "std", 8),
    Column("response_length_mean", "resp len", 9),
    Column("truncated_frac", "trunc", 6),
    Column("zero_std", "zero-std", 11, "left"),
    Column("unreadable", "per-token", 11, "left", grow=18),
)

_SAMPLE_WIDTH = {column.key: max(column.width, column.grow) for column in SAMPLE_COLUMNS}
_GROUP_WIDTH = {column.key: max(column.width, column.grow) for column in GROUP_COLUMNS}


def _fit(value: float | int | None, column: str, digits: int = 3) -> str:
    """A sample cell's number in the shortest exact form its column holds (never a cut prefix)."""
    return number_within(value, _SAMPLE_WIDTH[column], digits)


UNKNOWN_STYLE = "bold magenta"
"""A value derived from a record field of a shape this reader does not know (never ``–``: it may exist)."""

STATUS_STYLE = {"completed": "", "truncated": "yellow", "aborted": "red", "failed": "bold red", "pending": "dim"}


def sample_cells(row: SampleRow, zero_std_groups: set[int | None], pending: bool = False) -> tuple[Text, ...]:
    """Format one ROW for the table (``pending``: the step is still being written).

    A value that exists but is unreadable reads ``UNREAD`` (``…`` while the step is still being written),
    never ``–``, which means the dump has no such value.
    """
    group = Text(MISSING if row.group_index is None else str(row.group_index))
    if row.group_index in zero_std_groups:
        group.append(" zero-std", style="yellow")
    status = status_text(row, STATUS_STYLE.get(row.status or "", ""))
    if row.alignment_failed and pending:
        align = Text("pending…", style="yellow")
    elif row.alignment_failed:
        align = Text("UNREADABLE", style=UNREAD_STYLE)
    elif row.dumped_rank is None:
        align = Text("no train row", style="dim")
    else:
        align = Text("ok", style="green")

    def value(column: str, text: str, style: str = "") -> Text:
        return unread_text(pending) if unreadable(row, column) else Text(text, style=style)

    drifted = unknown_columns(row.unknown_format)

    def known(column: str, cell: Text) -> Text:
        return Text(UNKNOWN_FORMAT, style=UNKNOWN_STYLE) if column in drifted else cell

    return (
        Text(str(row.sample_index)),
        group,
        status,
        Text(_fit(row.reward, "reward")),
        value("raw_reward", _fit(row.raw_reward, "raw_reward")),
        value("normalized_reward", _fit(row.normalized_reward, "normalized_reward")),
        known("staleness", Text(_fit(row.staleness, "staleness"), style="yellow" if (row.staleness or 0) >= 2 else "")),
        known("weight_version", Text(version_span(row), style="magenta" if row.mixed_version else "")),
        Text(str(row.response_length), style="yellow" if row.truncated else ""),
        Text(str(row.total_length)),
        known("turns", Text(str(row.turns))),
        Text(_fit(row.tool_calls, "tool_calls")),
        value("mean_abs_lp_diff", _fit(row.mean_abs_lp_diff, "mean_abs_lp_diff")),
        value("max_abs_lp_diff", _fit(row.max_abs_lp_diff, "max_abs_lp_diff")),
        value("mean_imp_ratio", _fit(row.mean_imp_ratio, "mean_imp_ratio")),
        value("mean_entropy", _fit(row.mean_entropy, "mean_entropy")),
        value("max_entropy", _fit(row.max_entropy, "max_entropy")),
        value("adv_mean", _fit(row.adv_mean, "adv_mean")),
        value("adv_std", _fit(row.adv_std, "adv_std")),
        value("return_mean", _fit(row.return_mean, "return_mean")),
        value("dumped_rank", _fit(row.dumped_rank, "dumped_rank")),
        known("spec_accept_rate", Text(percent(row.spec_accept_rate))),
        known("prefix_cache_hit_rate", Text(percent(row.prefix_cache_hit_rate))),
        Text(_fit(row.non_generation_time, "non_generation_time", 2)),
        align,
    )


def sample_widths(rows: Sequence[SampleRow]) -> dict[str, int]:
    """Cells the data-sized sample columns need (ids, lengths, version labels)."""
    widths: dict[str, int] = {}

    def need(key: str, texts: list[str], extra: int = 0) -> None:  # cells, not characters: 日本 is 4 wide
        widths[key] = max((cell_len(t) for t in texts), default=0) + extra

    need("sample_index", [str(r.sample_index) for r in rows])
    need("status", [status_text(r).plain for r in rows])
    need("group_index", [MISSING if r.group_index is None else str(r.group_index) for r in rows], 9)
    need("response_length", [str(r.response_length) for r in rows])
    need("total_length", [str(r.total_length) for r in rows])
    need("turns", [str(r.turns) for r in rows])
    need("tool_calls", [number(r.tool_calls) for r in rows])
    need("dumped_rank", [number(r.dumped_rank) for r in rows])
    need("weight_version", [version_span(r) for r in rows])
    for row in rows:  # a column of an unrecognised field shows its label whole
        for key in unknown_columns(row.unknown_format):
            widths[key] = max(widths.get(key, 0), len(UNKNOWN_FORMAT))
    return widths


def unknown_format_count(summary: StepSummary, field: str) -> int:
    """Samples of the step whose ``field`` has a shape the reader does not know (their figures are left out)."""
    return sum(1 for row in summary.rows if row.unknown_format and field in row.unknown_format.split())


def group_unreadable(summary: StepSummary) -> dict[int | None, int]:
    """Per group: samples whose per-token data is unreadable."""
    counts: dict[int | None, int] = {}
    for row in summary.rows:
        if row.alignment_failed:
            counts[row.group_index] = counts.get(row.group_index, 0) + 1
    return counts


def group_rewards_unreadable(summary: StepSummary) -> set[int | None]:
    """Groups with a member whose group reward exists but cannot be read (so the group's figures are unknown)."""
    column = "reward" if summary.evaluation else "raw_reward"
    return {row.group_index for row in summary.rows if unreadable(row, column)}


def zero_std_groups(summary: StepSummary) -> set[int | None]:
    """Degenerate groups, leaving out those with an unreadable reward (their spread is not known)."""
    return {g.group_index for g in summary.groups if g.zero_std} - group_rewards_unreadable(summary)


def group_cells(
    group: GroupRow, unread: int = 0, rewards_unread: bool = False, pending: bool = False, trained: bool = True
) -> tuple[Text, ...]:
    """Format one GROUP row; ``unread``: its samples with unreadable per-token data; ``rewards_unread``: some
    reward of the group is unreadable, so its reward figures cannot be computed exactly; ``trained``: some
    sample of the group has a train row (else the per-token column has nothing to say)."""
    if rewards_unread:
        reward: tuple[Text, ...] = (unread_text(pending), unread_text(pending))
        degenerate = unread_text(pending)
    else:
        reward = (
            Text(number_within(group.reward_mean, _GROUP_WIDTH["reward_mean"])),
            Text(number_within(group.reward_std, _GROUP_WIDTH["reward_std"])),
        )
        degenerate = Text("zero-std", style="bold yellow") if group.zero_std else Text("no", style="dim")
    if unread and pending:
        per_token = Text(f"{unread} pending…", style="yellow")
    elif unread:
        per_token = Text(f"{unread} {UNREAD}", style=UNREAD_STYLE)
    elif trained:
        per_token = Text("ok", style="green")
    else:
        per_token = Text(MISSING, style="dim")
    return (
        Text(MISSING if group.group_index is None else str(group.group_index)),
        Text(str(group.n)),
        *reward,
        Text(number_within(group.response_length_mean, _GROUP_WIDTH["response_length_mean"], 1)),
        Text(percent(group.truncated_frac)),
        degenerate,
        per_token,
    )
