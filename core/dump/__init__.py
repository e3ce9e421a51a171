"""The ``--dump-details`` format: reading steps, resolving sharded train rows, summaries.

Independent of ``telemetry``; joined with it only in ``miles_tui.core.follow``.
"""
