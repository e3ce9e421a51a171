"""``dashboard/metrics.jsonl``, the one stream that grows to millions of lines: decoded into columns.

``metric_store`` holds the series (``MetricStore``); ``metric_stream`` follows the file; ``metric_batch``
decodes a block of lines (``line_templates`` + the compiled ``_line_scan`` for lines of a shape seen before,
msgspec and ``json.loads`` for the rest, one result either way); ``metric_workers`` picks threads or
processes; ``metric_cache`` keeps decoded columns in the user cache; ``metric_export`` writes
``export --metrics``.
"""
