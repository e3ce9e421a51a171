"""miles_tui.core: everything the monitor knows, without a terminal.

Packages, from the bottom up (an import-linter `layers` contract in pyproject.toml keeps them so):

- ``errors``: the one exception hierarchy; every error names its file.
- ``dump``: the ``--dump-details`` format: torch.save archives (zip and pickle halves), CP math,
  step discovery, row resolution, steps, summaries and their cache, token views, tokenizer,
  trajectories.
- ``telemetry``: the append-only JSONL streams under ``dashboard/``: tail reading, stream
  records, the metric store, GPU samples, phases, time bins, columns.
- ``follow``: the one place that joins dump and telemetry into the state of a live run.
- ``analysis``: what the monitor concludes: advisories, compare, outliers, metric and compute
  view models.
- ``export``, ``report``: the headless commands; ``synth``: the writer and the demo run.
"""
