"""The append-only JSONL telemetry under ``RUN_DIR/dashboard``: tails, records, series.

Independent of ``dump``; joined with it only in ``miles_tui.core.follow``.
"""
