"""miles_tui.core: everything the monitor knows, without a terminal.

Packages, from the bottom up (an import-linter `layers` contract in pyproject.toml keeps them so):

- ``base``: what everything stands on: the one exception hierarchy (every error names its file), the
  cache dir, safe opening of run files, the tail rule, inert text, lazy exports, memory settings.
- ``dump``: the ``--dump-details`` format: torch.save archives (``dump.pt``: zip and pickle halves),
  CP math, step discovery, row resolution, steps, summaries and their cache, token views, tokenizer,
  trajectories.
- ``telemetry``: the append-only JSONL streams under ``dashboard/``: stream records, the metric
  store (``telemetry.metrics``), GPU samples, phases, time bins, columns, the partitioned hours.
- ``follow``: the one place that joins dump and telemetry into the state of a live run.
- ``analysis``: what the monitor concludes: advisories, health, compare, outliers, view models.
- ``commands``: the headless ``export`` and ``report``; ``synth``: the writer and the demo run.
"""
