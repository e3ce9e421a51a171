"""``export``'s telemetry options: ``--phases | --gpu | --engines`` (JSON or CSV), ``--parquet DIR``, and the
window ``--since/--until`` both take. Headless: never imports textual."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from miles_tui.core.base.export_window import ACCEPTED, TimeBound, parse_time
from miles_tui.core.base.inert_text import inert

STREAM_FLAGS = ("phases", "gpu", "engines")


def _time(text: str) -> TimeBound:
    try:
        return parse_time(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The telemetry export options, on ``export``'s parser."""
    parser.add_argument(
        "--phases", action="store_true", help="the phase records (dashboard/phases/), in the window, as columns"
    )
    parser.add_argument("--gpu", action="store_true", help="the GPU samples (dashboard/gpu_util/), in the window")
    parser.add_argument(
        "--engines", action="store_true", help="the engine scrapes (dashboard/engine_series/), in the window"
    )
    parser.add_argument(
        "--since", type=_time, metavar="WHEN", help=f"window start for --phases/--gpu/--engines/--parquet: {ACCEPTED}"
    )
    parser.add_argument("--until", type=_time, metavar="WHEN", help="window end (inclusive), as --since")
    parser.add_argument(
        "--parquet",
        type=Path,
        metavar="DIR",
        help="write DIR/samples.parquet (every step's rows) and DIR/{phases,gpu_util,engine_series}.parquet "
        "(needs the optional extra: pip install 'miles-tui[parquet]')",
    )


def chosen(args: argparse.Namespace) -> list[str]:
    """The stream flags given."""
    return [flag for flag in STREAM_FLAGS if getattr(args, flag)]


def wanted(args: argparse.Namespace) -> bool:
    """Whether the command asks for a telemetry export (or Parquet)."""
    return bool(chosen(args)) or args.parquet is not None


def usage_problem(args: argparse.Namespace) -> str | None:
    """Why these options do not go together (None: they do)."""
    streams = chosen(args)
    if not wanted(args):
        if args.since is not None or args.until is not None:
            return "--since/--until window a telemetry export: use them with --phases, --gpu, --engines or --parquet"
        return None
    if len(streams) > 1 or (streams and args.parquet is not None):
        return "export one of --phases, --gpu, --engines, --parquet at a time"
    others = args.step is not None or args.metrics is not None or args.sample is not None or args.tokens
    if others or args.per_token or args.eval or args.conversation:
        return "--phases/--gpu/--engines/--parquet export the run's telemetry: leave out --step/--metrics and the rest"
    if args.parquet is not None and args.format == "csv":
        return "--parquet writes Parquet files: leave out --format csv"
    return None


def _warn(problems: list[dict[str, Any]]) -> None:
    for problem in problems:
        print(inert(f"miles-tui: warning: {problem['message']}"), file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Print the stream's window as JSON or CSV, or write the Parquet folder and print what it holds."""
    run_dir = Path(args.run_dir)
    if args.parquet is not None:
        from miles_tui.core.commands.parquet_export import write_parquet

        done = write_parquet(run_dir, args.parquet, time.time(), args.since, args.until)
        _warn(done["problems"])
        sys.stdout.write(json.dumps(done, allow_nan=False) + "\n")
        return 0
    from miles_tui.core.commands.telemetry_export import STREAMS, read_window, records_csv, stream_export

    window = read_window(run_dir, STREAMS[chosen(args)[0]], args.since, args.until)
    document = stream_export(window)
    _warn(document["problems"])
    if args.format == "csv":
        sys.stdout.write(records_csv(document))
        return 0
    import orjson  # a month of GPU samples is millions of values: several times faster than json

    try:
        encoded = orjson.dumps(document)
    except orjson.JSONEncodeError:  # an int beyond 64 bits in a record: json writes it exactly
        encoded = json.dumps(document, allow_nan=False).encode()
    sys.stdout.flush()
    sys.stdout.buffer.write(encoded + b"\n")
    sys.stdout.buffer.flush()
    return 0
