"""The partitioned telemetry streams (``gpu_util``, ``phases``, ``engine_series``) as columns, each hour read once.

:mod:`.columns` decodes lines into checked columns, :mod:`.gpu_buckets` summarises GPU samples per lane in
fixed buckets, :mod:`.cache` keeps both per partition file in the user cache, and :mod:`.store` follows a
stream's files, reading only what a caller asks for and only bytes it has not read.
"""
