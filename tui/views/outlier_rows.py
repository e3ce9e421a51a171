"""The outlier view's rows: column specs and cell formatters for ranked tokens and samples, from core's
outlier values (unreadable figures read UNREAD).
"""

from __future__ import annotations

from rich.text import Text

from miles_tui.core.analysis import (
    OutlierKind,
    SampleOutlier,
    TokenOutlier,
)
from miles_tui.tui.formatting import MISSING, number, status_text, unread_text, unreadable
from miles_tui.tui.views.table_layout import Column

KIND_LABELS = {OutlierKind.LP_DIFF: "|lpΔ|", OutlierKind.IMP_RATIO: "ratio", OutlierKind.ENTROPY: "entropy"}
"""Tab labels."""

RANKED_BY = {
    OutlierKind.LP_DIFF: ("|lpΔ|", "max|lpΔ|"),
    OutlierKind.IMP_RATIO: ("|log ratio| (ratio furthest from 1)", "|mean ratio − 1|"),
    OutlierKind.ENTROPY: ("entropy − sample median", "max entropy"),
}
"""What each kind ranks by: (tokens, samples)."""

_LEAD = (
    Column("rank", "#", 3, grow=5, pinned=True),
    Column("step", "step", 5, grow=9, pinned=True),
    Column("sample", "sample", 6, grow=12, pinned=True),
)
_SAMPLE_FIGURES = (
    Column("reward", "reward", 7),
    Column("stale", "stale", 5),
    Column("resp", "resp", 5),
    Column("status", "status", 10, "left", grow=20),
)
TOKEN_COLUMNS = {
    OutlierKind.LP_DIFF: (
        *_LEAD,
        Column("pos", "resp pos", 8, grow=11),
        Column("token", "token", 12, "left"),
        Column("value", "lpΔ", 8),
        Column("sample_stat", "max|lpΔ|", 8),
        *_SAMPLE_FIGURES,
    ),
    OutlierKind.IMP_RATIO: (
        *_LEAD,
        Column("pos", "resp pos", 8, grow=11),
        Column("token", "token", 12, "left"),
        Column("value", "ratio", 8),
        Column("sample_stat", "mean ratio", 8),
        *_SAMPLE_FIGURES,
    ),
    OutlierKind.ENTROPY: (
        *_LEAD,
        Column("pos", "resp pos", 8, grow=11),
        Column("token", "token", 12, "left"),
        Column("value", "entropy", 8),
        Column("score", "+median", 8),
        Column("sample_stat", "maxH", 7),
        *_SAMPLE_FIGURES,
    ),
}
SAMPLE_LABELS = {OutlierKind.LP_DIFF: "max|lpΔ|", OutlierKind.IMP_RATIO: "mean ratio", OutlierKind.ENTROPY: "maxH"}
SAMPLE_COLUMNS = (
    *_LEAD,
    Column("group", "group", 6, grow=10),
    Column("value", "value", 9),
    Column("mean_abs_lp_diff", "|lpΔ| μ", 8),
    Column("mean_entropy", "entropy", 7),
    *_SAMPLE_FIGURES,
)

TokenKey = tuple[str, int, int, int]
"""("token", rollout id, sample index, response position)."""
SampleKey = tuple[str, int, int]
"""("sample", rollout id, sample index)."""


def _token_text(texts: dict[int, str], token_id: int) -> Text:
    if token_id in texts:
        return Text(repr(texts[token_id]))
    return Text.styled(MISSING if token_id < 0 else f"id {token_id}", "dim")


def _sample_stat(outlier: TokenOutlier | SampleOutlier) -> float | None:
    row = outlier.row
    return {
        OutlierKind.LP_DIFF: row.max_abs_lp_diff,
        OutlierKind.IMP_RATIO: row.mean_imp_ratio,
        OutlierKind.ENTROPY: row.max_entropy,
    }[outlier.kind]


def _figures(outlier: TokenOutlier | SampleOutlier) -> tuple[Text, ...]:
    row = outlier.row
    status = status_text(row, "" if row.status == "completed" else "yellow")
    return (
        Text(number(row.reward)),
        Text.styled(number(row.staleness), "yellow" if (row.staleness or 0) >= 2 else ""),
        Text.styled(str(row.response_length), "yellow" if row.truncated else ""),
        status,
    )


def response_position(outlier: TokenOutlier) -> str:
    """Where the token is in the response as the sample screen says it: 1-based, of the response's
    length (``16/22``, shown there as ``response 16/22``)."""
    return f"{outlier.position + 1}/{outlier.row.response_length}"


def token_cells(rank: int, outlier: TokenOutlier, texts: dict[int, str]) -> tuple[Text, ...]:
    """One token line of the table."""
    lead = (
        Text(str(rank)),
        Text(str(outlier.rollout_id)),
        Text(str(outlier.sample_index)),
        Text(response_position(outlier)),
        _token_text(texts, outlier.token_id),
    )
    if outlier.kind is OutlierKind.ENTROPY:
        excess = Text.styled(f"+{number(outlier.score)}" if outlier.score >= 0 else number(outlier.score), "bold")
        values: tuple[Text, ...] = (Text.styled(number(outlier.value), "bold"), excess)
    else:
        values = (Text.styled(number(outlier.value), "bold"),)
    return (*lead, *values, Text(number(_sample_stat(outlier))), *_figures(outlier))


def sample_cells(rank: int, outlier: SampleOutlier) -> tuple[Text, ...]:
    """One sample line of the table."""
    row = outlier.row
    return (
        Text(str(rank)),
        Text(str(outlier.rollout_id)),
        Text(str(outlier.sample_index)),
        Text(MISSING if row.group_index is None else str(row.group_index)),
        Text.styled(number(outlier.value), "bold"),
        unread_text() if unreadable(row, "mean_abs_lp_diff") else Text(number(row.mean_abs_lp_diff)),
        unread_text() if unreadable(row, "mean_entropy") else Text(number(row.mean_entropy)),
        *_figures(outlier),
    )
