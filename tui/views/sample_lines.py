"""The sample screen's text lines: the chips above the tabs and the cursor line, from a prepared sample.

Pure formatters (a :class:`~miles_tui.tui.views.sample_tracks.SampleTracks`, the
cursor's :class:`~miles_tui.tui.views.token_window.TokenWindow` and a width in,
Content out), so the screen only decides when to show them. Every state
colour shows is also spelled out (trained / loss-masked / UNREADABLE /
masked), so the lines read under NO_COLOR. Strings from the run go through
:func:`~miles_tui.core.base.inert_text.inert` or ``repr``.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
import numpy.typing as npt
from textual.content import Content

from miles_tui.core.base.inert_text import inert
from miles_tui.core.dump import SERIES, Detokenizer, FieldState, OpenStep, SampleRow
from miles_tui.core.dump.record_formats import UNKNOWN_FORMAT, unknown_columns
from miles_tui.tui.formatting import MISSING, REMOVED, number, reading_text, version_span
from miles_tui.tui.views.sample_tracks import SampleTracks
from miles_tui.tui.views.token_window import TokenWindow

LABELS = {
    "rollout_log_probs": "rollout logp",
    "train_log_probs": "train logp",
    "ref_log_probs": "ref logp",
    "lp_diff": "lpΔ",
    "imp_ratio": "ratio",
    "entropy": "entropy",
    "ref_entropy": "ref entropy",
    "advantages": "advantage",
    "returns": "return",
}
"""Series names on the panels, in core's SERIES order."""

SHORT_LABELS = {
    "rollout_log_probs": "rollout",
    "train_log_probs": "train",
    "ref_log_probs": "ref",
    "lp_diff": "lpΔ",
    "imp_ratio": "ratio",
    "entropy": "entropy",
    "ref_entropy": "ref ent",
    "advantages": "adv",
    "returns": "return",
}
"""Series names on the cursor line."""

Part: TypeAlias = str | tuple[str, str]
"""A piece of Content: plain text, or text and its style."""


def chips(step: OpenStep, sample: SampleTracks) -> list[tuple[str, str]]:
    """The sample's facts above the tabs, as (text, style) chips."""
    row, view = sample.row, sample.view
    summary = step.summary
    members = [r.sample_index for r in summary.rows if r.group_index == row.group_index]
    status_style = {"completed": "$text-success", "truncated": "$text-warning"}.get(row.status or "", "$text-error")
    states = set(view.states.values())
    if FieldState.UNREADABLE in states:
        reason = (
            "its train file failed to load" if row.sample_index in step.unreadable else "slices could not be placed"
        )
        alignment = (f"per-token data UNREADABLE ({reason})", "bold $text-error")
    elif states == {FieldState.NOT_DUMPED}:
        alignment = ("per-token data not dumped", "$text-muted")
    elif FieldState.NOT_DUMPED in states:
        missing = sum(state is FieldState.NOT_DUMPED for state in view.states.values())
        alignment = (f"per-token ok ({missing} series not dumped)", "$text-success")
    else:
        alignment = ("per-token ok", "$text-success")
    result: list[tuple[str, str]] = [
        (f"{'eval ' if summary.evaluation else ''}step {summary.rollout_id} · sample {row.sample_index}", "bold"),
        (
            f"group {MISSING if row.group_index is None else row.group_index}"
            + (f" {members.index(row.sample_index) + 1}/{len(members)}" if row.group_index is not None else ""),
            "",
        ),
        (inert(row.status or MISSING), status_style),
        *([(f"{REMOVED} from training", "bold $text-error")] if row.remove_sample else []),
        (f"reward {number(row.reward)}", ""),
        *_version_chips(row),
        (f"prompt {view.prompt_length} + response {view.response_length} = {view.total_length} tok", ""),
        alignment,
    ]
    return result


def _version_chips(row: SampleRow) -> list[tuple[str, str]]:
    """Staleness and versions; "unknown format" when the sample's weight_versions has a shape not known."""
    if "staleness" in unknown_columns(row.unknown_format):
        return [(f"staleness and versions: {UNKNOWN_FORMAT} (weight_versions)", "bold $text-warning")]
    return [
        (f"staleness {MISSING if row.staleness is None else row.staleness}", ""),
        (version_span(row) + (" mixed" if row.mixed_version else ""), "$text-warning" if row.mixed_version else ""),
    ]


def chip_lines(chip_list: list[tuple[str, str]], width: int) -> Content:
    """Chips separated by bars, wrapped between chips (never inside one) to ``width`` cells."""
    parts: list[Part] = []
    used = 0
    for text, style in chip_list:
        if used and used + 3 + len(text) > width:
            parts.append("\n")
            used = 0
        elif used:
            parts.append((" │ ", "$text-muted"))
            used += 3
        parts.append((text, style))
        used += len(text)
    return Content.assemble(*parts)


def escape(text: str) -> str:
    """A token's text with its control characters and quotes escaped, as ``repr`` shows them."""
    return repr(text)[1:-1]


def context(
    texts: list[str], prompt_length: int, position: int, trained: npt.NDArray[np.bool_], width: int
) -> list[Part]:
    """The tokens around the cursor as text, the cursor token centred and reversed, within ``width``."""
    budget = max(width - len(escape(texts[position])) - 2, 0) // 2
    lo, used = position, 0
    while lo > 0 and used + len(escape(texts[lo - 1])) <= budget:
        lo -= 1
        used += len(escape(texts[lo]))
    hi, used = position + 1, 0
    while hi < len(texts) and used + len(escape(texts[hi])) <= budget:
        used += len(escape(texts[hi]))
        hi += 1
    parts: list[Part] = [("…" if lo > 0 else "", "$text-muted")]
    for index in range(lo, hi):
        if index == position:
            style = "reverse bold"
        elif index < prompt_length:
            style = "$text-muted italic"
        elif not trained[index - prompt_length]:
            style = "$text-warning"
        else:
            style = "underline" if index % 2 else ""
        parts.append((escape(texts[index]), style))
    parts.append(("…" if hi < len(texts) else "", "$text-muted"))
    return parts


def value_rows(sample: SampleTracks, width: int) -> list[list[str]]:
    """The series on the cursor line, split in two rows when one would not fit the width."""
    names = [name for name in SERIES if name in sample.tracks]
    needed = sum(len(SHORT_LABELS[name]) + 13 for name in names)
    if needed <= width - 2 or len(names) < 2:
        return [names]
    half = (len(names) + 1) // 2
    return [names[:half], names[half:]]


def cursor_rows(sample: SampleTracks, detokenizer: Detokenizer | None, width: int) -> int:
    """How many rows :func:`cursor_line` takes at ``width``."""
    texts = 1 if sample.texts is not None or detokenizer is not None else 0
    unreadable = 1 if any(s is FieldState.UNREADABLE for s in sample.view.states.values()) else 0
    return 1 + texts + max(len(value_rows(sample, width)), unreadable)


def cursor_line(sample: SampleTracks, window: TokenWindow, detokenizer: Detokenizer | None, width: int) -> Content:
    """Exactly ``cursor_rows()`` lines (the widget does not wrap them): a key press never relayouts."""
    r = window.cursor
    view = sample.view
    if view.response_length == 0:
        return Content("this sample has an empty response: no per-token values")
    position = view.prompt_length + r
    trained = bool(view.trained()[r])
    parts: list[Part] = [
        ("token ", "$text-muted"),
        (f"{position}", "bold"),
        (f"  response {r + 1}/{view.response_length}  id ", "$text-muted"),
        (str(view.token_ids[position]), "bold"),
    ]
    if sample.texts is not None:
        parts += [("  text ", "$text-muted"), (repr(sample.texts[position]), "bold")]
    if view.loss_mask is None and any(s is FieldState.UNREADABLE for s in view.states.values()):
        parts.append(("  loss mask unreadable", "$text-warning"))  # the train row holding it failed: unknown
    elif view.evaluation:  # an eval sample is never trained on, whatever its mask says
        mask_text = "no loss mask" if view.loss_mask is None else f"mask {int(view.loss_mask[r])}"
        parts.append((f"  {mask_text} (eval: not trained)", "$text-muted"))
    elif view.loss_mask is None:
        parts.append(("  no loss mask (trained)", "$text-success"))
    else:
        mask = int(view.loss_mask[r])
        parts.append(
            (f"  mask {mask} (trained)", "$text-success")
            if trained
            else (f"  mask {mask} (loss-masked)", "$text-warning")
        )
    rank = window.on_outlier()
    if rank is not None:
        parts.append((f"  outlier #{rank + 1}/{len(window.outliers)}", "$text-error"))
    if sample.texts is not None:
        parts.append("\n")
        parts += context(sample.texts, view.prompt_length, position, view.trained(), width - 2)
    elif sample.text_notice is not None:
        parts += ["\n", (inert(sample.text_notice), "$text-warning")]
    elif detokenizer is not None and detokenizer.status.reason:
        parts += ["\n", (inert(detokenizer.status.reason), "$text-muted")]
    rows = value_rows(sample, width)
    unreadable = [SHORT_LABELS[n] for n in SERIES if view.states[n] is FieldState.UNREADABLE]
    for index in range(max(len(rows), 1 if unreadable else 0)):
        parts.append("\n")
        for name in rows[index] if index < len(rows) else ():
            value = sample.value(name, r)
            parts += [
                (f"{SHORT_LABELS[name]} ", "$text-muted"),
                (f"{reading_text(value)}  ", "bold" if value is not None else ""),
            ]
        if unreadable and index == len(rows) - 1:
            parts.append((f"UNREADABLE: {', '.join(unreadable)}", "$text-error"))
    return Content.assemble(*parts)
