"""The ``--dump-details`` format: reading steps, resolving sharded train rows, summaries.

Independent of ``telemetry``; joined with it only in ``miles_tui.core.follow``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from miles_tui.core.base.lazy_exports import lazy_getattr, public_names

if TYPE_CHECKING:
    from miles_tui.core.dump.column_rows import ColumnRows as ColumnRows
    from miles_tui.core.dump.cp import QkvFormat as QkvFormat
    from miles_tui.core.dump.cp import slice_response as slice_response
    from miles_tui.core.dump.record_schema import PER_TOKEN_FIELDS as PER_TOKEN_FIELDS
    from miles_tui.core.dump.resolve import FieldState as FieldState
    from miles_tui.core.dump.run import Run as Run
    from miles_tui.core.dump.run import SampleContext as SampleContext
    from miles_tui.core.dump.run_dir import RunDir as RunDir
    from miles_tui.core.dump.run_dir import StepFiles as StepFiles
    from miles_tui.core.dump.run_dir import StepIds as StepIds
    from miles_tui.core.dump.run_dir import StepKey as StepKey
    from miles_tui.core.dump.run_scan import RunScanner as RunScanner
    from miles_tui.core.dump.step import OpenStep as OpenStep
    from miles_tui.core.dump.step_summary import PER_TOKEN_STATISTICS as PER_TOKEN_STATISTICS
    from miles_tui.core.dump.step_summary import ROW_COLUMNS as ROW_COLUMNS
    from miles_tui.core.dump.step_summary import GroupRow as GroupRow
    from miles_tui.core.dump.step_summary import ProblemKind as ProblemKind
    from miles_tui.core.dump.step_summary import SampleRow as SampleRow
    from miles_tui.core.dump.step_summary import StepAggregate as StepAggregate
    from miles_tui.core.dump.step_summary import StepSummary as StepSummary
    from miles_tui.core.dump.summary import group_reward as group_reward
    from miles_tui.core.dump.summary_cache import decode_summary as decode_summary
    from miles_tui.core.dump.summary_cache import encode_summary as encode_summary
    from miles_tui.core.dump.token_view import SERIES as SERIES
    from miles_tui.core.dump.token_view import TokenView as TokenView
    from miles_tui.core.dump.token_view import find_view as find_view
    from miles_tui.core.dump.token_view import sample_array as sample_array
    from miles_tui.core.dump.token_view import token_payload as token_payload
    from miles_tui.core.dump.tokenizer import Detokenizer as Detokenizer
    from miles_tui.core.dump.trajectory import Conversation as Conversation
    from miles_tui.core.dump.trajectory import Message as Message
    from miles_tui.core.dump.trajectory import Sidecar as Sidecar
    from miles_tui.core.dump.trajectory import conversation_document as conversation_document
    from miles_tui.core.dump.trajectory import read_sidecar as read_sidecar
    from miles_tui.core.dump.trajectory import sidecar_path as sidecar_path
    from miles_tui.core.dump.trajectory import tool_call as tool_call

_EXPORTS = {
    "column_rows": ("ColumnRows",),
    "cp": ("QkvFormat", "slice_response"),
    "record_schema": ("PER_TOKEN_FIELDS",),
    "resolve": ("FieldState",),
    "run": ("Run", "SampleContext"),
    "run_dir": ("RunDir", "StepFiles", "StepIds", "StepKey"),
    "run_scan": ("RunScanner",),
    "step": ("OpenStep",),
    "step_summary": (
        "PER_TOKEN_STATISTICS",
        "ROW_COLUMNS",
        "GroupRow",
        "ProblemKind",
        "SampleRow",
        "StepAggregate",
        "StepSummary",
    ),
    "summary": ("group_reward",),
    "summary_cache": ("decode_summary", "encode_summary"),
    "token_view": ("SERIES", "TokenView", "find_view", "sample_array", "token_payload"),
    "tokenizer": ("Detokenizer",),
    "trajectory": (
        "Conversation",
        "Message",
        "Sidecar",
        "conversation_document",
        "read_sidecar",
        "sidecar_path",
        "tool_call",
    ),
}
"""Each submodule and the public names it defines, imported on first use (importing the package stays cheap)."""

__all__ = public_names(_EXPORTS)  # noqa: PLE0605 (derived: the TYPE_CHECKING block re-exports for mypy)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
