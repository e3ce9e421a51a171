"""The ``--dump-details`` format: reading steps, resolving sharded train rows, summaries.

Independent of ``telemetry``; joined with it only in ``miles_tui.core.follow``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from miles_tui.core.lazy_exports import lazy_getattr

if TYPE_CHECKING:
    from miles_tui.core.dump.column_rows import ColumnRows
    from miles_tui.core.dump.cp import QkvFormat, slice_response
    from miles_tui.core.dump.resolve import PER_TOKEN_FIELDS, FieldState
    from miles_tui.core.dump.run import Run, SampleContext
    from miles_tui.core.dump.run_dir import RunDir, StepFiles, StepIds
    from miles_tui.core.dump.run_scan import RunScanner
    from miles_tui.core.dump.step import OpenStep
    from miles_tui.core.dump.step_summary import (
        ROW_COLUMNS,
        GroupRow,
        ProblemKind,
        SampleRow,
        StepAggregate,
        StepSummary,
    )
    from miles_tui.core.dump.summary import group_reward
    from miles_tui.core.dump.summary_cache import decode_summary, encode_summary
    from miles_tui.core.dump.token_view import SERIES, TokenView, find_view, sample_array, token_payload
    from miles_tui.core.dump.tokenizer import Detokenizer
    from miles_tui.core.dump.trajectory import (
        Conversation,
        Message,
        Sidecar,
        conversation_document,
        read_sidecar,
        sidecar_path,
        tool_call,
    )

__all__ = [
    "PER_TOKEN_FIELDS",
    "ROW_COLUMNS",
    "SERIES",
    "ColumnRows",
    "Conversation",
    "Detokenizer",
    "FieldState",
    "GroupRow",
    "Message",
    "OpenStep",
    "ProblemKind",
    "QkvFormat",
    "Run",
    "RunDir",
    "RunScanner",
    "SampleContext",
    "SampleRow",
    "Sidecar",
    "StepAggregate",
    "StepFiles",
    "StepIds",
    "StepSummary",
    "TokenView",
    "conversation_document",
    "decode_summary",
    "encode_summary",
    "find_view",
    "group_reward",
    "read_sidecar",
    "sample_array",
    "sidecar_path",
    "slice_response",
    "token_payload",
    "tool_call",
]

_HOMES = {
    "ColumnRows": "column_rows",
    "QkvFormat": "cp",
    "slice_response": "cp",
    "FieldState": "resolve",
    "PER_TOKEN_FIELDS": "resolve",
    "Run": "run",
    "SampleContext": "run",
    "RunDir": "run_dir",
    "StepFiles": "run_dir",
    "StepIds": "run_dir",
    "RunScanner": "run_scan",
    "OpenStep": "step",
    "GroupRow": "step_summary",
    "ProblemKind": "step_summary",
    "ROW_COLUMNS": "step_summary",
    "SampleRow": "step_summary",
    "StepAggregate": "step_summary",
    "StepSummary": "step_summary",
    "group_reward": "summary",
    "decode_summary": "summary_cache",
    "encode_summary": "summary_cache",
    "SERIES": "token_view",
    "TokenView": "token_view",
    "find_view": "token_view",
    "sample_array": "token_view",
    "token_payload": "token_view",
    "Detokenizer": "tokenizer",
    "Conversation": "trajectory",
    "Message": "trajectory",
    "Sidecar": "trajectory",
    "conversation_document": "trajectory",
    "read_sidecar": "trajectory",
    "sidecar_path": "trajectory",
    "tool_call": "trajectory",
}
"""Each public name's defining module, imported on first use (importing the package stays cheap)."""

__getattr__ = lazy_getattr(__name__, _HOMES)
