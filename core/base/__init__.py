"""What both readers stand on: the error hierarchy (``errors``), the user cache dir (``cache_dir``), opening run
files safely (``run_files``), the append-only tail rule (``tail``), making run strings inert (``inert_text``),
JSON output (``json_out``), the packages' lazy exports (``lazy_exports``), the process's memory settings
(``memory_settings``, with numpy's private setter it needs: ``numpy_private``), pauses that leave the GIL to a
UI (``pacing``), the bounds of an export's time window (``export_window``) and starting worker processes inside
the running app (``worker_processes``). The base knows nothing of dumps, streams or what is made of them (an
import-linter contract).
"""
